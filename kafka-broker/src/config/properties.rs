//! Java `.properties` text as `java.util.Properties.load` reads it: `key=value`, `key:value`
//! or `key value`; `#` and `!` comment lines; a line ending in an odd number of backslashes
//! continues on the next one (whose leading blanks are dropped); escapes `\t`, `\n`, `\r`,
//! `\f`, `\uXXXX` and `\<char>` for the character itself. A key given twice keeps its last
//! value.

use std::collections::BTreeMap;

/// A `.properties` text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropertiesError {
    /// A `\u` escape without four hexadecimal digits (Java's "Malformed \uxxxx encoding").
    #[error("line {line}: malformed \\uxxxx escape")]
    MalformedUnicodeEscape {
        /// The (1-based) line the logical line starts on.
        line: usize,
    },
    /// A `\uXXXX` escape naming a lone surrogate half that no other escape completes.
    #[error("line {line}: \\u{code:04x} is a lone surrogate")]
    LoneSurrogate {
        /// The (1-based) line the logical line starts on.
        line: usize,
        /// The escaped code unit.
        code: u32,
    },
}

/// One `key = value` entry and the line it started on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The unescaped key.
    pub key: String,
    /// The unescaped value.
    pub value: String,
    /// The (1-based) line the entry starts on.
    pub line: usize,
}

/// Parses `text`; returns every entry in file order (duplicates included).
pub fn parse_entries(text: &str) -> Result<Vec<Entry>, PropertiesError> {
    let mut entries = Vec::new();
    let mut lines = split_lines(text).into_iter().enumerate().peekable();
    while let Some((index, first)) = lines.next() {
        let line = index + 1;
        let trimmed = first.trim_start_matches(is_blank);
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes continues.
        let mut logical = String::new();
        let mut part = trimmed;
        loop {
            if ends_with_odd_backslashes(part) {
                logical.push_str(&part[..part.len() - 1]);
                match lines.next() {
                    Some((_, next)) => part = next.trim_start_matches(is_blank),
                    None => break,
                }
            } else {
                logical.push_str(part);
                break;
            }
        }
        let (raw_key, raw_value) = split_key_value(&logical);
        entries.push(Entry {
            key: unescape(raw_key, line)?,
            value: unescape(raw_value, line)?,
            line,
        });
    }
    Ok(entries)
}

/// Parses `text` into a map; a key given twice keeps its last value.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, PropertiesError> {
    Ok(parse_entries(text)?
        .into_iter()
        .map(|e| (e.key, e.value))
        .collect())
}

/// Java's blanks between and around keys: space, tab, form feed.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Natural lines, ended by `\n`, `\r` or `\r\n`.
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            Some(i) => {
                out.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                out.push(rest);
                rest = "";
            }
        }
    }
    out
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

/// Splits a logical line at the first unescaped `=`, `:` or blank; blanks around the
/// separator and one `=` or `:` after blanks are dropped.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                return (&line[..i], line[i + 1..].trim_start_matches(is_blank));
            }
            c if is_blank(c) => {
                key_end = i;
                break;
            }
            _ => {}
        }
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start_matches(is_blank);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches(is_blank);
    }
    (key, rest)
}

fn unescape(raw: &str, line: usize) -> Result<String, PropertiesError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    let mut pending_high: Option<u32> = None;
    while let Some(c) = chars.next() {
        if c != '\\' {
            if let Some(code) = pending_high.take() {
                return Err(PropertiesError::LoneSurrogate { line, code });
            }
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            // A lone trailing backslash (at the end of the text) stands for nothing.
            break;
        };
        if e == 'u' {
            let mut code = 0u32;
            for _ in 0..4 {
                let digit = chars
                    .next()
                    .and_then(|d| d.to_digit(16))
                    .ok_or(PropertiesError::MalformedUnicodeEscape { line })?;
                code = code * 16 + digit;
            }
            match (pending_high.take(), code) {
                (None, 0xD800..=0xDBFF) => pending_high = Some(code),
                (Some(high), 0xDC00..=0xDFFF) => {
                    let c = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00);
                    out.extend(char::from_u32(c));
                }
                (Some(high), _) => return Err(PropertiesError::LoneSurrogate { line, code: high }),
                (None, _) => match char::from_u32(code) {
                    Some(c) => out.push(c),
                    None => return Err(PropertiesError::LoneSurrogate { line, code }),
                },
            }
            continue;
        }
        if let Some(code) = pending_high.take() {
            return Err(PropertiesError::LoneSurrogate { line, code });
        }
        out.push(match e {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\u{c}',
            other => other,
        });
    }
    if let Some(code) = pending_high {
        return Err(PropertiesError::LoneSurrogate { line, code });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> (String, String) {
        let m = parse(text).expect("parses");
        assert_eq!(m.len(), 1, "{m:?}");
        m.into_iter().next().expect("one entry")
    }

    #[test]
    fn separators_are_equals_colon_or_blanks() {
        assert_eq!(one("a=b"), ("a".into(), "b".into()));
        assert_eq!(one("a = b"), ("a".into(), "b".into()));
        assert_eq!(one("a:b"), ("a".into(), "b".into()));
        assert_eq!(one("a b"), ("a".into(), "b".into()));
        assert_eq!(one("  a \t = \t b c  "), ("a".into(), "b c  ".into()));
        assert_eq!(one("a"), ("a".into(), "".into()));
        assert_eq!(one("a=b=c"), ("a".into(), "b=c".into()));
        assert_eq!(one("a  :=b"), ("a".into(), "=b".into()));
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let m = parse("# one\n  ! two\n\n\t\nx=1\n#y=2\n").expect("parses");
        assert_eq!(
            m.into_iter().collect::<Vec<_>>(),
            vec![("x".into(), "1".into())]
        );
    }

    #[test]
    fn continuation_lines_join_without_their_leading_blanks() {
        assert_eq!(
            one("listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT://b:2"),
            ("listeners".into(), "PLAINTEXT://a:1,PLAINTEXT://b:2".into())
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        let m = parse("a=x\\\\\nb=y").expect("parses");
        assert_eq!(m["a"], "x\\");
        assert_eq!(m["b"], "y");
        // CR LF and lone CR end lines too.
        let m = parse("a=1\r\nb=2\rc=\\\r\n 3").expect("parses");
        assert_eq!(
            (m["a"].as_str(), m["b"].as_str(), m["c"].as_str()),
            ("1", "2", "3")
        );
    }

    #[test]
    fn escapes_in_keys_and_values() {
        assert_eq!(one("a\\=b=c"), ("a=b".into(), "c".into()));
        assert_eq!(one("a\\ b c"), ("a b".into(), "c".into()));
        assert_eq!(
            one("k=\\t\\n\\r\\f\\\\\\#\\q"),
            ("k".into(), "\t\n\r\u{c}\\#q".into())
        );
        assert_eq!(one("k=caf\\u00e9"), ("k".into(), "café".into()));
        assert_eq!(one("k=\\ud83d\\ude00"), ("k".into(), "😀".into()));
        assert_eq!(
            parse("k=\\u12"),
            Err(PropertiesError::MalformedUnicodeEscape { line: 1 })
        );
        assert!(matches!(
            parse("\n\nk=\\ud83dx"),
            Err(PropertiesError::LoneSurrogate { line: 3, .. })
        ));
    }

    #[test]
    fn the_last_of_duplicate_keys_wins_and_lines_are_recorded() {
        let e = parse_entries("a=1\n\na=2\n").expect("parses");
        assert_eq!(e.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(parse("a=1\na=2").expect("parses")["a"], "2");
    }
}
