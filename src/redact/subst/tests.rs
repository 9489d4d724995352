use super::*;

/// The substitutions of a complete `text`, as text.
fn found(text: &str) -> Vec<&str> {
    Substitutions::of(text, true)
        .ranges
        .iter()
        .map(|r| &text[r.clone()])
        .collect()
}

#[test]
fn rule_21_6_every_kind_of_substitution_is_found_with_its_extent() {
    assert_eq!(found("a $(b c) d"), ["$(b c)"]);
    assert_eq!(found("diff <(ls a) >(tee b)"), ["<(ls a)", ">(tee b)"]);
    assert_eq!(found("echo `date -u` x"), ["`date -u`"]);
    assert_eq!(found("$((1 + 2))"), ["$((1 + 2))"]);
}

#[test]
fn rule_21_6_nested_substitutions_are_each_listed_outermost_first() {
    assert_eq!(
        found(r#"x "$(a "$(b)" `c d`)" y"#),
        [r#"$(a "$(b)" `c d`)"#, "$(b)", "`c d`"]
    );
}

#[test]
fn rule_21_6_quotes_and_escapes_inside_a_substitution_are_followed() {
    assert_eq!(
        found(r#"$(echo ")" ')' \) done) tail"#),
        [r#"$(echo ")" ')' \) done)"#]
    );
    // Outside a substitution quotes do not count: single-quoted ones are
    // found too; a backslash escapes the dollar.
    assert_eq!(found("sh -c '$(id)'"), ["$(id)"]);
    assert_eq!(found(r"echo \$(id) \`x y\`"), Vec::<&str>::new());
}

#[test]
fn rule_21_6_a_bare_word_in_backticks_is_a_code_span() {
    assert_eq!(found("the `hunter2` value"), Vec::<&str>::new());
    assert_eq!(found("the `npm test` command"), ["`npm test`"]);
    assert_eq!(found("x `a|b` y"), ["`a|b`"]);
}

#[test]
fn rule_21_6_an_unclosed_substitution_runs_to_the_end_of_a_part_only() {
    assert_eq!(found("a $(b c"), Vec::<&str>::new());
    assert_eq!(found("a `b c"), Vec::<&str>::new());
    let part = Substitutions::of("a $(b c", false);
    assert_eq!(part.ranges, vec![2..7]);
    // Closed ones inside an unclosed one stay.
    assert_eq!(found("$(a $(b) c"), ["$(b)"]);
}

#[test]
fn outside_and_find_outside_skip_substitutions_starting_in_range() {
    let text = r#"A="x$(y "z")w" B"#;
    let subs = Substitutions::of(text, true);
    let open = 3;
    let (close, _) = subs.find_outside(text, open, |rest| rest.find('"'));
    assert_eq!(close, Some(13));
    assert_eq!(subs.outside(open..13), vec![3..4, 12..13]);
    // A substitution starting before the range is not skipped.
    assert_eq!(subs.outside(6..13), vec![6..13]);
    assert_eq!(subs.starting_at(4), Some(4..12));
    assert_eq!(subs.starting_at(5), None);
}

#[test]
fn text_without_a_paren_or_backtick_has_none() {
    assert!(Substitutions::of("plain $HOME text", true)
        .ranges
        .is_empty());
}

#[test]
fn deep_nesting_is_linear_and_safe() {
    let deep = "$(".repeat(20_000) + &")".repeat(20_000);
    let subs = Substitutions::of(&deep, true);
    assert_eq!(subs.ranges.len(), 20_000);
    assert_eq!(subs.ranges[0], 0..deep.len());
}
