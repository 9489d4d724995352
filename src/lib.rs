//! approval-gate: decides, one function call at a time, whether an agent's call
//! may run, must be denied, or must wait for a human, and routes the human's
//! answer back to the parked turn.
//!
//! The crate is a functional core with a thin imperative shell:
//!
//! * pure modules — [`policy`] (rule compilation and the decision ladder),
//!   [`redact`], [`settings::model`], [`pending::record`], [`pending::index`],
//!   [`pending::cursor`] — have no SDK types in their signatures;
//! * the shell — [`functions`] (one file per `approval::*` function),
//!   [`boot`], [`client`] — talks to the engine.

pub mod boot;
pub mod client;
pub mod config;
pub mod deep;
pub mod error;
pub mod functions;
pub mod grant;
pub mod links;
pub mod manifest;
pub mod pending;
pub mod policy;
pub mod redact;
pub mod settings;
pub mod shutdown;
pub mod subscriptions;
pub mod time;
pub mod unbind;
pub mod worker;

#[cfg(feature = "testkit")]
pub mod testkit;
