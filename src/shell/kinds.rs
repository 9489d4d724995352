//! The grammar's node kinds and field names as small numbers, looked up
//! once per process. `Node::kind` turns a C string into a `&str` on every
//! call (a length count and a UTF-8 check) and the walk then compares it
//! with dozens of names; `Node::field_name_for_child` walks the parent's
//! children again for every child. On a short command those two were a
//! fifth of the walk. A node's kind id names the same symbol `kind` names
//! (both read the node's alias when it has one), so a table from id to
//! [`Kind`], built from the grammar's own names, reads every node exactly
//! as the names did.

use std::num::NonZeroU16;
use std::sync::LazyLock;

use tree_sitter::{Language, Node, TreeCursor};

/// The node kinds the model tells apart; every other kind is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    TranslatedString,
    Program,
    List,
    Pipeline,
    Subshell,
    DoGroup,
    IfStatement,
    ElifClause,
    ElseClause,
    WhileStatement,
    CaseStatement,
    CaseItem,
    NegatedCommand,
    ForStatement,
    Concatenation,
    Array,
    CommandName,
    HerestringRedirect,
    FileRedirect,
    BinaryExpression,
    UnaryExpression,
    PostfixExpression,
    TernaryExpression,
    ParenthesizedExpression,
    BraceExpression,
    Comment,
    HeredocStart,
    HeredocEnd,
    FileDescriptor,
    TestOperator,
    SpecialVariableName,
    RawString,
    AnsiCString,
    Number,
    VariableName,
    SimpleExpansion,
    StringContent,
    HeredocContent,
    Word,
    Regex,
    ExtglobPattern,
    Command,
    DeclarationCommand,
    UnsetCommand,
    VariableAssignments,
    VariableAssignment,
    Subscript,
    Expansion,
    ArithmeticExpansion,
    CStyleForStatement,
    CompoundStatement,
    TestCommand,
    RedirectedStatement,
    HeredocRedirect,
    HeredocBody,
    FunctionDefinition,
    CommandSubstitution,
    ProcessSubstitution,
    /// Any kind not named above.
    Other,
}

/// The grammar's name of each kind above.
const NAMES: &[(&str, Kind)] = &[
    ("string", Kind::String),
    ("translated_string", Kind::TranslatedString),
    ("program", Kind::Program),
    ("list", Kind::List),
    ("pipeline", Kind::Pipeline),
    ("subshell", Kind::Subshell),
    ("do_group", Kind::DoGroup),
    ("if_statement", Kind::IfStatement),
    ("elif_clause", Kind::ElifClause),
    ("else_clause", Kind::ElseClause),
    ("while_statement", Kind::WhileStatement),
    ("case_statement", Kind::CaseStatement),
    ("case_item", Kind::CaseItem),
    ("negated_command", Kind::NegatedCommand),
    ("for_statement", Kind::ForStatement),
    ("concatenation", Kind::Concatenation),
    ("array", Kind::Array),
    ("command_name", Kind::CommandName),
    ("herestring_redirect", Kind::HerestringRedirect),
    ("file_redirect", Kind::FileRedirect),
    ("binary_expression", Kind::BinaryExpression),
    ("unary_expression", Kind::UnaryExpression),
    ("postfix_expression", Kind::PostfixExpression),
    ("ternary_expression", Kind::TernaryExpression),
    ("parenthesized_expression", Kind::ParenthesizedExpression),
    ("brace_expression", Kind::BraceExpression),
    ("comment", Kind::Comment),
    ("heredoc_start", Kind::HeredocStart),
    ("heredoc_end", Kind::HeredocEnd),
    ("file_descriptor", Kind::FileDescriptor),
    ("test_operator", Kind::TestOperator),
    ("special_variable_name", Kind::SpecialVariableName),
    ("raw_string", Kind::RawString),
    ("ansi_c_string", Kind::AnsiCString),
    ("number", Kind::Number),
    ("variable_name", Kind::VariableName),
    ("simple_expansion", Kind::SimpleExpansion),
    ("string_content", Kind::StringContent),
    ("heredoc_content", Kind::HeredocContent),
    ("word", Kind::Word),
    ("regex", Kind::Regex),
    ("extglob_pattern", Kind::ExtglobPattern),
    ("command", Kind::Command),
    ("declaration_command", Kind::DeclarationCommand),
    ("unset_command", Kind::UnsetCommand),
    ("variable_assignments", Kind::VariableAssignments),
    ("variable_assignment", Kind::VariableAssignment),
    ("subscript", Kind::Subscript),
    ("expansion", Kind::Expansion),
    ("arithmetic_expansion", Kind::ArithmeticExpansion),
    ("c_style_for_statement", Kind::CStyleForStatement),
    ("compound_statement", Kind::CompoundStatement),
    ("test_command", Kind::TestCommand),
    ("redirected_statement", Kind::RedirectedStatement),
    ("heredoc_redirect", Kind::HeredocRedirect),
    ("heredoc_body", Kind::HeredocBody),
    ("function_definition", Kind::FunctionDefinition),
    ("command_substitution", Kind::CommandSubstitution),
    ("process_substitution", Kind::ProcessSubstitution),
];

/// The field names the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    Name,
    Argument,
    Redirect,
}

/// The ids of the grammar's fields the model reads (`None`: the grammar
/// has no such field, so no child carries it).
struct Fields {
    name: Option<NonZeroU16>,
    argument: Option<NonZeroU16>,
    redirect: Option<NonZeroU16>,
}

struct Table {
    /// Indexed by kind id.
    kinds: Vec<Kind>,
    fields: Fields,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let language: Language = tree_sitter_bash::LANGUAGE.into();
    let count = language.node_kind_count();
    let kinds = (0..count)
        .map(|id| {
            let name = u16::try_from(id)
                .ok()
                .and_then(|id| language.node_kind_for_id(id));
            NAMES
                .iter()
                .find(|(n, _)| Some(*n) == name)
                .map_or(Kind::Other, |(_, kind)| *kind)
        })
        .collect();
    Table {
        kinds,
        fields: Fields {
            name: language.field_id_for_name("name"),
            argument: language.field_id_for_name("argument"),
            redirect: language.field_id_for_name("redirect"),
        },
    }
});

/// The kind of `node`, read from its kind id.
pub(super) fn kind(node: Node<'_>) -> Kind {
    let kind = TABLE
        .kinds
        .get(usize::from(node.kind_id()))
        .copied()
        .unwrap_or(Kind::Other);
    debug_assert_eq!(
        kind,
        NAMES
            .iter()
            .find(|(n, _)| *n == node.kind())
            .map_or(Kind::Other, |(_, k)| *k),
        "the kind table reads `{}` as the grammar names it",
        node.kind()
    );
    kind
}

/// Which of the fields the model reads the cursor's node fills in its
/// parent, read from the cursor (which knows the child's place) instead of
/// searching the parent's children again.
pub(super) fn field(cursor: &TreeCursor<'_>) -> Option<Field> {
    let id = cursor.field_id()?;
    let fields = &TABLE.fields;
    if Some(id) == fields.name {
        Some(Field::Name)
    } else if Some(id) == fields.argument {
        Some(Field::Argument)
    } else if Some(id) == fields.redirect {
        Some(Field::Redirect)
    } else {
        None
    }
}
