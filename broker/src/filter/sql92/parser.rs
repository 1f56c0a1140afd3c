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
use super::lexer::{Keyword, Lexer, Spanned, Tok};
use super::value::{Value, compare};

/// The tree and its property-name table: `Expr::Prop(Slot(i))` names `names[i]`.
pub(super) fn parse(src: &str) -> Result<(Expr, Vec<Box<str>>), CompileError> {
    if src.trim().is_empty() {
        return Err(CompileError::new("the expression is empty".into(), 1, 1));
    }
    let mut lexer = Lexer::new(src);
    let current = lexer.next_token()?;
    let mut p = Parser {
        lexer,
        current,
        names: Vec::new(),
    };
    let expr = p.or_expr()?;
    if p.current.tok != Tok::Eof {
        return Err(p.unexpected());
    }
    Ok((as_boolean(expr, &p.current)?, p.names))
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    current: Spanned,
    /// Distinct property names in order of first use.
    names: Vec<Box<str>>,
}

fn error_at(at: &Spanned, message: String) -> CompileError {
    CompileError::new(message, at.line, at.column)
}

/// `asBooleanExpression`: a bare property becomes a boolean cast, any other non-boolean
/// operand of AND/OR/NOT or the whole selector is an error.
fn as_boolean(e: Expr, at: &Spanned) -> Result<Expr, CompileError> {
    if e.is_boolean() {
        return Ok(e);
    }
    if matches!(e, Expr::Prop(_)) {
        return Ok(Expr::BoolCast(Box::new(e)));
    }
    Err(error_at(
        at,
        "Expression will not result in a boolean value".into(),
    ))
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

fn ordered(op: CmpOp, l: Expr, r: Expr, at: &Spanned) -> Result<Expr, CompileError> {
    check_ordered_operand(&l, at)?;
    check_ordered_operand(&r, at)?;
    Ok(Expr::Cmp(op, Box::new(l), Box::new(r)))
}

/// `createEqual`: no NULL literal on either side (use IS NULL), and a TRUE/FALSE literal
/// on the left only against another boolean literal.
fn equal(l: Expr, r: Expr, at: &Spanned) -> Result<Expr, CompileError> {
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
    Ok(Expr::Eq(Box::new(l), Box::new(r)))
}

/// `createBetween` / `createNotBetween`; constant bounds must be non-null and ordered.
fn between(
    v: Expr,
    low: Expr,
    high: Expr,
    negated: bool,
    at: &Spanned,
) -> Result<Expr, CompileError> {
    if let (Some(lc), Some(hc)) = (low.constant(), high.constant()) {
        if *lc == Const::Null || *hc == Const::Null {
            return Err(error_at(
                at,
                "Illegal values of between, values can not be null!".into(),
            ));
        }
        match compare(const_value(hc), const_value(lc)) {
            Ok(c) if c >= 0 => {}
            _ => {
                return Err(error_at(
                    at,
                    "Illegal values of between, left value must be less than or equal to right value".into(),
                ));
            }
        }
    }
    if negated {
        let lt = ordered(CmpOp::Lt, v.clone(), low, at)?;
        let gt = ordered(CmpOp::Gt, v, high, at)?;
        Ok(Expr::Or(Box::new(lt), Box::new(gt)))
    } else {
        let ge = ordered(CmpOp::Ge, v.clone(), low, at)?;
        let le = ordered(CmpOp::Le, v, high, at)?;
        Ok(Expr::And(Box::new(ge), Box::new(le)))
    }
}

impl Parser<'_> {
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

    fn or_expr(&mut self) -> Result<Expr, CompileError> {
        let mut left = self.and_expr()?;
        while self.at_kw(Keyword::Or) {
            let at = self.advance()?;
            let right = self.and_expr()?;
            left = Expr::Or(
                Box::new(as_boolean(left, &at)?),
                Box::new(as_boolean(right, &at)?),
            );
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, CompileError> {
        let mut left = self.eq_expr()?;
        while self.at_kw(Keyword::And) {
            let at = self.advance()?;
            let right = self.eq_expr()?;
            left = Expr::And(
                Box::new(as_boolean(left, &at)?),
                Box::new(as_boolean(right, &at)?),
            );
        }
        Ok(left)
    }

    fn eq_expr(&mut self) -> Result<Expr, CompileError> {
        let mut left = self.cmp_expr()?;
        loop {
            match self.current.tok {
                Tok::Eq => {
                    let at = self.advance()?;
                    left = equal(left, self.cmp_expr()?, &at)?;
                }
                Tok::Ne => {
                    let at = self.advance()?;
                    left = Expr::Not(Box::new(equal(left, self.cmp_expr()?, &at)?));
                }
                Tok::Kw(Keyword::Is) => {
                    self.advance()?;
                    let negated = self.at_kw(Keyword::Not);
                    if negated {
                        self.advance()?;
                    }
                    self.expect(&Tok::Kw(Keyword::Null))?;
                    let is_null = Expr::IsNull(Box::new(left));
                    left = if negated {
                        Expr::Not(Box::new(is_null))
                    } else {
                        is_null
                    };
                }
                _ => return Ok(left),
            }
        }
    }

    fn cmp_expr(&mut self) -> Result<Expr, CompileError> {
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
                left = ordered(op, left, self.unary()?, &at)?;
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
                    left = between(left, low, high, negated, &at)?;
                }
                Tok::Kw(Keyword::In) => {
                    let at = self.advance()?;
                    left = self.in_list(left, negated, &at)?;
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    /// `( 'a', 'b', ... )` after IN: string literals only, left side a property.
    fn in_list(&mut self, left: Expr, negated: bool, at: &Spanned) -> Result<Expr, CompileError> {
        self.expect(&Tok::LParen)?;
        let mut items = Vec::new();
        loop {
            match &self.current.tok {
                Tok::Str(s) => items.push(s.as_str().into()),
                _ => return Err(self.unexpected()),
            }
            self.advance()?;
            if self.current.tok == Tok::Comma {
                self.advance()?;
            } else {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        let Expr::Prop(prop) = left else {
            return Err(error_at(at, "Expected a property for In expression".into()));
        };
        Ok(Expr::In {
            prop,
            items,
            negated,
        })
    }

    fn unary(&mut self) -> Result<Expr, CompileError> {
        match self.current.tok {
            Tok::Plus => {
                self.advance()?;
                self.unary()
            }
            Tok::Minus => {
                self.advance()?;
                Ok(Expr::Neg(Box::new(self.unary()?)))
            }
            Tok::Kw(Keyword::Not) => {
                let at = self.advance()?;
                let operand = self.unary()?;
                Ok(Expr::Not(Box::new(as_boolean(operand, &at)?)))
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Expr, CompileError> {
        let tok = self.advance()?;
        let c = match tok.tok {
            Tok::Str(ref s) => Const::Str(s.as_str().into()),
            Tok::Decimal(ref digits) => decimal(digits, &tok)?,
            Tok::Float(ref text) => float(text, &tok)?,
            Tok::Kw(Keyword::True) => Const::Bool(true),
            Tok::Kw(Keyword::False) => Const::Bool(false),
            Tok::Kw(Keyword::Null) => Const::Null,
            Tok::Ident(ref name) => return Ok(Expr::Prop(self.slot(name, &tok)?)),
            Tok::LParen => {
                let inner = self.or_expr()?;
                self.expect(&Tok::RParen)?;
                return Ok(inner);
            }
            _ => return Err(error_at(&tok, format!("Encountered \"{}\"", tok.text))),
        };
        Ok(Expr::Const(c))
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
