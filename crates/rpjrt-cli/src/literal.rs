//! What the command line adds to an `--input` literal's error (`rpjrt_npy::literal`, whose
//! messages already say where a malformed literal goes wrong): a hint a command-line user
//! can follow where the core's message speaks to Python users (`cast=True`, which the
//! command line has no equivalent of).

/// The message of `e`, an error parsing an `--input` literal, for the command line: the
/// core's message, without hints that only Python can follow.
pub fn explain(e: rpjrt::Error) -> String {
    without_python_hint(&crate::common::bare(e))
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

#[cfg(test)]
mod tests {
    use super::*;

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
