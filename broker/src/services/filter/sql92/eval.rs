//! Three-valued evaluation with 4.9's quirks (`LogicExpression`, `UnaryExpression`,
//! `ComparisonExpression`): AND/OR short-circuit left to right, so whether an error is
//! reached depends on order; `=` is asymmetric about NULL; `IN` is exact string
//! membership.

use super::ast::{CmpOp, Const, Expr, Slot};
use super::value::{EvalError, Value, compare, java_double};

fn constant(c: &Const) -> Value<'_> {
    match c {
        Const::Null => Value::Null,
        Const::Bool(b) => Value::Bool(*b),
        Const::Int(i) => Value::Int(*i),
        Const::Long(l) => Value::Long(*l),
        Const::Double(d) => Value::Double(*d),
        Const::Str(s) => Value::Str(s),
    }
}

/// A boolean operand: TRUE, FALSE or NULL. Anything else is a Java ClassCastException.
fn truth(v: Value<'_>) -> Result<Option<bool>, EvalError> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        _ => Err(EvalError::ClassCast),
    }
}

fn of(t: Option<bool>) -> Value<'static> {
    t.map_or(Value::Null, Value::Bool)
}

/// A property's value from the decoded slots; NULL when the message lacks it.
fn property<'a>(slots: &[Option<&'a str>], slot: Slot) -> Option<&'a str> {
    slots.get(usize::from(slot.0)).copied().flatten()
}

/// A flat AND (`decisive` false) or OR (`decisive` true) chain, folded left to right as
/// 4.9's left-deep `LogicExpression`s evaluate it: the decisive value ends the chain
/// before the next operand runs; otherwise an operand that is NULL makes the result NULL
/// unless a later one is decisive. An operand's error ends the chain only if it is
/// reached, so order matters exactly as in 4.9.
fn fold(parts: &[Expr], props: &[Option<&str>], decisive: bool) -> Result<Option<bool>, EvalError> {
    let mut acc = Some(!decisive);
    for part in parts {
        if acc == Some(decisive) {
            break;
        }
        acc = match truth(eval(part, props)?)? {
            Some(b) if b == decisive => Some(decisive),
            Some(_) => acc,
            None => None,
        };
    }
    Ok(acc)
}

/// `props` holds one value per name of the selector's table, by slot.
pub(super) fn eval<'a>(e: &'a Expr, props: &[Option<&'a str>]) -> Result<Value<'a>, EvalError> {
    Ok(match e {
        Expr::Const(c) => constant(c),
        Expr::Prop(slot) => property(props, *slot).map_or(Value::Null, Value::Str),
        Expr::Neg(inner) => match eval(inner, props)? {
            Value::Int(i) => Value::Int(i.wrapping_neg()),
            Value::Long(l) => Value::Long(l.wrapping_neg()),
            Value::Double(d) => Value::Double(-d),
            _ => Value::Null,
        },
        Expr::Not(inner) => of(truth(eval(inner, props)?)?.map(|b| !b)),
        Expr::BoolCast(inner) => match eval(inner, props)? {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(b),
            _ => Value::Bool(false),
        },
        Expr::And(parts) => of(fold(parts, props, false)?),
        Expr::Or(parts) => of(fold(parts, props, true)?),
        Expr::Eq(l, r) => {
            // Both sides are evaluated before the NULL check, as in 4.9.
            let lv = eval(l, props)?;
            let rv = eval(r, props)?;
            match (lv, rv) {
                (Value::Null, Value::Null) => Value::Bool(true),
                (Value::Null, _) => Value::Null,
                (_, Value::Null) => Value::Bool(false),
                (Value::Str(a), Value::Str(b)) => Value::Bool(a == b),
                (lv, rv) => Value::Bool(compare(lv, rv)? == 0),
            }
        }
        Expr::IsNull(inner) => Value::Bool(eval(inner, props)? == Value::Null),
        Expr::Cmp(op, l, r) => {
            let lv = eval(l, props)?;
            if lv == Value::Null {
                return Ok(Value::Null);
            }
            let rv = eval(r, props)?;
            let c = match (lv, rv) {
                (_, Value::Null) => return Ok(Value::Null),
                // Two properties: both read as doubles (`Double.valueOf`).
                (Value::Str(a), Value::Str(b)) => compare(
                    Value::Double(java_double(a)?),
                    Value::Double(java_double(b)?),
                )?,
                (lv, rv) => compare(lv, rv)?,
            };
            Value::Bool(match op {
                CmpOp::Gt => c > 0,
                CmpOp::Ge => c >= 0,
                CmpOp::Lt => c < 0,
                CmpOp::Le => c <= 0,
            })
        }
        Expr::In {
            prop,
            items,
            negated,
        } => match property(props, *prop) {
            None => Value::Null,
            Some(v) => Value::Bool(items.iter().any(|i| **i == *v) ^ negated),
        },
    })
}
