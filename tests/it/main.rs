//! The worker's integration tests, one binary: one module per suite, and
//! `common`, the scaffolding they share. Every suite runs on the in-process
//! test engine; the scenarios that describe the real engine run again on one
//! when `III_ENGINE_BIN` points at it (or `iii` is on `PATH`).
//!
//! One suite: `cargo test --test it gate::`; one test:
//! `cargo test --test it gate::gate_evaluate_reports_without_writing`.
//!
//! The suites share this process, so nothing here may depend on running
//! alone: no process-wide tracing subscriber, no environment variable set at
//! run time (a child worker gets its variables through `WorkerProcess`), no
//! counter that another test's engine or worker could move. Each scenario
//! makes its own engine (its own port, state and counters), doubles and
//! worker, and every SDK client it made is shut down when it ends — the
//! fixture's and the doubles' on drop, the in-process worker through
//! `common::InProcess` — so none outlives its test and reconnects into a
//! later test's engine.

mod common;

mod batch;
mod browser;
mod commands;
mod configuration;
mod console;
mod deadlines;
mod docs;
mod edit;
mod fail_closed;
mod faults;
mod foundation;
mod gate;
mod gate_durability;
mod goldens;
mod grant_watch;
mod hostile;
mod hot_path;
mod identity;
mod layers;
mod levers;
mod links;
mod load;
mod lost_replies;
mod manifest;
mod no_fail_open;
mod operator_logs;
mod oracle;
mod playground;
mod policy;
mod properties;
mod protected;
mod provenance;
mod redaction;
mod release;
mod reviewer;
mod runs;
mod security;
mod simulate;
mod standby;
mod subagents;
mod today;
