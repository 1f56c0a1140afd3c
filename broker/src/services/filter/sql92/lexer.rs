//! Tokens of RocketMQ 4.9's selector grammar (`SelectorParserTokenManager`): keywords are
//! case-insensitive, identifiers are ASCII `[A-Za-z_$][A-Za-z0-9_$]*` and looked up by
//! their exact text, strings are single-quoted with `''` for a quote and no other escape,
//! numbers are unsigned (a sign is a unary operator). `--` and `/* */` are comments.

use super::CompileError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keyword {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
}

impl Keyword {
    fn from_word(word: &str) -> Option<Self> {
        const ALL: [(&str, Keyword); 9] = [
            ("NOT", Keyword::Not),
            ("AND", Keyword::And),
            ("OR", Keyword::Or),
            ("BETWEEN", Keyword::Between),
            ("IN", Keyword::In),
            ("TRUE", Keyword::True),
            ("FALSE", Keyword::False),
            ("NULL", Keyword::Null),
            ("IS", Keyword::Is),
        ];
        ALL.iter()
            .find(|(text, _)| text.eq_ignore_ascii_case(word))
            .map(|(_, k)| *k)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Kw(Keyword),
    Ident(String),
    /// Digits of a DECIMAL literal, without its `l`/`L` suffix.
    Decimal(String),
    Float(String),
    Str(String),
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Eof,
}

/// A token and where it starts (1-based line and column, as JavaCC reports them).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Spanned {
    pub tok: Tok,
    pub line: u32,
    pub column: u32,
    /// The source text of the token, for error messages.
    pub text: String,
}

pub(super) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: u32,
    column: u32,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$'
}

fn is_ident_part(c: u8) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Self {
            src,
            pos: 0,
            line: 1,
            column: 1,
        }
    }

    fn peek_byte(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    /// Advances over `n` bytes, keeping line and column (in characters) current.
    fn bump(&mut self, n: usize) {
        let end = self.pos + n;
        for c in self.src[self.pos..end].chars() {
            if c == '\n' {
                self.line += 1;
                self.column = 1;
            } else {
                self.column += 1;
            }
        }
        self.pos = end;
    }

    fn error_here(&self, what: String) -> CompileError {
        CompileError::new(what, self.line, self.column)
    }

    fn skip_blanks_and_comments(&mut self) -> Result<(), CompileError> {
        loop {
            match self.peek_byte(0) {
                Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0c) => self.bump(1),
                Some(b'-') if self.peek_byte(1) == Some(b'-') => {
                    let rest = &self.src[self.pos..];
                    let len = rest.find(['\n', '\r']).unwrap_or(rest.len());
                    self.bump(len);
                }
                Some(b'/') if self.peek_byte(1) == Some(b'*') => {
                    let rest = &self.src[self.pos + 2..];
                    let Some(end) = rest.find("*/") else {
                        return Err(self.error_here("Lexical error: unterminated comment".into()));
                    };
                    self.bump(2 + end + 2);
                }
                _ => return Ok(()),
            }
        }
    }

    pub fn next_token(&mut self) -> Result<Spanned, CompileError> {
        self.skip_blanks_and_comments()?;
        let (line, column, start) = (self.line, self.column, self.pos);
        let Some(c) = self.peek_byte(0) else {
            return Ok(Spanned {
                tok: Tok::Eof,
                line,
                column,
                text: "<EOF>".into(),
            });
        };
        let (tok, len) = match c {
            b'=' => (Tok::Eq, 1),
            b'<' if self.peek_byte(1) == Some(b'>') => (Tok::Ne, 2),
            b'<' if self.peek_byte(1) == Some(b'=') => (Tok::Le, 2),
            b'<' => (Tok::Lt, 1),
            b'>' if self.peek_byte(1) == Some(b'=') => (Tok::Ge, 2),
            b'>' => (Tok::Gt, 1),
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b',' => (Tok::Comma, 1),
            b'+' => (Tok::Plus, 1),
            b'-' => (Tok::Minus, 1),
            b'\'' => self.string()?,
            c if is_ident_start(c) => {
                let len = self.src[start..]
                    .bytes()
                    .take_while(|b| is_ident_part(*b))
                    .count();
                let word = &self.src[start..start + len];
                let tok = Keyword::from_word(word).map_or_else(|| Tok::Ident(word.into()), Tok::Kw);
                (tok, len)
            }
            c if c.is_ascii_digit()
                || (c == b'.' && self.peek_byte(1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                self.number()
            }
            _ => {
                let ch = self.src[start..].chars().next().unwrap_or('?');
                return Err(self.error_here(format!("Lexical error: unexpected character {ch:?}")));
            }
        };
        let text = self.src[start..start + len].to_owned();
        self.bump(len);
        Ok(Spanned {
            tok,
            line,
            column,
            text,
        })
    }

    /// `'...'` with `''` standing for one quote; the token's length in bytes.
    fn string(&self) -> Result<(Tok, usize), CompileError> {
        let bytes = self.src.as_bytes();
        let mut i = self.pos + 1;
        let mut value = String::new();
        let mut run = i;
        loop {
            match bytes.get(i) {
                None => {
                    return Err(
                        self.error_here("Lexical error: unterminated string literal".into())
                    );
                }
                Some(b'\'') if bytes.get(i + 1) == Some(&b'\'') => {
                    value.push_str(&self.src[run..=i]);
                    i += 2;
                    run = i;
                }
                Some(b'\'') => {
                    value.push_str(&self.src[run..i]);
                    return Ok((Tok::Str(value), i + 1 - self.pos));
                }
                Some(_) => i += 1,
            }
        }
    }

    /// DECIMAL (`0` | `[1-9][0-9]*`, optional `l`/`L`) or FLOAT
    /// (`D+ . D* EXP?` | `. D+ EXP?` | `D+ EXP`), longest match.
    fn number(&self) -> (Tok, usize) {
        let bytes = &self.src.as_bytes()[self.pos..];
        let digits = |from: usize| {
            bytes[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let int_len = digits(0);
        let mut len = int_len;
        let mut is_float = false;
        if bytes.get(len) == Some(&b'.') {
            is_float = true;
            len += 1;
            len += digits(len);
        }
        // An exponent needs at least one digit after the optional sign.
        if matches!(bytes.get(len), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
            let exp_digits = digits(len + 1 + sign);
            if exp_digits > 0 {
                is_float = true;
                len += 1 + sign + exp_digits;
            }
        }
        if is_float {
            return (
                Tok::Float(self.src[self.pos..self.pos + len].to_owned()),
                len,
            );
        }
        // DECIMAL: a leading 0 is the whole literal.
        let len = if bytes[0] == b'0' { 1 } else { int_len };
        let suffix = usize::from(matches!(bytes.get(len), Some(b'l' | b'L')));
        (
            Tok::Decimal(self.src[self.pos..self.pos + len].to_owned()),
            len + suffix,
        )
    }
}
