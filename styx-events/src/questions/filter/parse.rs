//! `--filter` text to a syntax tree: tokens with their columns, then a
//! recursive descent (`||` binds loosest, then `&&`, then `!`).
//!
//! ```text
//! filter  := [type {, type} ':'] or
//! or      := and {'||' and}
//! and     := unary {'&&' unary}
//! unary   := '!' unary | '(' or ')' | test
//! test    := field ['&' number] (cmp value | 'in' number ('..' | '..=') number)
//!          | field ('==' | '!=' | 'contains') string
//! cmp     := '==' | '!=' | '<' | '<=' | '>' | '>='
//! value   := number | name        (call, entry, true, …: resolved per field)
//! number  := decimal | 0x hex | 0b binary   ('_' allowed between digits)
//! ```

use super::FilterError;
use styx_common::filter::FILTER_MAX_OPS;

/// How deep an expression may nest (parentheses, `!`, and each `&&` or
/// `||` of a chain): the parser and the compiler recurse that deep, and a
/// program of [`FILTER_MAX_OPS`] operations cannot need more than this.
pub const MAX_DEPTH: usize = 2 * FILTER_MAX_OPS;

/// A parsed filter: the event types it names (none: every type with its
/// fields) and its expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// Types named before `:`, with their columns.
    pub types: Vec<(String, usize)>,
    pub expr: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Test(Test),
}

/// `field [& mask] OP value`, or `field in lo..hi`.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub field: String,
    /// Its column (1-based), for errors.
    pub column: usize,
    /// `& mask`, if given.
    pub mask: Option<u64>,
    /// What it is compared with.
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `== != < <= > >=` (a `CMP_*` code) with a value.
    Cmp(u8, Value),
    /// `in lo..hi` (end excluded) or `lo..=hi` (included), as `lo <= x < end`.
    In {
        /// Lowest value in.
        lo: u64,
        /// Highest value in.
        hi_inclusive: u64,
    },
    /// `== "text"` (true) or `!= "text"` (false).
    TextEq(String, bool),
    /// `contains "text"`.
    Contains(String),
}

/// The right side of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(u64),
    /// A name such as `call` or `entry`, with its column.
    Name(String, usize),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Number(u64),
    Str(String),
    Sym(&'static str),
}

/// Longest first, so `<=` is not read as `<`.
const SYMBOLS: &[&str] = &[
    "..=", "==", "!=", "<=", ">=", "&&", "||", "..", "<", ">", "!", "&", "(", ")", ":", ",",
];

fn tokens(text: &str) -> Result<Vec<(Token, usize)>, FilterError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let column = i + 1;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            out.push((Token::Number(number(word, column)?), column));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((Token::Ident(text[start..i].to_string()), column));
        } else if c == b'"' {
            let start = i + 1;
            let Some(len) = text[start..].find('"') else {
                return Err(FilterError::at(column, "a string with no closing '\"'"));
            };
            out.push((Token::Str(text[start..start + len].to_string()), column));
            i = start + len + 1;
        } else if let Some(sym) = SYMBOLS.iter().find(|s| text[i..].starts_with(**s)) {
            out.push((Token::Sym(sym), column));
            i += sym.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(FilterError::at(column, format!("unexpected '{ch}'")));
        }
    }
    Ok(out)
}

fn number(word: &str, column: usize) -> Result<u64, FilterError> {
    let digits = word.replace('_', "");
    let (radix, body) = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (16, hex)
    } else if let Some(bin) = digits.strip_prefix("0b") {
        (2, bin)
    } else {
        (10, digits.as_str())
    };
    u64::from_str_radix(body, radix).map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow => "does not fit 64 bits",
            _ => "is not a number (decimal, 0x hex or 0b binary)",
        };
        FilterError::at(column, format!("'{word}' {why}"))
    })
}

/// Parses one `--filter` expression.
pub fn parse(text: &str) -> Result<Parsed, FilterError> {
    let tokens = tokens(text)?;
    let mut p = Parser {
        tokens,
        at: 0,
        end: text.len() + 1,
        depth: 0,
    };
    let types = p.types();
    let expr = p.or()?;
    if let Some((token, column)) = p.tokens.get(p.at) {
        return Err(FilterError::at(
            *column,
            format!("expected '&&', '||' or the end, found {}", describe(token)),
        ));
    }
    Ok(Parsed { types, expr })
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    /// The column just past the text, for "found the end".
    end: usize,
    /// How deep the tree being built is here (see [`MAX_DEPTH`]).
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn column(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |(_, c)| *c)
    }

    /// One level deeper, at the token just taken; an error past [`MAX_DEPTH`].
    fn deeper(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let column = self.tokens.get(self.at - 1).map_or(self.end, |(_, c)| *c);
            return Err(FilterError::at(
                column,
                format!(
                    "the expression nests more than {MAX_DEPTH} deep (parentheses, '!', \
                     '&&' and '||'); a filter program holds at most {FILTER_MAX_OPS} operations"
                ),
            ));
        }
        Ok(())
    }

    fn eat(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Some(Token::Sym(s)) if *s == sym) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// `type, type:` if the filter starts so (a name list, then ':').
    fn types(&mut self) -> Vec<(String, usize)> {
        let mut i = 0;
        let mut names = Vec::new();
        loop {
            match self.tokens.get(i) {
                Some((Token::Ident(name), column)) => names.push((name.clone(), *column)),
                _ => return Vec::new(),
            }
            match self.tokens.get(i + 1) {
                Some((Token::Sym(","), _)) => i += 2,
                Some((Token::Sym(":"), _)) => {
                    self.at = i + 2;
                    return names;
                }
                _ => return Vec::new(),
            }
        }
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let outer = self.depth;
        let mut left = self.and()?;
        // Each `||` puts the chain so far one level further down.
        while self.eat("||") {
            self.deeper()?;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        self.depth = outer;
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let outer = self.depth;
        let mut left = self.unary()?;
        while self.eat("&&") {
            self.deeper()?;
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        self.depth = outer;
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        let outer = self.depth;
        let expr = if self.eat("!") {
            self.deeper()?;
            Expr::Not(Box::new(self.unary()?))
        } else if self.eat("(") {
            self.deeper()?;
            let inner = self.or()?;
            if !self.eat(")") {
                return Err(self.expected("')'"));
            }
            inner
        } else {
            Expr::Test(self.test()?)
        };
        self.depth = outer;
        Ok(expr)
    }

    // Over 80 lines: one production of the grammar (field, mask, operator
    // and its operands), read as the grammar is written.
    fn test(&mut self) -> Result<Test, FilterError> {
        let column = self.column();
        let Some(Token::Ident(field)) = self.peek().cloned() else {
            return Err(self.expected("a field name (pc, addr, val, …)"));
        };
        self.at += 1;
        let mask = if self.eat("&") {
            Some(self.number()?)
        } else {
            None
        };
        let op = match self.peek().cloned() {
            Some(Token::Ident(word)) if word == "in" => {
                self.at += 1;
                let lo = self.number()?;
                let inclusive = if self.eat("..=") {
                    true
                } else if self.eat("..") {
                    false
                } else {
                    return Err(self.expected("'..' or '..=' (a range: lo..end)"));
                };
                let range_column = self.column();
                let hi = self.number()?;
                let hi_inclusive = if inclusive {
                    hi
                } else if hi > lo {
                    hi - 1
                } else {
                    return Err(FilterError::at(
                        range_column,
                        format!("the range {lo:#x}..{hi:#x} is empty"),
                    ));
                };
                if hi_inclusive < lo {
                    return Err(FilterError::at(
                        range_column,
                        format!("the range {lo:#x}..={hi:#x} is empty"),
                    ));
                }
                Op::In { lo, hi_inclusive }
            }
            Some(Token::Ident(word)) if word == "contains" => {
                self.at += 1;
                Op::Contains(self.string()?)
            }
            Some(Token::Sym(sym)) if cmp_code(sym).is_some() => {
                self.at += 1;
                let code = cmp_code(sym).unwrap_or_default();
                match self.peek().cloned() {
                    Some(Token::Str(text)) if sym == "==" || sym == "!=" => {
                        self.at += 1;
                        Op::TextEq(text, sym == "==")
                    }
                    Some(Token::Str(_)) => {
                        return Err(FilterError::at(
                            self.column(),
                            "text compares with ==, != or contains only",
                        ))
                    }
                    Some(Token::Number(n)) => {
                        self.at += 1;
                        Op::Cmp(code, Value::Number(n))
                    }
                    Some(Token::Ident(name)) => {
                        let column = self.column();
                        self.at += 1;
                        Op::Cmp(code, Value::Name(name, column))
                    }
                    _ => return Err(self.expected("a number, a name or a \"string\"")),
                }
            }
            _ => {
                return Err(self.expected(
                    "a comparison (==, !=, <, <=, >, >=, in lo..end, contains \"text\")",
                ))
            }
        };
        Ok(Test {
            field,
            column,
            mask,
            op,
        })
    }

    fn number(&mut self) -> Result<u64, FilterError> {
        match self.peek() {
            Some(Token::Number(n)) => {
                let n = *n;
                self.at += 1;
                Ok(n)
            }
            _ => Err(self.expected("a number")),
        }
    }

    fn string(&mut self) -> Result<String, FilterError> {
        match self.peek().cloned() {
            Some(Token::Str(s)) => {
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.expected("a \"string\"")),
        }
    }

    fn expected(&self, what: &str) -> FilterError {
        let found = self.peek().map_or_else(|| "the end".to_string(), describe);
        FilterError::at(self.column(), format!("expected {what}, found {found}"))
    }
}

fn describe(token: &Token) -> String {
    match token {
        Token::Ident(name) => format!("'{name}'"),
        Token::Number(n) => format!("'{n}'"),
        Token::Str(s) => format!("\"{s}\""),
        Token::Sym(sym) => format!("'{sym}'"),
    }
}

fn cmp_code(sym: &str) -> Option<u8> {
    use styx_common::filter::*;
    Some(match sym {
        "==" => CMP_EQ,
        "!=" => CMP_NE,
        "<" => CMP_LT,
        "<=" => CMP_LE,
        ">" => CMP_GT,
        ">=" => CMP_GE,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(text).expect_err(text).to_string()
    }

    #[test]
    fn types_and_precedence() {
        let parsed =
            parse("mem_write, mem_read: addr == 0xd020 || val & 0x80 != 0 && !(pc < 10)").unwrap();
        assert_eq!(
            parsed.types,
            vec![("mem_write".to_string(), 1), ("mem_read".to_string(), 12)]
        );
        let Expr::Or(left, right) = parsed.expr else {
            panic!("|| is loosest: {:?}", parsed.expr)
        };
        assert!(matches!(*left, Expr::Test(Test { ref field, .. }) if field == "addr"));
        let Expr::And(mask, not) = *right else {
            panic!("&& under ||")
        };
        assert!(matches!(
            *mask,
            Expr::Test(Test {
                mask: Some(0x80),
                ..
            })
        ));
        assert!(matches!(*not, Expr::Not(_)));
    }

    #[test]
    fn ranges_numbers_and_strings() {
        let Expr::Test(t) = parse("addr in 0x8000..0x9000").unwrap().expr else {
            panic!()
        };
        assert_eq!(
            t.op,
            Op::In {
                lo: 0x8000,
                hi_inclusive: 0x8fff
            }
        );
        let Expr::Test(t) = parse("val in 0b1_0..=3").unwrap().expr else {
            panic!()
        };
        assert_eq!(
            t.op,
            Op::In {
                lo: 2,
                hi_inclusive: 3
            }
        );
        let Expr::Test(t) = parse(r#"text contains "reset""#).unwrap().expr else {
            panic!()
        };
        assert_eq!(t.op, Op::Contains("reset".into()));
        let Expr::Test(t) = parse("kind == call").unwrap().expr else {
            panic!()
        };
        assert_eq!(t.op, Op::Cmp(0, Value::Name("call".into(), 9)));
    }

    #[test]
    fn errors_point_at_the_token() {
        assert_eq!(error("addr = 3"), "at column 6: unexpected '='");
        assert_eq!(
            error("addr == "),
            "at column 9: expected a number, a name or a \"string\", found the end"
        );
        assert_eq!(
            error("addr == 3 pc"),
            "at column 11: expected '&&', '||' or the end, found 'pc'"
        );
        assert_eq!(
            error("addr == 0xzz"),
            "at column 9: '0xzz' is not a number (decimal, 0x hex or 0b binary)"
        );
        assert_eq!(
            error("addr == 99999999999999999999"),
            "at column 9: '99999999999999999999' does not fit 64 bits"
        );
        assert_eq!(
            error("addr in 5..5"),
            "at column 12: the range 0x5..0x5 is empty"
        );
        assert_eq!(
            error("(pc == 1"),
            "at column 9: expected ')', found the end"
        );
        assert_eq!(
            error("text < \"a\""),
            "at column 8: text compares with ==, != or contains only"
        );
        assert_eq!(error("\"x"), "at column 1: a string with no closing '\"'");
    }

    /// 20,000 `!` or `(` once overflowed the stack (the process aborted);
    /// now they are refused where they pass the bound, and the deepest
    /// expression a program can hold still parses.
    #[test]
    fn nesting_is_bounded_with_a_clear_error() {
        let deep = 20_000;
        let too_deep = |text: &str, column: usize| {
            let e = parse(text).expect_err("too deep");
            assert_eq!(e.column, column, "{e}");
            assert!(e.message.contains("nests more than 64 deep"), "{e}");
        };
        too_deep(&format!("{}pc == 1", "!".repeat(deep)), MAX_DEPTH + 1);
        too_deep(&"(".repeat(deep), MAX_DEPTH + 1);
        let chain = vec!["pc == 1"; deep].join(" || ");
        too_deep(&chain, MAX_DEPTH * 11 + 9);
        let mixed = vec!["!(pc == 1"; deep].join(" && ");
        assert!(parse(&mixed).is_err());
        let deepest = format!("{}pc == 1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(parse(&deepest).is_ok());
        let longest = vec!["pc == 1"; MAX_DEPTH + 1].join(" && ");
        assert!(parse(&longest).is_ok());
    }
}
