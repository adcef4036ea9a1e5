//! What the command line adds to an `--input` literal's error (`rpjrt_npy::literal`): where
//! a malformed literal goes wrong (`[1,,2]`: "an empty element at character 4"), and a hint
//! a command-line user can follow where the core's message speaks to Python users
//! (`cast=True`, which the command line has no equivalent of).

/// The deepest list the locator follows (rpjrt's highest rank is 64; deeper literals get
/// the core's own message, and the locator never recurses without bound).
const MAX_DEPTH: usize = 64;

/// The message of `e`, an error parsing the literal `text`, for the command line: the
/// core's message, with the place a malformed literal goes wrong and without hints that
/// only Python can follow.
pub fn explain(text: &str, e: rpjrt::Error) -> String {
    let message = crate::common::bare(e);
    let structural = message.starts_with("malformed literal")
        || message.starts_with("unbalanced brackets")
        || message.starts_with("ragged literal")
        || message.ends_with("is not a number");
    if structural {
        match scan(text, message.starts_with("ragged literal")) {
            Err(why) => return format!("malformed literal{}: {why}", shown(text)),
            Ok(atoms) => {
                // A bad number inside a list: say which element it is.
                if text.trim_start().starts_with('[') {
                    if let Some((at, _)) = atoms
                        .iter()
                        .find(|(_, a)| message == format!("{a:?} is not a number"))
                    {
                        return format!(
                            "{message} (the element at character {at} of the literal{})",
                            shown(text)
                        );
                    }
                }
            }
        }
    }
    without_python_hint(&message)
}

/// The literal, quoted after a space, for a message; nothing when it is too long to help.
fn shown(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() <= 80 {
        format!(" {t:?}")
    } else {
        String::new()
    }
}

/// The command line's own remedy, for a message that gave Python's (`cast=True`).
const STORED_AS_WRITTEN: &str =
    "the command line stores values as written: it does not wrap, round or cast them";

/// `message` with a parenthetical about Python's `cast=True` replaced by what a
/// command-line user can do (the command line has no cast).
pub fn without_python_hint(message: &str) -> String {
    let Some(at) = message.find("from Python, cast=True") else {
        return message.to_string();
    };
    let before = &message[..at];
    let after_start = &message[at..];
    let end = after_start.find(')').map_or(message.len(), |i| at + i);
    let (head, tail) = if let Some(h) = before.strip_suffix("; ") {
        // `(range -128..127; from Python, ...)`: keep the parenthesis, drop the clause.
        (h.to_string(), &message[end..])
    } else if let Some(h) = before.strip_suffix('(') {
        // `... first (from Python, cast=True does)`: drop the whole parenthesis.
        (
            h.trim_end().to_string(),
            message.get(end + 1..).unwrap_or(""),
        )
    } else {
        (before.trim_end().to_string(), &message[end..])
    };
    let head = head
        .strip_suffix("; convert them first")
        .unwrap_or(&head)
        .to_string();
    let remedy = if message.contains("does not fit in") {
        "give a value in the type's range"
    } else if message.contains("without rounding") {
        "write whole numbers"
    } else if message.contains("imaginary part") {
        "give real values"
    } else if message.contains("powers of two") {
        "give positive powers of two"
    } else if message.contains("overflows") || message.contains("range of float64") {
        "give a value within the type's range"
    } else {
        "give a value the type holds"
    };
    format!("{head}{tail}; {remedy} ({STORED_AS_WRITTEN})")
}

/// The literal's scalar tokens with their places (1-based characters of the trimmed
/// text), or where its structure goes wrong: the grammar `rpjrt_npy::literal` reads
/// (`VALUE[:TYPE]`, a value a token or `[VALUE, ...]`, a trailing comma allowed).
/// With `ragged`, also where the lists stop having one shape (the core's message does not
/// say).
fn scan(text: &str, ragged: bool) -> Result<Vec<(usize, String)>, String> {
    let t = text.trim();
    let (body, suffix) = match t.rsplit_once(':') {
        Some((b, s)) if !s.contains(']') => (b, Some(s)),
        _ => (t, None),
    };
    let chars: Vec<char> = body.chars().collect();
    if body.trim().is_empty() {
        return Err(match suffix {
            Some(s) => format!("there is no value before \":{s}\" (as in 1:{s} or [1,2]:{s})"),
            None => "it is empty: write a value such as 1.5, true or [1,2,3]".to_string(),
        });
    }
    let mut p = Scanner {
        chars: &chars,
        i: 0,
        atoms: Vec::new(),
        ragged,
        counts: Vec::new(),
        leaves: Vec::new(),
    };
    p.value(0)?;
    p.skip_ws();
    if let Some(&c) = chars.get(p.i) {
        let at = p.i + 1;
        return Err(match c {
            ']' => format!("unbalanced brackets: the \"]\" at character {at} closes no \"[\""),
            ',' => format!(
                "the \",\" at character {at} is outside brackets: write a list in brackets, \
                 as [{}]",
                body.trim()
            ),
            _ => format!("{c:?} at character {at} follows a complete value"),
        });
    }
    Ok(p.atoms)
}

struct Scanner<'a> {
    chars: &'a [char],
    i: usize,
    atoms: Vec<(usize, String)>,
    /// Whether to check that the literal is rectangular.
    ragged: bool,
    /// Per depth: the length of the lists there (the first one's).
    counts: Vec<Option<usize>>,
    /// Per depth: whether single values are there.
    leaves: Vec<bool>,
}

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self.chars.get(self.i).is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("it is nested deeper than {MAX_DEPTH} levels"));
        }
        self.skip_ws();
        let at = self.i + 1;
        match self.chars.get(self.i) {
            None => Err(format!("a value is missing at character {at} (its end)")),
            Some('[') => self.list(depth),
            Some(']') => Err(format!(
                "unbalanced brackets: a value is missing at character {at}, where a \"]\" \
                 closes no \"[\""
            )),
            Some(',') => Err(format!(
                "an empty element at character {at} (a \",\" with no value before it)"
            )),
            Some(_) => self.atom(depth),
        }
    }

    fn atom(&mut self, depth: usize) -> Result<(), String> {
        let start = self.i;
        while self
            .chars
            .get(self.i)
            .is_some_and(|c| !matches!(c, '[' | ']' | ','))
        {
            self.i += 1;
        }
        let raw: String = self.chars[start..self.i].iter().collect();
        let lead = raw.len() - raw.trim_start().len();
        let first = start + raw[..lead].chars().count();
        let token = raw.trim();
        if let Some(gap) = token.find(char::is_whitespace) {
            let (a, rest) = token.split_at(gap);
            let b = rest.split_whitespace().next().unwrap_or("");
            let at = first + token[..gap].chars().count() + 1;
            return Err(format!(
                "{a:?} and {b:?} are separated by a space at character {at}, not a \",\" \
                 (a list is written [{a}, {b}])"
            ));
        }
        if self.chars.get(self.i) == Some(&'[') {
            return Err(format!(
                "the \"[\" at character {} follows the value {token:?} with no \",\" between \
                 them",
                self.i + 1
            ));
        }
        if self.ragged {
            if self.counts.get(depth).copied().flatten().is_some() {
                return Err(format!(
                    "ragged literal: {token:?} at character {} is a single value where the \
                     other elements at \
                     its depth are lists (a literal is rectangular)",
                    first + 1
                ));
            }
            if self.leaves.len() <= depth {
                self.leaves.resize(depth + 1, false);
            }
            self.leaves[depth] = true;
        }
        self.atoms.push((first + 1, token.to_string()));
        Ok(())
    }

    fn list(&mut self, depth: usize) -> Result<(), String> {
        let open = self.i + 1;
        if self.ragged && self.leaves.get(depth).copied().unwrap_or(false) {
            return Err(format!(
                "ragged literal: the list at character {open} stands where the other \
                 elements at its depth \
                 are single values (a literal is rectangular)"
            ));
        }
        let n = self.list_items(depth, open)?;
        if self.ragged {
            if self.counts.len() <= depth {
                self.counts.resize(depth + 1, None);
            }
            match self.counts[depth] {
                Some(m) if m != n => {
                    return Err(format!(
                        "ragged literal: the list at character {open} has {n} element(s) where \
                         the list before \
                         it at that depth has {m} (a literal is rectangular)"
                    ))
                }
                _ => self.counts[depth] = Some(n),
            }
        }
        Ok(())
    }

    /// Reads the list opened at character `open`; returns how many elements it has.
    fn list_items(&mut self, depth: usize, open: usize) -> Result<usize, String> {
        let mut n = 0;
        self.i += 1;
        self.skip_ws();
        if self.chars.get(self.i) == Some(&']') {
            self.i += 1;
            return Ok(0);
        }
        loop {
            if self.chars.get(self.i).is_none() {
                return Err(format!(
                    "unbalanced brackets: the \"[\" at character {open} is never closed"
                ));
            }
            self.value(depth + 1)?;
            n += 1;
            self.skip_ws();
            let at = self.i + 1;
            match self.chars.get(self.i) {
                None => {
                    return Err(format!(
                        "unbalanced brackets: the \"[\" at character {open} is never closed"
                    ))
                }
                Some(']') => {
                    self.i += 1;
                    return Ok(n);
                }
                Some(',') => {
                    self.i += 1;
                    self.skip_ws();
                    if self.chars.get(self.i) == Some(&']') {
                        // A trailing comma, which the literal syntax allows.
                        self.i += 1;
                        return Ok(n);
                    }
                }
                Some(c) => {
                    return Err(format!(
                        "{c:?} at character {at} follows an element with no \",\" between \
                         them"
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(text: &str) -> String {
        scan(text, true).unwrap_err()
    }

    #[test]
    fn malformed_literals_say_where() {
        assert_eq!(
            why("[1,,2]"),
            "an empty element at character 4 (a \",\" with no value before it)"
        );
        assert_eq!(why("[,]"), why("[,]"));
        assert!(why("[,]").contains("character 2"));
        assert_eq!(
            why("["),
            "unbalanced brackets: the \"[\" at character 1 is never closed"
        );
        assert!(why("[[1,2]").ends_with("the \"[\" at character 1 is never closed"));
        assert!(why("]").contains("character 1") && why("]").contains("closes no"));
        assert!(why("[1,2]]").ends_with("the \"]\" at character 6 closes no \"[\""));
        assert!(why("[1 2]").contains("\"1\" and \"2\" are separated by a space at character 3"));
        assert!(why("nan nan").contains("character 4"), "{}", why("nan nan"));
        assert!(why("1,2").contains("outside brackets") && why("1,2").contains("[1,2]"));
        assert!(why("[1][2]").contains("character 4"), "{}", why("[1][2]"));
        assert!(why("").contains("empty"));
        assert!(why(":f32").contains("no value before \":f32\""));
        // Characters, not bytes.
        assert!(why("[é,,1]").contains("character 4"), "{}", why("[é,,1]"));
        // Well-formed ones (numbers are the core's to judge).
        for ok in [
            "1",
            "[1,2,]",
            "[[1,2],[3,4]]:f32",
            "[]",
            "1e",
            "--",
            "é",
            "[1, x]",
        ] {
            assert!(scan(ok, true).is_ok(), "{ok}");
        }
        assert_eq!(scan("[1, x]", false).unwrap()[1], (5, "x".to_string()));
        // Ragged lists: which element breaks the shape.
        assert!(why("[[1],2]").contains("\"2\" at character 6 is a single value"));
        assert!(why("[1,[2]]").contains("list at character 4"));
        assert!(why("[[1,2],[3]]").contains("character 8 has 1 element(s)"));
        // Deep nesting is bounded, never a stack overflow.
        let deep = "[".repeat(100_000);
        assert!(why(&deep).contains("deeper"));
    }

    #[test]
    fn python_hints_become_command_line_ones() {
        let m = without_python_hint(
            "300 does not fit in int8 (range -128..127; from Python, cast=True wraps it as \
             numpy's astype does)",
        );
        assert_eq!(
            m,
            format!(
                "300 does not fit in int8 (range -128..127); give a value in the type's range \
                 ({STORED_AS_WRITTEN})"
            )
        );
        let m = without_python_hint(
            "float values cannot be stored as int32 without rounding (8.5 at index [7]); \
             convert them first (from Python, cast=True does)",
        );
        assert_eq!(
            m,
            format!(
                "float values cannot be stored as int32 without rounding (8.5 at index [7]); \
                 write whole numbers ({STORED_AS_WRITTEN})"
            )
        );
        assert_eq!(without_python_hint("plain"), "plain");
    }
}
