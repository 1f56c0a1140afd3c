//! Recursive-descent parser for 4.9's selector grammar (`SelectorParser`), with the checks
//! 4.9 makes while building the tree (`ComparisonExpression.create*`,
//! `ConstantExpression.createFromDecimal/createFloat`).
//!
//! ```text
//! selector := or_expr EOF
//! or_expr  := and_expr { OR and_expr }
//! and_expr := eq_expr { AND eq_expr }
//! eq_expr  := cmp_expr { ("=" | "<>") cmp_expr | IS [NOT] NULL }
//! cmp_expr := unary { (">" | ">=" | "<" | "<=") unary
//!                   | [NOT] BETWEEN unary AND unary
//!                   | [NOT] IN "(" STRING { "," STRING } ")" }
//! unary    := ("+" | "-" | NOT) unary | primary
//! primary  := STRING | DECIMAL | FLOAT | TRUE | FALSE | NULL | ID | "(" or_expr ")"
//! ```
//!
//! One deliberate difference: 4.9 stops at the first token that cannot continue the
//! expression and ignores the rest (`a = 1 b = 2` is `a = 1`, `a like 'x'` is the bare
//! `a`). Here anything after a complete expression is an error, so a typo fails at
//! subscription time instead of silently filtering out everything.

use super::CompileError;
use super::ast::{CmpOp, Const, Expr, Slot};
use super::budget::{Budget, Sql92Limits};
use super::lexer::{Keyword, Lexer, Spanned, Tok};
use super::value::{Value, compare};

/// The tree of `src`, which must fit `limits` (see [`super::budget`]): length before lexing, depth and node
/// count while the tree is built, so an over-budget tree is never allocated whole.
pub(super) fn parse(src: &str, limits: &Sql92Limits) -> Result<Parsed, CompileError> {
    if src.len() > limits.max_length {
        return Err(CompileError::over(
            Budget::Length,
            format!(
                "the selector is {} bytes long, more than {} {}",
                src.len(),
                Budget::Length.key(),
                limits.max_length
            ),
            1,
            1,
        ));
    }
    if src.trim().is_empty() {
        return Err(CompileError::new("the expression is empty".into(), 1, 1));
    }
    let mut lexer = Lexer::new(src);
    let current = lexer.next_token()?;
    let mut p = Parser {
        lexer,
        current,
        names: Vec::new(),
        limits: *limits,
        nesting: 0,
    };
    let expr = p.or_expr()?;
    if p.current.tok != Tok::Eof {
        return Err(p.unexpected());
    }
    let at = p.current.clone();
    let root = p.as_boolean(expr, &at)?;
    Ok(Parsed {
        expr: root.expr,
        names: p.names,
        nodes: root.nodes,
    })
}

/// A compiled selector's tree, its property-name table (`Expr::Prop(Slot(i))` names
/// `names[i]`) and its node count.
pub(super) struct Parsed {
    pub expr: Expr,
    pub names: Vec<Box<str>>,
    pub nodes: u32,
}

/// A subtree being built, with the two figures the budget needs: its depth (a leaf is
/// 1) and its node count.
struct Sub {
    expr: Expr,
    depth: u32,
    nodes: u32,
}

impl Sub {
    fn leaf(expr: Expr) -> Self {
        Self {
            expr,
            depth: 1,
            nodes: 1,
        }
    }
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    current: Spanned,
    /// Distinct property names in order of first use.
    names: Vec<Box<str>>,
    limits: Sql92Limits,
    /// Open parentheses and prefix operators around the current token: the parser's
    /// own recursion, bounded like the tree's depth.
    nesting: u32,
}

fn error_at(at: &Spanned, message: String) -> CompileError {
    CompileError::new(message, at.line, at.column)
}

fn const_value(c: &Const) -> Value<'_> {
    match c {
        Const::Null => Value::Null,
        Const::Bool(b) => Value::Bool(*b),
        Const::Int(i) => Value::Int(*i),
        Const::Long(l) => Value::Long(*l),
        Const::Double(d) => Value::Double(*d),
        Const::Str(s) => Value::Str(s),
    }
}

/// `checkLessThanOperand`: only numeric constants and non-boolean expressions.
fn check_ordered_operand(e: &Expr, at: &Spanned) -> Result<(), CompileError> {
    let ok = match e.constant() {
        Some(c) => matches!(c, Const::Int(_) | Const::Long(_) | Const::Double(_)),
        None => !e.is_boolean(),
    };
    if ok {
        Ok(())
    } else {
        Err(error_at(
            at,
            "Value cannot be compared by '>', '>=', '<', '<='".into(),
        ))
    }
}

/// `createEqual`: no NULL literal on either side (use IS NULL), and a TRUE/FALSE literal
/// on the left only against another boolean literal.
fn check_equal(l: &Expr, r: &Expr, at: &Spanned) -> Result<(), CompileError> {
    if l.constant() == Some(&Const::Null) || r.constant() == Some(&Const::Null) {
        return Err(error_at(at, "NULL cannot be compared, use IS NULL".into()));
    }
    if let (Some(lc), Some(rc)) = (l.constant(), r.constant())
        && matches!(lc, Const::Bool(_))
        && !matches!(rc, Const::Bool(_))
    {
        return Err(error_at(
            at,
            "a boolean literal cannot be compared with a non-boolean one".into(),
        ));
    }
    Ok(())
}

/// `createBetween` / `createNotBetween`: constant bounds must be non-null and ordered.
fn check_between(low: &Expr, high: &Expr, at: &Spanned) -> Result<(), CompileError> {
    let (Some(lc), Some(hc)) = (low.constant(), high.constant()) else {
        return Ok(());
    };
    if *lc == Const::Null || *hc == Const::Null {
        return Err(error_at(
            at,
            "Illegal values of between, values can not be null!".into(),
        ));
    }
    match compare(const_value(hc), const_value(lc)) {
        Ok(c) if c >= 0 => Ok(()),
        _ => Err(error_at(
            at,
            "Illegal values of between, left value must be less than or equal to right value"
                .into(),
        )),
    }
}

impl Parser<'_> {
    /// The depth and node count of a node with `levels` levels of its own (1, or 2 for
    /// `Not(Eq)`) over `children`, refused when over budget: called before the node is
    /// built.
    fn measure(
        &self,
        children: &[&Sub],
        levels: u32,
        at: &Spanned,
    ) -> Result<(u32, u32), CompileError> {
        let depth = children
            .iter()
            .map(|c| c.depth)
            .max()
            .unwrap_or(0)
            .saturating_add(levels);
        let nodes = children
            .iter()
            .fold(levels, |n, c| n.saturating_add(c.nodes));
        self.charge(depth, nodes, at)?;
        Ok((depth, nodes))
    }

    /// Refuses `depth` levels or `nodes` nodes when over budget.
    fn charge(&self, depth: u32, nodes: u32, at: &Spanned) -> Result<(), CompileError> {
        let max_depth = self.limits.max_depth;
        if depth > max_depth {
            return Err(CompileError::over(
                Budget::Depth,
                format!(
                    "the selector nests deeper than {} {max_depth}",
                    Budget::Depth.key()
                ),
                at.line,
                at.column,
            ));
        }
        let max_nodes = self.limits.max_nodes;
        if nodes > max_nodes {
            return Err(CompileError::over(
                Budget::Nodes,
                format!(
                    "the selector has more terms than {} {max_nodes}",
                    Budget::Nodes.key()
                ),
                at.line,
                at.column,
            ));
        }
        Ok(())
    }

    /// `asBooleanExpression`: a bare property becomes a boolean cast, any other
    /// non-boolean operand of AND/OR/NOT or the whole selector is an error.
    fn as_boolean(&self, e: Sub, at: &Spanned) -> Result<Sub, CompileError> {
        if e.expr.is_boolean() {
            return Ok(e);
        }
        if matches!(e.expr, Expr::Prop(_)) {
            let (depth, nodes) = self.measure(&[&e], 1, at)?;
            return Ok(Sub {
                expr: Expr::BoolCast(Box::new(e.expr)),
                depth,
                nodes,
            });
        }
        Err(error_at(
            at,
            "Expression will not result in a boolean value".into(),
        ))
    }

    fn ordered(&self, op: CmpOp, l: Sub, r: Sub, at: &Spanned) -> Result<Sub, CompileError> {
        check_ordered_operand(&l.expr, at)?;
        check_ordered_operand(&r.expr, at)?;
        let (depth, nodes) = self.measure(&[&l, &r], 1, at)?;
        Ok(Sub {
            expr: Expr::Cmp(op, Box::new(l.expr), Box::new(r.expr)),
            depth,
            nodes,
        })
    }

    /// `=`, or `<>` as `Not(Eq)`.
    fn equal(&self, l: Sub, r: Sub, negated: bool, at: &Spanned) -> Result<Sub, CompileError> {
        check_equal(&l.expr, &r.expr, at)?;
        let (depth, nodes) = self.measure(&[&l, &r], 1 + u32::from(negated), at)?;
        let eq = Expr::Eq(Box::new(l.expr), Box::new(r.expr));
        Ok(Sub {
            expr: if negated { Expr::Not(Box::new(eq)) } else { eq },
            depth,
            nodes,
        })
    }

    /// `createBetween` / `createNotBetween`, as `v >= low AND v <= high` or
    /// `v < low OR v > high`; `v` appears twice in the tree and is charged twice, before
    /// it is copied.
    fn between(
        &self,
        v: Sub,
        low: Sub,
        high: Sub,
        negated: bool,
        at: &Spanned,
    ) -> Result<Sub, CompileError> {
        check_between(&low.expr, &high.expr, at)?;
        let operands = [&v, &low, &high];
        let depth = operands.iter().map(|s| s.depth).max().unwrap_or(0);
        let nodes = operands
            .iter()
            .fold(3 + v.nodes, |n, s| n.saturating_add(s.nodes));
        self.charge(depth.saturating_add(2), nodes, at)?;
        let (first, second) = if negated {
            (CmpOp::Lt, CmpOp::Gt)
        } else {
            (CmpOp::Ge, CmpOp::Le)
        };
        let v_again = Sub {
            expr: v.expr.clone(),
            ..v
        };
        let a = self.ordered(first, v_again, low, at)?;
        let b = self.ordered(second, v, high, at)?;
        let (depth, nodes) = self.measure(&[&a, &b], 1, at)?;
        let parts = vec![a.expr, b.expr];
        Ok(Sub {
            expr: if negated {
                Expr::Or(parts)
            } else {
                Expr::And(parts)
            },
            depth,
            nodes,
        })
    }

    /// The slot of `name`, shared by every reference to it.
    fn slot(&mut self, name: &str, at: &Spanned) -> Result<Slot, CompileError> {
        if let Some(i) = self.names.iter().position(|n| **n == *name) {
            return Ok(Slot(i as u16));
        }
        let i = u16::try_from(self.names.len())
            .map_err(|_| error_at(at, "too many distinct properties".into()))?;
        self.names.push(name.into());
        Ok(Slot(i))
    }

    fn advance(&mut self) -> Result<Spanned, CompileError> {
        let next = self.lexer.next_token()?;
        Ok(std::mem::replace(&mut self.current, next))
    }

    fn at_kw(&self, k: Keyword) -> bool {
        self.current.tok == Tok::Kw(k)
    }

    fn unexpected(&self) -> CompileError {
        error_at(
            &self.current,
            format!("Encountered \"{}\"", self.current.text),
        )
    }

    fn expect(&mut self, tok: &Tok) -> Result<Spanned, CompileError> {
        if &self.current.tok == tok {
            self.advance()
        } else {
            Err(self.unexpected())
        }
    }

    /// Runs `inner` one level of nesting deeper (a parenthesis or a prefix operator),
    /// refusing the level before the parser recurses into it.
    fn nested(
        &mut self,
        at: &Spanned,
        inner: impl FnOnce(&mut Self) -> Result<Sub, CompileError>,
    ) -> Result<Sub, CompileError> {
        self.charge(self.nesting + 1, 0, at)?;
        self.nesting += 1;
        let result = inner(self);
        self.nesting -= 1;
        result
    }

    /// One `AND` or `OR` chain, `operand { keyword operand }`, as one flat node. Each
    /// operand must be boolean, checked at the keyword before it (the first at the
    /// first keyword), after the operand to its right has been parsed, as 4.9 does.
    fn chain(
        &mut self,
        keyword: Keyword,
        operand: fn(&mut Self) -> Result<Sub, CompileError>,
    ) -> Result<Sub, CompileError> {
        let first = operand(self)?;
        if !self.at_kw(keyword) {
            return Ok(first);
        }
        let mut at = self.advance()?;
        let second = operand(self)?;
        let first = self.as_boolean(first, &at)?;
        let second = self.as_boolean(second, &at)?;
        let (mut depth, mut nodes) = self.measure(&[&first, &second], 1, &at)?;
        let mut parts = vec![first.expr, second.expr];
        while self.at_kw(keyword) {
            at = self.advance()?;
            let next = operand(self)?;
            let next = self.as_boolean(next, &at)?;
            depth = depth.max(next.depth.saturating_add(1));
            nodes = nodes.saturating_add(next.nodes);
            self.charge(depth, nodes, &at)?;
            parts.push(next.expr);
        }
        let expr = if keyword == Keyword::And {
            Expr::And(parts)
        } else {
            Expr::Or(parts)
        };
        Ok(Sub { expr, depth, nodes })
    }

    fn or_expr(&mut self) -> Result<Sub, CompileError> {
        self.chain(Keyword::Or, Self::and_expr)
    }

    fn and_expr(&mut self) -> Result<Sub, CompileError> {
        self.chain(Keyword::And, Self::eq_expr)
    }

    /// `=`, `<>` and `IS [NOT] NULL` chain left-deep, as in 4.9 (`a = 1 = 1` compares the
    /// first comparison's result): every link adds a level, so a long chain is refused
    /// by the depth budget.
    fn eq_expr(&mut self) -> Result<Sub, CompileError> {
        let mut left = self.cmp_expr()?;
        loop {
            match self.current.tok {
                Tok::Eq | Tok::Ne => {
                    let negated = self.current.tok == Tok::Ne;
                    let at = self.advance()?;
                    let right = self.cmp_expr()?;
                    left = self.equal(left, right, negated, &at)?;
                }
                Tok::Kw(Keyword::Is) => {
                    let at = self.advance()?;
                    let negated = self.at_kw(Keyword::Not);
                    if negated {
                        self.advance()?;
                    }
                    self.expect(&Tok::Kw(Keyword::Null))?;
                    let (depth, nodes) = self.measure(&[&left], 1 + u32::from(negated), &at)?;
                    let is_null = Expr::IsNull(Box::new(left.expr));
                    left = Sub {
                        expr: if negated {
                            Expr::Not(Box::new(is_null))
                        } else {
                            is_null
                        },
                        depth,
                        nodes,
                    };
                }
                _ => return Ok(left),
            }
        }
    }

    fn cmp_expr(&mut self) -> Result<Sub, CompileError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.current.tok {
                Tok::Gt => Some(CmpOp::Gt),
                Tok::Ge => Some(CmpOp::Ge),
                Tok::Lt => Some(CmpOp::Lt),
                Tok::Le => Some(CmpOp::Le),
                _ => None,
            };
            if let Some(op) = op {
                let at = self.advance()?;
                let right = self.unary()?;
                left = self.ordered(op, left, right, &at)?;
                continue;
            }
            let negated = self.at_kw(Keyword::Not);
            if !negated && !self.at_kw(Keyword::Between) && !self.at_kw(Keyword::In) {
                return Ok(left);
            }
            if negated {
                self.advance()?;
            }
            match self.current.tok {
                Tok::Kw(Keyword::Between) => {
                    let at = self.advance()?;
                    let low = self.unary()?;
                    self.expect(&Tok::Kw(Keyword::And))?;
                    let high = self.unary()?;
                    left = self.between(left, low, high, negated, &at)?;
                }
                Tok::Kw(Keyword::In) => {
                    let at = self.advance()?;
                    left = self.in_list(left, negated, &at)?;
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    /// `( 'a', 'b', ... )` after IN: string literals only, left side a property. Each
    /// item counts as a node.
    fn in_list(&mut self, left: Sub, negated: bool, at: &Spanned) -> Result<Sub, CompileError> {
        self.expect(&Tok::LParen)?;
        let mut items = Vec::new();
        loop {
            match &self.current.tok {
                Tok::Str(s) => items.push(s.as_str().into()),
                _ => return Err(self.unexpected()),
            }
            let nodes = u32::try_from(items.len()).map_or(u32::MAX, |n| n.saturating_add(1));
            self.charge(1, nodes, &self.current)?;
            self.advance()?;
            if self.current.tok == Tok::Comma {
                self.advance()?;
            } else {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        let Expr::Prop(prop) = left.expr else {
            return Err(error_at(at, "Expected a property for In expression".into()));
        };
        let nodes = u32::try_from(items.len()).map_or(u32::MAX, |n| n.saturating_add(1));
        Ok(Sub {
            expr: Expr::In {
                prop,
                items,
                negated,
            },
            depth: 1,
            nodes,
        })
    }

    fn unary(&mut self) -> Result<Sub, CompileError> {
        match self.current.tok {
            Tok::Plus => {
                let at = self.advance()?;
                self.nested(&at, Self::unary)
            }
            Tok::Minus => {
                let at = self.advance()?;
                let inner = self.nested(&at, Self::unary)?;
                let (depth, nodes) = self.measure(&[&inner], 1, &at)?;
                Ok(Sub {
                    expr: Expr::Neg(Box::new(inner.expr)),
                    depth,
                    nodes,
                })
            }
            Tok::Kw(Keyword::Not) => {
                let at = self.advance()?;
                let operand = self.nested(&at, Self::unary)?;
                let operand = self.as_boolean(operand, &at)?;
                let (depth, nodes) = self.measure(&[&operand], 1, &at)?;
                Ok(Sub {
                    expr: Expr::Not(Box::new(operand.expr)),
                    depth,
                    nodes,
                })
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Sub, CompileError> {
        let tok = self.advance()?;
        let c = match tok.tok {
            Tok::Str(ref s) => Const::Str(s.as_str().into()),
            Tok::Decimal(ref digits) => decimal(digits, &tok)?,
            Tok::Float(ref text) => float(text, &tok)?,
            Tok::Kw(Keyword::True) => Const::Bool(true),
            Tok::Kw(Keyword::False) => Const::Bool(false),
            Tok::Kw(Keyword::Null) => Const::Null,
            Tok::Ident(ref name) => return Ok(Sub::leaf(Expr::Prop(self.slot(name, &tok)?))),
            Tok::LParen => {
                let inner = self.nested(&tok, Self::or_expr)?;
                self.expect(&Tok::RParen)?;
                return Ok(inner);
            }
            _ => return Err(error_at(&tok, format!("Encountered \"{}\"", tok.text))),
        };
        Ok(Sub::leaf(Expr::Const(c)))
    }
}

/// `createFromDecimal`: a Java long (overflow is an error), an Integer when it fits.
fn decimal(digits: &str, at: &Spanned) -> Result<Const, CompileError> {
    let v: i64 = digits
        .parse()
        .map_err(|_| error_at(at, format!("the number {digits} does not fit a long")))?;
    Ok(i32::try_from(v).map_or(Const::Long(v), Const::Int))
}

/// `createFloat`: a Java double, refused above `Double.MAX_VALUE` and below
/// `Double.MIN_VALUE` (4.9e-324), so a literal zero such as `0.0` is an error in 4.9.
fn float(text: &str, at: &Spanned) -> Result<Const, CompileError> {
    let v: f64 = text
        .parse()
        .map_err(|_| error_at(at, format!("the number {text} is not a double")))?;
    if !(f64::from_bits(1)..=f64::MAX).contains(&v) {
        return Err(error_at(
            at,
            format!("the number {text} is out of the double range"),
        ));
    }
    Ok(Const::Double(v))
}
