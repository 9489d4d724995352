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
//!   [`triggers`], [`boot`], [`client`] — talks to the engine.

pub mod policy;
pub mod redact;
pub mod settings;
pub mod pending;
pub mod time;

#[cfg(feature = "testkit")]
pub mod testkit;
