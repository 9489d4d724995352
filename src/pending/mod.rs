//! The pending inbox: held calls.
pub mod compact;
pub mod cursor;
pub mod index;
pub mod record;
pub mod store;
