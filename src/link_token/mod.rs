//! Approval links' tokens, below every surface (`architecture/contract.md`
//! § Approval links and the inbox page; the format and what a token proves
//! are in `crate::links`): signed one-revision tokens ([`token`]), the
//! "Allow all" tokens over a turn's listed revisions ([`batch`]), the
//! inbox's bearer check ([`bearer`]) and the compiled `links` configuration
//! that mints a record's `approval_url` ([`mint`]). The configuration compiles
//! it, the pending inbox mints with it, the link surface verifies with it.

pub(crate) mod batch;
pub(crate) mod bearer;
pub(crate) mod mint;
pub(crate) mod token;

pub(crate) use mint::{Links, LinksError};
