//! Values and the comparison rule of 4.9's `ComparisonExpression.__compare` with string
//! conversion on (always on for parsed selectors). Property values are strings; constants
//! are Java `Integer`, `Long`, `Double`, `String` or `Boolean`.

use std::cmp::Ordering;

/// A value during evaluation; `Null` is SQL's unknown (a missing property).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    /// A Java `Integer` literal (a DECIMAL in int range).
    Int(i32),
    /// A Java `Long` literal.
    Long(i64),
    Double(f64),
    Str(&'a str),
}

/// Why an evaluation threw in 4.9; the broker then treats the message as not matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// `Integer.valueOf`, `Long.valueOf` or `Double.valueOf` of a property failed.
    #[error("a property value is not a number of the type it is compared with")]
    NumberFormat,
    /// A boolean compared with a string on its left (`TRUE = a`): a Java ClassCastException.
    #[error("a boolean cannot be compared with a string on its right")]
    ClassCast,
}

/// `Integer.valueOf(String)`: optional sign, ASCII digits, in range.
pub fn java_int(s: &str) -> Result<i32, EvalError> {
    s.parse().map_err(|_| EvalError::NumberFormat)
}

/// `Long.valueOf(String)`.
pub fn java_long(s: &str) -> Result<i64, EvalError> {
    s.parse().map_err(|_| EvalError::NumberFormat)
}

/// `Double.valueOf(String)`: surrounding characters <= U+0020 trimmed, optional sign,
/// `NaN`, `Infinity`, or decimal digits with an optional fraction and exponent, and an
/// optional `f`/`F`/`d`/`D` suffix. (Java's hexadecimal floating literals are not
/// accepted here; no client puts them in a property.)
pub fn java_double(s: &str) -> Result<f64, EvalError> {
    let s = s.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = match body {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let digits = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
            if !is_java_decimal(digits) {
                return Err(EvalError::NumberFormat);
            }
            digits.parse::<f64>().map_err(|_| EvalError::NumberFormat)?
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// `D+ (. D*)? EXP?` or `. D+ EXP?` with `EXP = [eE][+-]?D+`.
fn is_java_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |from: usize| {
        b[from.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let int = digits(0);
    let mut i = int;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        frac = digits(i + 1);
        i += 1 + frac;
    }
    if int + frac == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp = digits(i);
        if exp == 0 {
            return false;
        }
        i += exp;
    }
    i == b.len()
}

/// `Boolean.valueOf(String)`.
fn java_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

fn ord(o: Ordering) -> i32 {
    o as i32
}

/// `Double.compareTo`: NaN above everything, -0.0 below 0.0.
fn cmp_f64(a: f64, b: f64) -> i32 {
    let canon = |x: f64| if x.is_nan() { f64::NAN } else { x };
    ord(canon(a).total_cmp(&canon(b)))
}

/// `__compare(lv, rv, true)` for two non-null values: the sign of `lv - rv`, or -1 for
/// types it does not convert between. A string meets a number in the number's type.
pub fn compare(lv: Value<'_>, rv: Value<'_>) -> Result<i32, EvalError> {
    use Value::*;
    Ok(match (lv, rv) {
        (Bool(a), Bool(b)) => ord(a.cmp(&b)),
        (Int(a), Int(b)) => ord(a.cmp(&b)),
        (Long(a), Long(b)) => ord(a.cmp(&b)),
        (Double(a), Double(b)) => cmp_f64(a, b),
        (Str(a), Str(b)) => ord(a.cmp(b)),
        (Bool(_), Str(_)) => return Err(EvalError::ClassCast),
        (Int(a), Long(b)) => ord(i64::from(a).cmp(&b)),
        (Long(a), Int(b)) => ord(a.cmp(&i64::from(b))),
        (Int(a), Double(b)) => cmp_f64(f64::from(a), b),
        (Long(a), Double(b)) => cmp_f64(a as f64, b),
        (Double(a), Int(b)) => cmp_f64(a, f64::from(b)),
        (Double(a), Long(b)) => cmp_f64(a, b as f64),
        (Int(a), Str(b)) => ord(a.cmp(&java_int(b)?)),
        (Long(a), Str(b)) => ord(a.cmp(&java_long(b)?)),
        (Double(a), Str(b)) => cmp_f64(a, java_double(b)?),
        (Str(a), Bool(b)) => ord(java_bool(a).cmp(&b)),
        (Str(a), Int(b)) => ord(java_int(a)?.cmp(&b)),
        (Str(a), Long(b)) => ord(java_long(a)?.cmp(&b)),
        (Str(a), Double(b)) => cmp_f64(java_double(a)?, b),
        _ => -1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_number_parsers() {
        assert_eq!(java_int("+5"), Ok(5));
        assert_eq!(java_int("-5"), Ok(-5));
        assert!(java_int("5.5").is_err());
        assert!(java_int(" 5").is_err());
        assert!(java_int("3000000000").is_err());
        assert_eq!(java_long("3000000000"), Ok(3_000_000_000));
        assert_eq!(java_double(" 5.5 "), Ok(5.5));
        assert_eq!(java_double("1e3d"), Ok(1000.0));
        assert_eq!(java_double("-Infinity"), Ok(f64::NEG_INFINITY));
        assert!(java_double("NaN").unwrap().is_nan());
        assert_eq!(java_double("1."), Ok(1.0));
        assert_eq!(java_double(".5"), Ok(0.5));
        for bad in ["", ".", "inf", "nan", "1e", "abc", "1,5", "0x10", "e5"] {
            assert!(java_double(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn conversions_follow_the_constant_type() {
        assert_eq!(compare(Value::Str("5"), Value::Int(4)), Ok(1));
        assert!(compare(Value::Str("5.5"), Value::Int(4)).is_err());
        assert_eq!(compare(Value::Str("5.5"), Value::Double(4.0)), Ok(1));
        assert_eq!(compare(Value::Int(1), Value::Bool(true)), Ok(-1));
        assert_eq!(compare(Value::Str("TRUE"), Value::Bool(true)), Ok(0));
        assert_eq!(
            compare(Value::Bool(true), Value::Str("true")),
            Err(EvalError::ClassCast)
        );
        assert_eq!(compare(Value::Double(-0.0), Value::Double(0.0)), Ok(-1));
        assert_eq!(
            compare(Value::Double(f64::NAN), Value::Double(f64::INFINITY)),
            Ok(1)
        );
    }
}
