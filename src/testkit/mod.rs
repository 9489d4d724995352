//! Test support, behind the `testkit` feature: an in-process engine that speaks
//! the iii wire protocol, a fixture that starts either it or a real engine, and
//! doubles for the peers that cannot be installed here (harness, session
//! manager, shell).
pub mod engine;
pub mod fixture;
pub mod harness;
pub mod session;
pub mod shell;
pub mod targets;
pub mod worker;
