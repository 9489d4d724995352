//! The pending inbox: held calls.
pub mod cursor;
pub mod index;
pub mod record;
pub mod store;
