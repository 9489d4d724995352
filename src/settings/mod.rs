//! Per-session approval settings: the record ([`model`]) and the store with
//! its in-memory view ([`store`]).
pub mod model;
pub mod store;
