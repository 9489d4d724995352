//! The test kit's own tests, one binary: the test engine against the
//! behaviour of the real engine, and the peer doubles against the harness,
//! session manager and shell they imitate. Tests that describe the real
//! engine also run on one when `III_ENGINE_BIN` points at it (or `iii` is on
//! `PATH`).

mod console;
mod doubles;
mod http;
mod name_lease;
mod test_engine;
