//! Date parsing for `UNIXTIMESTAMP(s)` and `UNIXTIMESTAMP(s, pattern)`, as Bullet does it: the
//! text is read as a local date-time in UTC and converted to whole seconds since the epoch.
//!
//! - One argument: JDBC timestamp text, what Java's `Timestamp.valueOf` reads:
//!   `yyyy-[m]m-[d]d [h]h:mm:ss[.f...]` (1 to 9 fraction digits, surrounding whitespace ignored).
//! - With a pattern: a subset of Java's `DateTimeFormatter` pattern letters, which Bullet uses:
//!
//!   | letters | meaning |
//!   |---|---|
//!   | `yyyy`, `uuuu` (3+ letters) | year, at least that many digits (exactly that many when a number follows directly, e.g. `yyyyMMdd`) |
//!   | `yy`, `uu` | two-digit year, 2000–2099 |
//!   | `y`, `u` | year, 1 to 9 digits |
//!   | `M`/`MM`, `d`/`dd`, `H`/`HH`, `h`/`hh`, `m`/`mm`, `s`/`ss` | month, day, hour 0–23, hour 1–12, minute, second: one letter reads 1 or 2 digits, two letters exactly 2 |
//!   | `MMM`, `MMMM` | month name, abbreviated (`Jan`) or full (`January`), any case |
//!   | `S`…`SSSSSSSSS` | fraction of a second, exactly that many digits |
//!   | `a` | `AM` / `PM`, any case (with `h`) |
//!   | `EEE`, `EEEE` | day-of-week name, read and not checked against the date |
//!   | `'text'`, `''` | literal text, a single quote |
//!   | any other non-letter | itself |
//!
//!   Other letters (time zones, week-based fields...) make the pattern unsupported: NULL. Fields
//!   the pattern lacks default to January, the 1st, midnight (Java would refuse a pattern without
//!   a time; being lenient costs nothing); a pattern without a year is NULL. The whole text must
//!   be consumed. A numeric first argument is read as the digits of its LONG value (Bullet's rule,
//!   so `UNIXTIMESTAMP(20240131, 'yyyyMMdd')` works).
//!
//! Invalid dates (`2023-02-30`) and anything unparsable are NULL.

use chrono::NaiveDate;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const DAYS: [&str; 7] =
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// Whole seconds since the epoch of a UTC date-time, or `None` when the date does not exist.
fn epoch_seconds(fields: &Fields) -> Option<i64> {
    let hour = match (fields.hour12, fields.pm) {
        (Some(h), pm) if fields.hour.is_none() => {
            if !(1..=12).contains(&h) {
                return None;
            }
            h % 12 + if pm == Some(true) { 12 } else { 0 }
        }
        _ => fields.hour.unwrap_or(0),
    };
    let date =
        NaiveDate::from_ymd_opt(fields.year?, fields.month.unwrap_or(1), fields.day.unwrap_or(1))?;
    let dt = date.and_hms_nano_opt(
        hour,
        fields.minute.unwrap_or(0),
        fields.second.unwrap_or(0),
        fields.nanos,
    )?;
    Some(dt.and_utc().timestamp())
}

#[derive(Default)]
struct Fields {
    year: Option<i32>,
    month: Option<u32>,
    day: Option<u32>,
    hour: Option<u32>,
    hour12: Option<u32>,
    pm: Option<bool>,
    minute: Option<u32>,
    second: Option<u32>,
    nanos: u32,
}

/// A cursor over the input text.
struct Input<'a> {
    rest: &'a str,
}

impl Input<'_> {
    /// Reads between `min` and `max` ASCII digits.
    fn digits(&mut self, min: usize, max: usize) -> Option<u64> {
        let n = self.rest.bytes().take(max).take_while(u8::is_ascii_digit).count();
        if n < min {
            return None;
        }
        let (d, rest) = self.rest.split_at(n);
        self.rest = rest;
        d.parse().ok()
    }

    fn literal(&mut self, s: &str) -> Option<()> {
        self.rest = self.rest.strip_prefix(s)?;
        Some(())
    }

    /// Reads one of `names` (or its first three letters when `short`), any case; its index.
    fn name(&mut self, names: &[&str], short: bool) -> Option<usize> {
        names.iter().position(|full| {
            let n = if short { &full[..3] } else { full };
            let ok = self.rest.len() >= n.len()
                && self.rest.is_char_boundary(n.len())
                && self.rest[..n.len()].eq_ignore_ascii_case(n);
            if ok {
                self.rest = &self.rest[n.len()..];
            }
            ok
        })
    }
}

/// `Timestamp.valueOf` text to epoch seconds.
pub fn parse_jdbc_timestamp(s: &str) -> Option<i64> {
    let mut input = Input { rest: s.trim() };
    let mut f = Fields { year: Some(input.digits(4, 4)? as i32), ..Fields::default() };
    input.literal("-")?;
    f.month = Some(input.digits(1, 2)? as u32);
    input.literal("-")?;
    f.day = Some(input.digits(1, 2)? as u32);
    input.literal(" ")?;
    f.hour = Some(input.digits(1, 2)? as u32);
    input.literal(":")?;
    f.minute = Some(input.digits(2, 2)? as u32);
    input.literal(":")?;
    f.second = Some(input.digits(2, 2)? as u32);
    if input.literal(".").is_some() {
        let start = input.rest;
        input.digits(1, 9)?;
        let digits = &start[..start.len() - input.rest.len()];
        f.nanos = fraction(digits)?;
    }
    if !input.rest.is_empty() {
        return None;
    }
    epoch_seconds(&f)
}

/// Fraction digits as nanoseconds.
fn fraction(digits: &str) -> Option<u32> {
    let v: u32 = digits.parse().ok()?;
    Some(v * 10u32.pow(9 - digits.len() as u32))
}

/// One element of a pattern.
#[derive(Debug, PartialEq)]
enum Token {
    Field(char, usize),
    Literal(String),
}

fn tokenize(pattern: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_alphabetic() {
            let mut n = 1;
            while chars.peek() == Some(&c) {
                chars.next();
                n += 1;
            }
            out.push(Token::Field(c, n));
        } else if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
                out.push(Token::Literal("'".into()));
                continue;
            }
            let mut text = String::new();
            loop {
                match chars.next()? {
                    '\'' if chars.peek() == Some(&'\'') => {
                        chars.next();
                        text.push('\'');
                    }
                    '\'' => break,
                    other => text.push(other),
                }
            }
            out.push(Token::Literal(text));
        } else if c.is_alphabetic() {
            return None;
        } else {
            out.push(Token::Literal(c.to_string()));
        }
    }
    Some(out)
}

fn is_numeric_field(t: Option<&Token>) -> bool {
    match t {
        Some(Token::Field('M', n)) => *n <= 2,
        Some(Token::Field(c, _)) => "yudHhmsS".contains(*c),
        _ => false,
    }
}

/// Text read with a `DateTimeFormatter`-style pattern (see the module doc) to epoch seconds.
pub fn parse_with_pattern(s: &str, pattern: &str) -> Option<i64> {
    let tokens = tokenize(pattern)?;
    let mut input = Input { rest: s };
    let mut f = Fields::default();
    for (i, token) in tokens.iter().enumerate() {
        let two = |input: &mut Input, n: usize| match n {
            1 => input.digits(1, 2).map(|v| v as u32),
            2 => input.digits(2, 2).map(|v| v as u32),
            _ => None,
        };
        match *token {
            Token::Literal(ref text) => input.literal(text)?,
            Token::Field('y' | 'u', 2) => f.year = Some(2000 + input.digits(2, 2)? as i32),
            Token::Field('y' | 'u', n) => {
                let v = if n >= 3 && is_numeric_field(tokens.get(i + 1)) {
                    input.digits(n, n)?
                } else {
                    input.digits(n, 9.max(n))?
                };
                f.year = Some(i32::try_from(v).ok()?);
            }
            Token::Field('M', n) if n >= 3 => {
                f.month = Some(input.name(&MONTHS, n == 3)? as u32 + 1);
            }
            Token::Field('M', n) => f.month = Some(two(&mut input, n)?),
            Token::Field('d', n) => f.day = Some(two(&mut input, n)?),
            Token::Field('H', n) => f.hour = Some(two(&mut input, n)?),
            Token::Field('h', n) => f.hour12 = Some(two(&mut input, n)?),
            Token::Field('m', n) => f.minute = Some(two(&mut input, n)?),
            Token::Field('s', n) => f.second = Some(two(&mut input, n)?),
            Token::Field('S', n) if n <= 9 => {
                let start = input.rest;
                input.digits(n, n)?;
                f.nanos = fraction(&start[..n])?;
            }
            Token::Field('a', 1) => {
                f.pm = Some(input.name(&["am", "pm"], false)? == 1);
            }
            Token::Field('E', n) if n >= 3 => {
                input.name(&DAYS, n == 3)?;
            }
            Token::Field(..) => return None,
        }
    }
    if !input.rest.is_empty() {
        return None;
    }
    epoch_seconds(&f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jdbc_timestamps() {
        assert_eq!(parse_jdbc_timestamp("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_jdbc_timestamp("2009-02-13 23:31:30"), Some(1_234_567_890));
        assert_eq!(parse_jdbc_timestamp(" 2009-2-3 3:31:30.999 "), Some(1_233_631_890));
        assert_eq!(parse_jdbc_timestamp("1969-12-31 23:59:59.5"), Some(-1));
        assert_eq!(parse_jdbc_timestamp("2023-02-30 00:00:00"), None);
        assert_eq!(parse_jdbc_timestamp("2023-01-01"), None);
        assert_eq!(parse_jdbc_timestamp("2023-01-01 00:00:00x"), None);
        assert_eq!(parse_jdbc_timestamp("2023-01-01 24:00:00"), None);
    }

    #[test]
    fn patterns() {
        let p = parse_with_pattern;
        assert_eq!(p("2009-02-13 23:31:30", "yyyy-MM-dd HH:mm:ss"), Some(1_234_567_890));
        assert_eq!(p("20090213", "yyyyMMdd"), Some(1_234_483_200));
        assert_eq!(p("2009021323", "yyyyMMddHH"), Some(1_234_566_000));
        assert_eq!(p("13/Feb/09 11:31:30 PM", "dd/MMM/yy hh:mm:ss a"), Some(1_234_567_890));
        assert_eq!(p("Friday, February 13, 2009", "EEEE, MMMM d, yyyy"), Some(1_234_483_200));
        assert_eq!(p("2009-02-13T23:31:30.250", "yyyy-MM-dd'T'HH:mm:ss.SSS"), Some(1_234_567_890));
        assert_eq!(p("it's 2009", "'it''s' yyyy"), Some(1_230_768_000));
        assert_eq!(p("12:00 AM 2009", "hh:mm a yyyy"), Some(1_230_768_000));
        assert_eq!(p("2009-2-3", "yyyy-M-d"), Some(1_233_619_200));
        assert_eq!(p("2009-2-3", "yyyy-MM-dd"), None, "MM needs two digits");
        assert_eq!(p("2009-02-13", "yyyy-MM-dd z"), None);
        assert_eq!(p("02-13", "MM-dd"), None, "no year");
        assert_eq!(p("2009-02-13 extra", "yyyy-MM-dd"), None);
        assert_eq!(p("2009-02-29", "yyyy-MM-dd"), None);
        assert_eq!(p("2009", "'unterminated"), None);
    }
}
