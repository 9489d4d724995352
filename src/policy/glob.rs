//! Function-id patterns — exact ids and globs — compiled once into a table that
//! answers "which is the first pattern that matches this id?" without
//! allocating.
//!
//! Glob dialect: `globset` with `literal_separator` off and backslash escapes
//! on, so `*` matches any run of bytes (including `::`, `/` and the empty
//! string), `?` matches one byte (one character for ASCII ids), and `[...]`,
//! `[!...]`, `{a,b}` and `\*` work as in `globset`. `/` is an ordinary
//! character except in the `**/` and `/**` forms, which keep their `globset`
//! meaning (`**/x` also matches `x`). A pattern without any of
//! `* ? [ ] { } \` is an exact id and matches only itself.

use std::cell::Cell;
use std::collections::HashMap;

use globset::{Candidate, Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The characters that turn a pattern into a glob.
const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

thread_local! {
    /// Reused buffer for `GlobSet::matches_candidate_into`, so that matching
    /// allocates only the first time a thread matches. Taken and put back
    /// around each use; it never holds state between calls.
    static SCRATCH: Cell<Vec<usize>> = const { Cell::new(Vec::new()) };
}

/// One parsed pattern.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// Matches exactly this id.
    Exact(Box<str>),
    /// A parsed glob.
    Glob(Glob),
}

impl Pattern {
    /// Parses `text`: exact when it has no glob metacharacter, else a glob.
    pub(crate) fn parse(text: &str) -> Result<Pattern, globset::Error> {
        if text.contains(GLOB_META) {
            GlobBuilder::new(text)
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map(Pattern::Glob)
        } else {
            Ok(Pattern::Exact(text.into()))
        }
    }

    /// Whether `id` matches this one pattern (compiles a matcher: for
    /// checking examples at compile time, not for the hot path).
    pub(crate) fn matches(&self, id: &str) -> bool {
        match self {
            Pattern::Exact(text) => **text == *id,
            Pattern::Glob(glob) => glob.compile_matcher().is_match(id),
        }
    }

    /// Parses `text`, falling back to an exact match of the text itself when
    /// it is not a valid glob (settings entries never fail to compile).
    pub(crate) fn parse_or_exact(text: &str) -> Pattern {
        Pattern::parse(text).unwrap_or_else(|_| Pattern::Exact(text.into()))
    }
}

/// Why a set of individually valid globs could not be compiled together.
#[derive(Debug)]
pub(crate) struct TableError {
    /// The slots whose glob fails even on its own (empty when only the
    /// combination is too large).
    pub(crate) culprits: Vec<(u32, String)>,
    /// The error of the combined build.
    pub(crate) message: String,
}

/// Patterns, each tagged with a slot number (its position in the caller's
/// list). Exact ids live in a hash map, globs in one `GlobSet`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PatternTable {
    exact: HashMap<Box<str>, Vec<u32>>,
    globs: GlobSet,
    /// `glob_slots[i]` is the slot of the `i`-th glob of `globs`; ascending.
    glob_slots: Vec<u32>,
}

impl PatternTable {
    /// Builds the table. `patterns` must be in ascending slot order.
    pub(crate) fn build(patterns: Vec<(Pattern, u32)>) -> Result<PatternTable, TableError> {
        let mut exact: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        let mut globs = Vec::new();
        let mut glob_slots = Vec::new();
        for (pattern, slot) in patterns {
            match pattern {
                Pattern::Exact(text) => exact.entry(text).or_default().push(slot),
                Pattern::Glob(glob) => {
                    globs.push(glob);
                    glob_slots.push(slot);
                }
            }
        }
        let mut builder = GlobSetBuilder::new();
        for glob in &globs {
            builder.add(glob.clone());
        }
        match builder.build() {
            Ok(set) => Ok(PatternTable {
                exact,
                globs: set,
                glob_slots,
            }),
            Err(err) => {
                let culprits = globs
                    .iter()
                    .zip(&glob_slots)
                    .filter_map(|(glob, &slot)| {
                        GlobSet::new(std::iter::once(glob))
                            .err()
                            .map(|e| (slot, e.to_string()))
                    })
                    .collect();
                Err(TableError {
                    culprits,
                    message: err.to_string(),
                })
            }
        }
    }

    /// Number of patterns in the table.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.exact.values().map(Vec::len).sum::<usize>() + self.glob_slots.len()
    }

    /// Whether the table holds no pattern.
    pub(crate) fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.glob_slots.is_empty()
    }

    /// The lowest slot whose pattern matches `id` and for which `accept`
    /// holds. `accept` is called only for matching slots, in ascending order,
    /// and never again once it returned true.
    pub(crate) fn first_match(&self, id: &str, mut accept: impl FnMut(u32) -> bool) -> Option<u32> {
        let mut best = self
            .exact
            .get(id)
            .and_then(|slots| slots.iter().copied().find(|&slot| accept(slot)));
        if self.glob_slots.is_empty() {
            return best;
        }
        let candidate = Candidate::from_bytes(id.as_bytes());
        let mut hits = SCRATCH.with(Cell::take);
        self.globs.matches_candidate_into(&candidate, &mut hits);
        for &hit in &hits {
            let Some(&slot) = self.glob_slots.get(hit) else {
                continue;
            };
            if best.is_some_and(|b| slot > b) {
                break;
            }
            if accept(slot) {
                best = Some(slot);
                break;
            }
        }
        SCRATCH.with(|cell| cell.set(hits));
        best
    }

    /// Every slot whose pattern matches `id`, in ascending order.
    pub(crate) fn each_match(&self, id: &str, mut each: impl FnMut(u32)) {
        let mut slots: Vec<u32> = self.exact.get(id).map(|s| s.to_vec()).unwrap_or_default();
        if !self.glob_slots.is_empty() {
            let candidate = Candidate::from_bytes(id.as_bytes());
            let mut hits = SCRATCH.with(Cell::take);
            self.globs.matches_candidate_into(&candidate, &mut hits);
            slots.extend(
                hits.iter()
                    .filter_map(|&hit| self.glob_slots.get(hit).copied()),
            );
            SCRATCH.with(|cell| cell.set(hits));
        }
        slots.sort_unstable();
        slots.dedup();
        for slot in slots {
            each(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(patterns: &[&str]) -> PatternTable {
        let parsed = patterns
            .iter()
            .zip(0u32..)
            .map(|(p, slot)| (Pattern::parse(p).expect("valid pattern"), slot))
            .collect();
        PatternTable::build(parsed).expect("table builds")
    }

    fn first(patterns: &[&str], id: &str) -> Option<u32> {
        table(patterns).first_match(id, |_| true)
    }

    #[test]
    fn literal_patterns_are_exact() {
        assert!(matches!(
            Pattern::parse("state::get"),
            Ok(Pattern::Exact(_))
        ));
        assert!(matches!(
            Pattern::parse("a.b/c-d!e,f"),
            Ok(Pattern::Exact(_))
        ));
        for glob in ["a*", "a?", "[ab]", "{a,b}", "a\\*", "a]"] {
            assert!(
                matches!(Pattern::parse(glob), Ok(Pattern::Glob(_))),
                "{glob}"
            );
        }
    }

    #[test]
    fn exact_ids_match_only_themselves() {
        let pats = ["state::get"];
        assert_eq!(first(&pats, "state::get"), Some(0));
        assert_eq!(first(&pats, "state::get2"), None);
        assert_eq!(first(&pats, "xstate::get"), None);
        assert_eq!(first(&pats, "State::get"), None);
        assert_eq!(first(&pats, "state::ge"), None);
        assert_eq!(first(&pats, ""), None);
    }

    #[test]
    fn star_spans_separators_and_the_empty_string() {
        let pats = ["shell::*"];
        assert_eq!(first(&pats, "shell::exec"), Some(0));
        assert_eq!(first(&pats, "shell::fs::read"), Some(0));
        assert_eq!(first(&pats, "shell::"), Some(0));
        assert_eq!(first(&pats, "shell::a/b"), Some(0));
        assert_eq!(first(&pats, "shell:"), None);
        assert_eq!(first(&pats, "xshell::exec"), None);
        assert_eq!(first(&["*"], ""), Some(0));
        assert_eq!(first(&["*"], "a::b/c"), Some(0));
        assert_eq!(first(&["a*b"], "ab"), Some(0));
        assert_eq!(first(&["a*b"], "a::x::b"), Some(0));
        assert_eq!(first(&["*::get"], "state::get"), Some(0));
        assert_eq!(first(&["*::get"], "a::b::get"), Some(0));
        assert_eq!(first(&["*::get"], "state::getx"), None);
        assert_eq!(first(&["a::*::c"], "a::b::c"), Some(0));
        assert_eq!(first(&["a::*::c"], "a::::c"), Some(0));
        assert_eq!(first(&["a::*::c"], "a::c"), None);
        assert_eq!(first(&["**"], "x/y::z"), Some(0));
        assert_eq!(first(&["a**"], "a/b::c"), Some(0));
        assert_eq!(first(&["*"], "line\nbreak"), Some(0));
    }

    #[test]
    fn question_mark_classes_and_alternates() {
        assert_eq!(first(&["state::?et"], "state::get"), Some(0));
        assert_eq!(first(&["state::?et"], "state::et"), None);
        assert_eq!(first(&["a?b"], "a:b"), Some(0));
        assert_eq!(first(&["a?b"], "a/b"), Some(0));
        // `?` is one byte: a two-byte character needs two.
        assert_eq!(first(&["a?b"], "a\u{e9}b"), None);
        assert_eq!(first(&["a??b"], "a\u{e9}b"), Some(0));
        assert_eq!(first(&["state::[gs]et"], "state::set"), Some(0));
        assert_eq!(first(&["state::[gs]et"], "state::let"), None);
        assert_eq!(first(&["state::[!g]et"], "state::set"), Some(0));
        assert_eq!(first(&["state::[!g]et"], "state::get"), None);
        assert_eq!(first(&["v[0-9]"], "v7"), Some(0));
        assert_eq!(first(&["{shell,coder}::*"], "coder::run"), Some(0));
        assert_eq!(first(&["{shell,coder}::*"], "state::get"), None);
        assert_eq!(first(&["state::{get,set}"], "state::set"), Some(0));
        assert_eq!(first(&["state::{get,set}"], "state::list"), None);
        assert_eq!(first(&["a\\*"], "a*"), Some(0));
        assert_eq!(first(&["a\\*"], "ab"), None);
    }

    #[test]
    fn globs_are_case_sensitive() {
        assert_eq!(first(&["Shell::*"], "shell::exec"), None);
        assert_eq!(first(&["shell::*"], "SHELL::exec"), None);
    }

    #[test]
    fn globset_recursive_forms_keep_their_meaning() {
        assert_eq!(first(&["**/x"], "x"), Some(0));
        assert_eq!(first(&["**/x"], "a/b/x"), Some(0));
        assert_eq!(first(&["a/**"], "a/b::c"), Some(0));
    }

    #[test]
    fn bad_globs_fail_to_parse_and_fall_back_to_exact() {
        for bad in ["a[", "{a,b", "a[z-a]", "a\\"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
            assert!(matches!(Pattern::parse_or_exact(bad), Pattern::Exact(t) if &*t == bad));
        }
    }

    #[test]
    fn lowest_slot_wins_across_exact_and_glob() {
        let pats = ["x::*", "x::y", "*", "x::y"];
        assert_eq!(first(&pats, "x::y"), Some(0));
        let t = table(&pats);
        assert_eq!(t.first_match("x::y", |slot| slot != 0), Some(1));
        assert_eq!(t.first_match("x::y", |slot| slot >= 2), Some(2));
        assert_eq!(t.first_match("x::y", |slot| slot == 3), Some(3));
        assert_eq!(t.first_match("x::y", |_| false), None);
        assert_eq!(t.first_match("q", |slot| slot == 2), Some(2));
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn accept_sees_only_matching_slots_in_order() {
        let t = table(&["a", "b*", "*", "a", "c"]);
        let mut seen = Vec::new();
        assert_eq!(
            t.first_match("a", |slot| {
                seen.push(slot);
                false
            }),
            None
        );
        // The exact hits first, then globs below no accepted slot.
        assert_eq!(seen, vec![0, 3, 2]);
    }

    #[test]
    fn empty_table_matches_nothing() {
        let t = PatternTable::build(Vec::new()).expect("builds");
        assert_eq!(t.first_match("a", |_| true), None);
        assert_eq!(t.len(), 0);
    }
}
