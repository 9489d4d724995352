//! PURE: one session's circuit breaker over its reviewer's denials
//! (`architecture/contract.md` § The reviewer). After
//! `max_consecutive_denials` denials in a row, or `max_denials_per_50`
//! among the session's last 50 reviews, the reviewer's denials become holds
//! for a human — and stay so (the breaker is open) until a human decides a
//! call of the session.

use crate::config::BREAKER_WINDOW;

/// The breaker's two limits (from the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Denials in a row that open the breaker.
    pub(crate) consecutive: u32,
    /// Denials among the last 50 reviews that open it.
    pub(crate) per_50: u32,
}

/// One session's breaker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Breaker {
    /// Denials since the last review that was not one.
    consecutive: u32,
    /// The last reviews, newest in bit 0: 1 = a denial.
    window: u64,
    /// Open: denials go to a human until [`Breaker::reset`].
    open: bool,
}

impl Breaker {
    /// Takes one review. For a denial (`denied`), answers whether it must
    /// go to a human instead: the breaker was open, or the denials before
    /// this one reached a limit (which opens it).
    pub(crate) fn review(&mut self, denied: bool, limits: Limits) -> bool {
        let held = denied
            && (self.open
                || self.consecutive >= limits.consecutive
                || self.denials() >= limits.per_50);
        if held {
            self.open = true;
        }
        self.consecutive = if denied { self.consecutive + 1 } else { 0 };
        let mask = (1u64 << BREAKER_WINDOW) - 1;
        self.window = ((self.window << 1) | u64::from(denied)) & mask;
        held
    }

    /// Denials among the last 50 reviews.
    pub(crate) fn denials(&self) -> u32 {
        self.window.count_ones()
    }

    /// Whether denials go to a human now.
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// A human decided a call of the session: closed, and the counts start
    /// over.
    pub(crate) fn reset(&mut self) {
        *self = Breaker::default();
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const LIMITS: Limits = Limits {
        consecutive: 3,
        per_50: 10,
    };

    #[test]
    fn rule_22_three_denials_in_a_row_then_denials_are_held_until_a_human_decides() {
        let mut b = Breaker::default();
        assert!(!b.review(true, LIMITS));
        assert!(!b.review(true, LIMITS));
        assert!(!b.review(true, LIMITS));
        assert!(
            b.review(true, LIMITS),
            "the fourth denial in a row goes to a human"
        );
        assert!(b.is_open());
        // An allow does not close it: only a human does.
        assert!(!b.review(false, LIMITS));
        assert!(b.review(true, LIMITS));
        b.reset();
        assert!(!b.is_open());
        assert!(
            !b.review(true, LIMITS),
            "after a human's decision the reviewer may deny again"
        );
    }

    #[test]
    fn rule_22_ten_denials_among_the_last_fifty_open_it_and_older_ones_age_out() {
        let mut b = Breaker::default();
        // Denial, allow, denial, allow…: never three in a row.
        for i in 0..20 {
            assert!(!b.review(i % 2 == 0, LIMITS), "review {i}");
        }
        assert_eq!(b.denials(), 10);
        assert!(
            b.review(true, LIMITS),
            "the eleventh denial in 50 reviews is held"
        );
        // Aged out: 50 allows later only the window's own denials count.
        let mut b = Breaker::default();
        for i in 0..18 {
            b.review(i % 2 == 0, LIMITS);
        }
        for _ in 0..50 {
            b.review(false, LIMITS);
        }
        assert_eq!(b.denials(), 0);
        assert!(!b.review(true, LIMITS));
    }

    #[test]
    fn rule_22_a_zero_limit_sends_every_denial_to_a_human() {
        let mut b = Breaker::default();
        let limits = Limits {
            consecutive: 0,
            per_50: 10,
        };
        assert!(b.review(true, limits));
        let mut b = Breaker::default();
        let limits = Limits {
            consecutive: 3,
            per_50: 0,
        };
        assert!(b.review(true, limits));
    }

    proptest! {
        /// Whatever the sequence: a denial is held exactly when the breaker
        /// was open or the counts before it reached a limit, as a plain
        /// replay of the history computes them.
        #[test]
        fn rule_22_the_breaker_matches_a_replay_of_the_history(
            reviews in proptest::collection::vec(any::<bool>(), 0..200),
            consecutive in 0u32..6,
            per_50 in 0u32..20,
        ) {
            let limits = Limits { consecutive, per_50 };
            let mut b = Breaker::default();
            let mut open = false;
            for (i, &denied) in reviews.iter().enumerate() {
                let before = &reviews[..i];
                let in_a_row = before.iter().rev().take_while(|d| **d).count() as u32;
                let recent = before.iter().rev().take(50).filter(|d| **d).count() as u32;
                let expect = denied && (open || in_a_row >= consecutive || recent >= per_50);
                open |= expect;
                prop_assert_eq!(b.review(denied, limits), expect, "review {}", i);
            }
        }
    }
}
