//! Integers of a report file too wide for 64 bits, kept as written.
//!
//! `serde_json::Value` (without its `arbitrary_precision` feature, which would change
//! every number of every crate built with this one) holds an integer past the range of
//! `i64`/`u64` as the nearest `f64`: 2^64 and 2^64 + 1 read the same, and print as
//! `1.8446744073709552e19`. A report written by Python (`json.dump`) or by hand may hold
//! such integers, so [`wide_integers`] finds them in the file's text, by JSON pointer, and
//! [`text_at`] writes a value with them put back: what [`crate::diff`] compares and shows.

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// Integers in `text` (a JSON text that parsed) that fit neither `i64` nor `u64`, as
/// written, by JSON pointer (`/results/0/facts/bytes_limit`). As when the text is read
/// into a `Value`, the last of a key given twice counts.
pub(crate) fn wide_integers(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // Such an integer has at least 19 digits in a row; most reports have none.
    let mut run = 0;
    let long = text.bytes().any(|b| {
        run = if b.is_ascii_digit() { run + 1 } else { 0 };
        run >= 19
    });
    if long {
        let mut s = Scan {
            b: text.as_bytes(),
            at: 0,
        };
        // The text parsed as JSON already; a scan that stops early leaves the rest out.
        let _ = s.value(&mut String::new(), &mut out);
    }
    out
}

/// `v`, the value at `pointer` of a report, as compact JSON text with the wide integers
/// under that pointer written as the file has them.
pub(crate) fn text_at(v: &Json, pointer: &str, wide: &BTreeMap<String, String>) -> String {
    let under = format!("{pointer}/");
    let any = wide.contains_key(pointer)
        || wide
            .range(under.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&under));
    if !any {
        return v.to_string();
    }
    let mut out = String::new();
    write(v, &mut pointer.to_string(), wide, &mut out);
    out
}

fn write(v: &Json, pointer: &mut String, wide: &BTreeMap<String, String>, out: &mut String) {
    let len = pointer.len();
    match v {
        Json::Number(_) => match wide.get(pointer.as_str()) {
            Some(text) => out.push_str(text),
            None => out.push_str(&v.to_string()),
        },
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pointer.push_str(&format!("/{i}"));
                write(item, pointer, wide, out);
                pointer.truncate(len);
            }
            out.push(']');
        }
        Json::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Json::String(k.clone()).to_string());
                out.push(':');
                pointer.push('/');
                pointer.push_str(&token(k));
                write(item, pointer, wide, out);
                pointer.truncate(len);
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// A key as a JSON-pointer token (RFC 6901: `~` is `~0`, `/` is `~1`).
pub(crate) fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A scan of JSON text known to be valid: only as strict as telling values apart needs.
struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while self.b.get(self.at).is_some_and(|c| b" \t\r\n".contains(c)) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.at).copied()
    }

    /// The value at the cursor, at `pointer`: its wide integers recorded in `out` (after
    /// dropping what an earlier value at the same pointer, a repeated key, left there).
    fn value(&mut self, pointer: &mut String, out: &mut BTreeMap<String, String>) -> Option<()> {
        let under = format!("{pointer}/");
        out.remove(pointer.as_str());
        let stale: Vec<String> = out
            .range(under.clone()..)
            .take_while(|(k, _)| k.starts_with(&under))
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            out.remove(&k);
        }
        let len = pointer.len();
        match self.peek()? {
            b'{' => {
                self.at += 1;
                if self.peek()? == b'}' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    let start = self.at;
                    self.string()?;
                    let key: String = serde_json::from_slice(&self.b[start..self.at]).ok()?;
                    self.ws();
                    self.at += 1; // ':'
                    pointer.push('/');
                    pointer.push_str(&token(&key));
                    self.value(pointer, out)?;
                    pointer.truncate(len);
                    match self.peek()? {
                        b',' => self.at += 1,
                        _ => {
                            self.at += 1; // '}'
                            return Some(());
                        }
                    }
                }
            }
            b'[' => {
                self.at += 1;
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(());
                }
                let mut i = 0usize;
                loop {
                    pointer.push_str(&format!("/{i}"));
                    self.value(pointer, out)?;
                    pointer.truncate(len);
                    i += 1;
                    match self.peek()? {
                        b',' => self.at += 1,
                        _ => {
                            self.at += 1; // ']'
                            return Some(());
                        }
                    }
                }
            }
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                while self
                    .b
                    .get(self.at)
                    .is_some_and(|c| c.is_ascii_digit() || b"+-.eE".contains(c))
                {
                    self.at += 1;
                }
                let text = std::str::from_utf8(&self.b[start..self.at]).ok()?;
                let integer = !text.contains(['.', 'e', 'E']);
                if integer && text.parse::<i64>().is_err() && text.parse::<u64>().is_err() {
                    out.insert(pointer.clone(), text.to_string());
                }
                Some(())
            }
            _ => {
                // true, false, null
                while self.b.get(self.at).is_some_and(u8::is_ascii_alphabetic) {
                    self.at += 1;
                }
                Some(())
            }
        }
    }

    /// Moves past the string at the cursor (its quotes and escapes).
    fn string(&mut self) -> Option<()> {
        self.at += 1; // '"'
        loop {
            match *self.b.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                _ => self.at += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_wide_integers_by_pointer_and_the_last_of_a_repeated_key() {
        let text = r#" { "a" : [1, 18446744073709551616, {"x/y~": -9223372036854775809}],
            "b": 18446744073709551615, "s": "12345678901234567890123", "f": 1e30,
            "d": 99999999999999999999, "d": 5, "e\u0041": 123456789012345678901 } "#;
        let w = wide_integers(text);
        let want: BTreeMap<String, String> = [
            ("/a/1", "18446744073709551616"),
            ("/a/2/x~1y~0", "-9223372036854775809"),
            ("/eA", "123456789012345678901"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(w, want);
        let v: Json = serde_json::from_str(text).unwrap();
        assert_eq!(
            text_at(&v["a"], "/a", &w),
            r#"[1,18446744073709551616,{"x/y~":-9223372036854775809}]"#
        );
        assert_eq!(text_at(&v["b"], "/b", &w), "18446744073709551615");
        assert_eq!(text_at(&v["d"], "/d", &w), "5");
    }
}
