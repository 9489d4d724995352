//! Approval links (`architecture/contract.md` § Approval links and the inbox
//! page; the threat model is `architecture/links.md`): a URL per held call
//! that a human can open on a phone to decide it, and the inbox page that
//! lists them.
//!
//! The pure core: tokens, the inbox's bearer check and the compiled
//! configuration live below the surfaces, in `crate::link_token` (the
//! configuration compiles them, the pending inbox mints links with them);
//! here are the pages with their headers ([`page`]) and the HTTP
//! request/response shapes and the same-origin check ([`http`]). The thin
//! shell, `serve`, registers the three HTTP functions, binds their routes
//! while links are on, looks records up and decides through the one release
//! path, the one `approval::resolve` takes.
//!
//! # Token format
//!
//! `approval_url = <public_base_url>/approvals/<token>`, where the token is
//! unpadded base64url of a version-1 payload
//! `0x01 ‖ kind ‖ pending_at (u64 BE) ‖ u16 len ‖ session_id ‖ u16 len ‖ function_call_id`
//! followed by its 32-byte tag
//! `HMAC-SHA256(links.secret, "approval-gate/link/v1" ‖ 0x00 ‖ payload)`.
//! Ids are at most `MAX_ID_BYTES` UTF-8 bytes each (a record with a
//! longer id gets no link), so a token is at most `MAX_TOKEN_LEN`
//! characters and anything longer is refused unread. A token for a UUID
//! session id and a 30-character call id is 150 characters.
//!
//! # What a token proves
//!
//! That this worker, holding `links.secret`, issued it for exactly one
//! revision `(session_id, function_call_id, pending_at, kind)` of one record.
//! It does not say who presents it: it is a bearer capability, like the
//! link in a password-reset mail. It carries no expiry of its own; it dies
//! with its revision:
//!
//! ```text
//! verify(token) fails                       → 403 (tampered, truncated, other secret)
//! no record under (session_id, call_id)     → 410 (resolved, expired, purged)
//! record there, !revision.matches(..)      → 410 (replaced by a newer prompt)
//! record there, revision.matches(..)       → the page / the decision
//! ```
//!
//! # What a leaked link allows (decided)
//!
//! Whoever has the URL may, only while that revision is held, see what the
//! call page shows (the redacted arguments, the session title, the folder)
//! and make one of the decisions the page offers for that one call:
//! allow, deny, and the wider choices offered with them — "allow and don't
//! ask again in this session" (an `approve-always` grant of that function in
//! that session) on a function hold, `session` / `always` on a folder
//! prompt (the latter adds the folder to the shell's allowed roots for
//! every session) — and, when 2 to 32 function calls of the same turn are
//! held, "Allow all" of exactly the calls the page lists (a separate batch
//! token, `crate::link_token::batch`). Nothing else: no other call, no later hold of the same
//! ids, no listing (the inbox needs `inbox_token`), no settings or mode
//! change beyond those choices. After the decision, the expiry, or a purge
//! the link answers 410. Rotating `links.secret` voids every outstanding
//! link at once.
//!
//! # Headers
//!
//! Every response from the link endpoints carries [`page::html_headers`]
//! (or [`page::json_headers`] for a POST's JSON answer):
//!
//! ```text
//! Content-Type: text/html; charset=utf-8          (application/json for POST answers)
//! Content-Security-Policy: default-src 'none'; script-src 'sha256-…'; style-src 'sha256-…';
//!     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none';
//!     require-trusted-types-for 'script'
//! Cache-Control: no-store
//! Referrer-Policy: no-referrer
//! X-Content-Type-Options: nosniff
//! X-Frame-Options: DENY
//! ```
//!
//! The two hashes are those of the one inline stylesheet and the one inline
//! script ([`page::content_security_policy`]); `Referrer-Policy` keeps the
//! token out of any other site's logs, `no-store` out of caches.

pub(crate) mod http;
pub(crate) mod page;
mod serve;

pub(crate) use serve::{register, LinkRoutes, DECIDE_ID, HTTP, INBOX_ID, PAGE_ID};
