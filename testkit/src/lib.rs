//! Test support for approval-gate: an in-process engine that speaks the iii
//! wire protocol, a fixture that starts either it or a real engine, doubles
//! for the peers that cannot be installed here (harness, session manager,
//! shell — each as the brief describes it or as it ships today, see
//! [`harness`]), and a launcher for the worker binary as a child process.
//!
//! It does not depend on the worker: everything here talks to it over the
//! engine, as its peers do. The worker's tests, examples and benches use it
//! as a dev-dependency.
pub mod commands;
pub mod console;
pub mod engine;
pub mod fixture;
pub mod harness;
pub mod redis;
pub mod reviewer;
pub mod session;
pub mod shell;
pub mod targets;
mod time;
pub mod worker;
