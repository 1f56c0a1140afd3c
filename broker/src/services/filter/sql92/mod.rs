//! RocketMQ 4.9's SQL92 property filter (`org.apache.rocketmq.filter`): a selector is
//! compiled once ([`Sql92Filter::compile`]) and evaluated against a message's properties,
//! which the broker always sees as strings (a missing one is NULL). A message matches only
//! when the selector is TRUE; NULL and evaluation errors (4.9's exceptions, such as
//! `a > 5` with `a = '5.5'`) do not match.
//!
//! Compiling resolves every property reference to a slot of the selector's name table, so
//! a message is decoded once into [`Slots`] — only the properties the selector names, in
//! one pass over the stored text, without allocating — and evaluation then indexes slots
//! instead of comparing names.

mod ast;
mod budget;
mod eval;
mod lexer;
mod parser;
mod slots;
mod value;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_budget;
#[cfg(test)]
mod tests_prop;

use std::fmt;

pub use budget::{Budget, Sql92Limits};
use slots::Name;
pub use slots::Slots;
pub use value::{EvalError, Value};

/// A selector that does not compile; `line`/`column` point at the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line}, column {column}")]
pub struct CompileError {
    pub message: String,
    pub line: u32,
    pub column: u32,
    /// The limit the selector exceeded, when that is why it was refused.
    pub budget: Option<Budget>,
}

impl CompileError {
    fn new(message: String, line: u32, column: u32) -> Self {
        Self {
            message,
            line,
            column,
            budget: None,
        }
    }

    fn over(budget: Budget, message: String, line: u32, column: u32) -> Self {
        Self {
            budget: Some(budget),
            ..Self::new(message, line, column)
        }
    }
}

/// Where a selector reads property values from.
pub trait PropertySource {
    fn get(&self, name: &str) -> Option<&str>;
}

/// A message's properties decoded once (per message, per pull batch or arrival) and shared
/// by every selector evaluated against them. A repeated name reads as its last value, as
/// Java's `HashMap`-based `decodeProperties` does.
#[derive(Debug, Default, Clone)]
pub struct DecodedProperties<'a> {
    entries: Vec<(&'a str, &'a str)>,
}

impl<'a> DecodedProperties<'a> {
    /// From the stored `name U+0001 value U+0002 ...` text.
    pub fn parse(text: &'a str) -> Self {
        Self {
            entries: protocol::message::properties::iter(text).collect(),
        }
    }

    pub fn from_pairs(entries: Vec<(&'a str, &'a str)>) -> Self {
        Self { entries }
    }
}

impl PropertySource for DecodedProperties<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

impl PropertySource for std::collections::HashMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        std::collections::HashMap::get(self, name).map(String::as_str)
    }
}

/// A compiled selector.
#[derive(Clone)]
pub struct Sql92Filter {
    source: Box<str>,
    expr: ast::Expr,
    /// The property names the selector reads; `names[i]` fills slot `i`.
    names: Box<[Name]>,
    /// Bytes the compiled selector holds, estimated from above.
    footprint: usize,
}

impl fmt::Debug for Sql92Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sql92Filter({:?})", self.source)
    }
}

impl PartialEq for Sql92Filter {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Sql92Filter {}

impl Sql92Filter {
    /// [`Self::compile_within`] the default [`Sql92Limits`].
    pub fn compile(source: &str) -> Result<Self, CompileError> {
        Self::compile_within(source, &Sql92Limits::default())
    }

    /// Compiles `source`, refusing it when it does not fit `limits`; the compiled tree is
    /// then shallow enough for evaluation, cloning and dropping to recurse safely.
    pub fn compile_within(source: &str, limits: &Sql92Limits) -> Result<Self, CompileError> {
        let parsed = parser::parse(source, limits)?;
        let names: Box<[Name]> = parsed.names.into_iter().map(Name::new).collect();
        // Every node at most one `Expr` plus its box; literals, IN items and names are
        // copies of source text, so twice the source bounds them.
        let footprint = std::mem::size_of::<Self>()
            + parsed.nodes as usize * 2 * std::mem::size_of::<ast::Expr>()
            + names.len() * std::mem::size_of::<Name>()
            + 3 * source.len();
        Ok(Self {
            expr: parsed.expr,
            names,
            source: source.into(),
            footprint,
        })
    }

    /// Bytes this compiled selector holds, estimated from above: what registries
    /// charge it against their byte budgets.
    pub fn footprint(&self) -> usize {
        self.footprint
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Decodes the properties this selector names from the stored `name U+0001 value
    /// U+0002 ...` text in one pass; a repeated name keeps its last value, as Java's
    /// `HashMap`-based `decodeProperties` does.
    pub fn slots_from_text<'a>(&self, text: &'a str) -> Slots<'a> {
        Slots::from_text(&self.names, text)
    }

    /// [`Self::slots_from_text`] on the raw stored bytes, validating as UTF-8 only the
    /// values it keeps; `None` when one of those is not UTF-8.
    pub fn slots_from_raw<'a>(&self, raw: &'a [u8]) -> Option<Slots<'a>> {
        Slots::from_raw(&self.names, raw)
    }

    /// Looks up the properties this selector names in an already decoded set.
    pub fn slots_from<'a, P: PropertySource + ?Sized>(&self, props: &'a P) -> Slots<'a> {
        Slots::from_source(&self.names, props)
    }

    /// The selector's three-valued result on decoded slots: `Ok(None)` is NULL, `Err` is
    /// what 4.9 throws. `slots` must come from this selector.
    pub fn evaluate_slots(&self, slots: &Slots<'_>) -> Result<Option<bool>, EvalError> {
        match eval::eval(&self.expr, slots.values())? {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(b)),
            // The top level is always boolean (checked at compile time).
            _ => Err(EvalError::ClassCast),
        }
    }

    /// [`Self::evaluate_slots`] on any property source.
    pub fn evaluate<P: PropertySource + ?Sized>(
        &self,
        props: &P,
    ) -> Result<Option<bool>, EvalError> {
        self.evaluate_slots(&self.slots_from(props))
    }

    /// `isMatchedByCommitLog`: only TRUE matches.
    pub fn matches<P: PropertySource + ?Sized>(&self, props: &P) -> bool {
        self.evaluate(props) == Ok(Some(true))
    }

    /// [`Self::matches`] on decoded slots.
    pub fn matches_slots(&self, slots: &Slots<'_>) -> bool {
        self.evaluate_slots(slots) == Ok(Some(true))
    }

    /// [`Self::matches`] on the stored properties text, decoding only what it names.
    pub fn matches_text(&self, text: &str) -> bool {
        self.matches_slots(&self.slots_from_text(text))
    }

    /// [`Self::matches`] on the raw stored properties; a named value that is not UTF-8
    /// does not match (the record is corrupt).
    pub fn matches_raw(&self, raw: &[u8]) -> bool {
        self.slots_from_raw(raw)
            .is_some_and(|slots| self.matches_slots(&slots))
    }
}
