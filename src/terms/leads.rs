//! The typed leads every denial text the worker writes starts with
//! (`architecture/contract.md` § Provenance and typed outcomes): today's
//! harness keeps only a hook's `reason`, so the model must be able to tell a
//! policy from a human, the reviewer, a timeout or an unavailable gate by the
//! text alone.

/// A rule, a human-only target, a malformed input.
pub const POLICY: &str = "Permission denied by policy:";
/// A human's denial.
pub const HUMAN: &str = "Denied by a human:";
/// The automated reviewer's denial.
pub const REVIEWER: &str = "Denied by the reviewer:";
/// No one answered in time.
pub const TIMEOUT: &str = "Approval timed out:";
/// The gate could not decide; asking again later may work.
pub const UNAVAILABLE: &str = "Approval gate unavailable (retry later):";

/// `text` led by `lead` (unchanged when it already starts with it).
pub fn led(lead: &str, text: &str) -> String {
    let text = text.trim();
    if text.starts_with(lead) {
        text.to_string()
    } else {
        format!("{lead} {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_23_a_text_is_led_once() {
        assert_eq!(led(HUMAN, "not on prod"), "Denied by a human: not on prod");
        assert_eq!(led(HUMAN, "Denied by a human: x"), "Denied by a human: x");
        for lead in [POLICY, HUMAN, REVIEWER, TIMEOUT, UNAVAILABLE] {
            assert!(led(lead, "x").starts_with(lead));
        }
    }
}
