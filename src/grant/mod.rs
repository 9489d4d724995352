//! Folder-access grants: recognising a jail rejection's `grant_hint=` ([`hint`]).
pub mod hint;
