//! A session's allow-lists prepared for matching (`architecture/contract.md`
//! § Settings): each list's patterns compiled once per settings change into
//! one table, and each entry's bounds — expiry, uses, argument
//! constraints — kept beside it for the ladder to check.
//!
//! Only a human's entries are compiled here. Seed entries come from the
//! rules in force (`CompiledRules`), never from a stored record: a stored
//! `granted_by: "seed"` entry (written before seeds were derived) is
//! ignored, and the session's `suppressed_seeds` are kept for the ladder to
//! pass those seeds over.

use super::args::{compile_args, CompiledConstraint};
use super::glob::{Pattern, PatternTable};
use crate::terms::Mode;
use crate::terms::{ApprovalSettings, Entry, GrantList, GrantedBy};

/// One entry of a session's allow-lists, by position: what the gate spends a
/// use of, and what a decision passes over when that write failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrantRef {
    /// Which list.
    pub list: GrantList,
    /// The entry's index in the list.
    pub slot: u32,
}

/// An entry's argument constraints, compiled.
#[derive(Debug, Clone)]
pub(crate) enum GrantArgs {
    /// Any arguments.
    Any,
    /// Every constraint must hold.
    All(Box<[CompiledConstraint]>),
    /// Constraints that do not compile (a record written by hand): the entry
    /// matches nothing — fewer allows, never more.
    Invalid,
}

/// What bounds one entry, beside its pattern.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    pub(crate) expires_at: Option<u64>,
    pub(crate) used_up: bool,
    pub(crate) args: GrantArgs,
}

/// One allow-list, prepared for matching.
#[derive(Debug, Clone, Default)]
pub(crate) struct EntryList {
    /// The entries as stored, in list order (the table's slots index them).
    pub(crate) entries: Vec<Entry>,
    pub(crate) bounds: Vec<Bounds>,
    pub(crate) table: PatternTable,
    /// Whether some entry has a constraint that may judge a command: when
    /// none does, no call's command is read for this list.
    pub(crate) commands: bool,
}

impl EntryList {
    /// A human's entries of one list; seed entries are left out. An exact
    /// entry (`pattern: false`) matches only its text. An entry whose glob
    /// does not compile matches only its exact text too; if the globs cannot
    /// be compiled together, the offenders (or, failing that, every glob)
    /// fall back the same way: fewer allows, never more.
    fn new(entries: &[Entry]) -> EntryList {
        let entries: Vec<Entry> = entries
            .iter()
            .filter(|e| e.granted_by != GrantedBy::Seed)
            .cloned()
            .collect();
        let patterns = |exact_only: &dyn Fn(u32) -> bool| -> Vec<(Pattern, u32)> {
            entries
                .iter()
                .zip(0u32..)
                .map(|(entry, slot)| {
                    let text = entry.function_id.as_str();
                    let pattern = if !entry.pattern || exact_only(slot) {
                        Pattern::Exact(text.into())
                    } else {
                        Pattern::parse_or_exact(text)
                    };
                    (pattern, slot)
                })
                .collect()
        };
        let table = match PatternTable::build(patterns(&|_| false)) {
            Ok(table) => table,
            Err(err) => {
                let culprits: Vec<u32> = err.culprits.iter().map(|(slot, _)| *slot).collect();
                PatternTable::build(patterns(&|slot| culprits.contains(&slot)))
                    .or_else(|_| PatternTable::build(patterns(&|_| true)))
                    .unwrap_or_default()
            }
        };
        let bounds: Vec<Bounds> = entries
            .iter()
            .map(|e| Bounds {
                expires_at: e.expires_at,
                used_up: e.uses_left == Some(0),
                args: match &e.args {
                    None => GrantArgs::Any,
                    Some(args) => compile_args(args).map_or(GrantArgs::Invalid, GrantArgs::All),
                },
            })
            .collect();
        let commands = bounds.iter().any(|b| match &b.args {
            GrantArgs::All(constraints) => constraints.iter().any(|c| c.may_judge_commands()),
            GrantArgs::Any | GrantArgs::Invalid => false,
        });
        EntryList {
            entries,
            bounds,
            table,
            commands,
        }
    }
}

/// A session's settings prepared for matching: the allow-list patterns are
/// compiled once per settings change, not per call.
#[derive(Debug, Clone)]
pub struct CompiledSettings {
    pub(crate) mode: Mode,
    pub(crate) approved_always: EntryList,
    pub(crate) always_allow: EntryList,
    /// The seeds a human removed from this session (their function ids).
    pub(crate) suppressed_seeds: Box<[Box<str>]>,
}

impl CompiledSettings {
    /// Prepares `settings`.
    pub fn new(settings: &ApprovalSettings) -> CompiledSettings {
        CompiledSettings {
            mode: settings.mode,
            approved_always: EntryList::new(&settings.approved_always),
            always_allow: EntryList::new(&settings.always_allow),
            suppressed_seeds: settings
                .suppressed_seeds
                .iter()
                .map(|id| id.as_str().into())
                .collect(),
        }
    }

    /// Whether the session suppressed the seed for `function_id`.
    pub(crate) fn suppresses(&self, function_id: &str) -> bool {
        self.suppressed_seeds.iter().any(|id| **id == *function_id)
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// One of the lists.
    pub(crate) fn list(&self, list: GrantList) -> &EntryList {
        match list {
            GrantList::ApprovedAlways => &self.approved_always,
            GrantList::AlwaysAllow => &self.always_allow,
        }
    }

    /// The entry at `grant`.
    pub fn entry(&self, grant: GrantRef) -> Option<&Entry> {
        self.list(grant.list).entries.get(grant.slot as usize)
    }
}
