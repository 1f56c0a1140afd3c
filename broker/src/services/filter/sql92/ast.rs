//! The compiled form of a selector: a tree built once per subscription version and shared
//! by every evaluation. Node kinds mirror 4.9's expression classes, because its parse-time
//! checks depend on them (`instanceof ConstantExpression`, `BooleanExpression`,
//! `PropertyExpression`).

/// A literal (`ConstantExpression`; TRUE, FALSE and NULL are `BooleanConstantExpression`).
#[derive(Debug, Clone, PartialEq)]
pub enum Const {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(Box<str>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
}

/// A property reference resolved at compile time: the index of its name in the
/// selector's name table, and so of its value in the [`Slots`](super::Slots) a message's
/// properties are decoded into. Evaluation never compares property names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub u16);

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Const(Const),
    /// A property, by its exact name's slot; `TAGS` is the message's tag.
    Prop(Slot),
    /// Unary minus: numbers are negated, anything else is NULL.
    Neg(Box<Expr>),
    Not(Box<Expr>),
    /// A bare property used as a condition: NULL when missing, otherwise FALSE (property
    /// values are strings, never booleans).
    BoolCast(Box<Expr>),
    /// `a AND b AND c ...`: the operands of one chain, left to right. A chain is kept
    /// flat (4.9 builds it left-deep) so that its length never becomes tree depth: a long
    /// chain costs nodes, which the budget counts, not stack.
    And(Vec<Expr>),
    /// `a OR b OR c ...`, flat like [`Expr::And`].
    Or(Vec<Expr>),
    /// `=` (`<>` is `Not(Eq)`).
    Eq(Box<Expr>, Box<Expr>),
    IsNull(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    In {
        prop: Slot,
        items: Vec<Box<str>>,
        negated: bool,
    },
}

impl Expr {
    /// 4.9's `BooleanExpression`: comparisons, logic and the TRUE/FALSE/NULL literals.
    pub fn is_boolean(&self) -> bool {
        match self {
            Expr::Const(c) => matches!(c, Const::Null | Const::Bool(_)),
            Expr::Prop(_) | Expr::Neg(_) => false,
            _ => true,
        }
    }

    pub fn constant(&self) -> Option<&Const> {
        match self {
            Expr::Const(c) => Some(c),
            _ => None,
        }
    }
}
