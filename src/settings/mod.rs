//! Per-session approval settings.
pub mod model;
