//! Typed literals such as `[1,2,3]:f32` (the command line's `--input 0=LITERAL`), and
//! random arrays of a type and shape (`--random`).
//!
//! The values follow the core's one rule for numbers ([`crate::scalars::values_to_host`]):
//! this module only splits the text into a shape and scalar tokens.

use crate::scalars::{self, Scalar};
use rpjrt::{element_count, ElementType, Error, Result};

use crate::array::Array;
use crate::invalid;

/// Parses a literal: a number (`1.5`, `-3`, `true`) or nested lists (`[[1,2],[3,4]]`),
/// with an optional `:TYPE` suffix (`[1,2,3]:f32`, `7:int8`). Without a suffix the type is
/// `default` when given, else float32 for numbers with a `.`/`e`, int32 for integers and
/// bool for `true`/`false`. Values follow the one rule for numbers
/// ([`crate::scalars::to_host`]): in range, no float into an integer type, no overflow.
///
/// A literal that is malformed or ragged is an error that says where it goes wrong, by
/// character of the trimmed literal (1-based, counting characters, not bytes): `[1,,2]`
/// is `malformed literal "[1,,2]": an empty element at character 4 (...)`, `[[1,2],[3]]`
/// is `ragged literal "[[1,2],[3]]": the list at character 8 has 1 element(s) ...`, and a
/// bad number in a list names its element (`"x" is not a number (the element at character
/// 4 of the literal "[1,x]")`). The literal is quoted when it is at most 80 characters.
pub fn parse_literal(text: &str, default: Option<ElementType>) -> Result<Array> {
    let text = text.trim();
    let (body, ty) = match text.rsplit_once(':') {
        Some((b, t)) if !t.contains(']') => (b, Some(ElementType::from_name(t.trim())?)),
        _ => (text, None),
    };
    let (dims, tokens) = Scanner::read(text, body)?;
    let listed = body.trim_start().starts_with('[');
    let leaves = tokens
        .iter()
        .map(|(at, v)| {
            token_scalar(v).map_err(|e| match e {
                Error::InvalidArgument(m) if listed => invalid(format!(
                    "{m} (the element at character {at} of the literal{})",
                    shown(text)
                )),
                e => e,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ty = match ty.or(default) {
        Some(t) => t,
        None => {
            if tokens.iter().all(|(_, v)| v == "true" || v == "false") && !tokens.is_empty() {
                ElementType::Pred
            } else if leaves.iter().any(|s| matches!(s, Scalar::Float(_))) {
                ElementType::F32
            } else {
                ElementType::S32
            }
        }
    };
    dense_array(&leaves, dims, ty)
}

/// The literal, quoted after a space, for a message; nothing when it is too long to help.
fn shown(text: &str) -> String {
    if text.chars().count() <= 80 {
        format!(" {text:?}")
    } else {
        String::new()
    }
}

/// One literal token as a scalar: the core's text rule ([`Scalar::parse`]: a finite
/// decimal beyond float64's range is out of range, not an infinity). A token in double
/// quotes is read as its text, so that the values JSON output holds as strings (`"nan"`,
/// `"-inf"`, integers past 64 bits) read back as they were written.
fn token_scalar(v: &str) -> Result<Scalar> {
    let unquoted = v
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(v);
    Scalar::parse(unquoted)
}

/// The [`Array`] of scalars under the one rule for numbers (sub-byte types packed,
/// little-endian).
fn dense_array(leaves: &[Scalar], dims: Vec<i64>, ty: ElementType) -> Result<Array> {
    let v = scalars::values_to_host(leaves, dims.clone(), Some(ty))?;
    let mut data = if ty.is_sub_byte() {
        rpjrt::pack_sub_byte(ty, &v.bytes)
    } else {
        v.bytes
    };
    if cfg!(target_endian = "big") {
        let unit = match ty.kind() {
            rpjrt::ElementKind::Complex => ty.host_itemsize() / 2,
            _ => ty.host_itemsize(),
        };
        data.chunks_exact_mut(unit.max(1)).for_each(|c| c.reverse());
    }
    Array::new(ty, dims, data)
}

/// A literal's token and its place (a 1-based character of the literal).
type Token = (usize, String);

/// The reader of a literal's value (`VALUE`, a token or `[VALUE, ...]`, a trailing comma
/// allowed): its dims and its tokens with their places, or where it goes wrong.
struct Scanner<'a> {
    /// The whole literal (for messages); the value's text starts where it does.
    literal: &'a str,
    chars: Vec<char>,
    i: usize,
    tokens: Vec<Token>,
    /// Per depth: the length of the lists there (the first one's).
    counts: Vec<Option<usize>>,
    /// Per depth: whether single values are there.
    leaves: Vec<bool>,
}

impl<'a> Scanner<'a> {
    /// The dims and tokens of `body`, the value of the trimmed `literal` (before its type).
    fn read(literal: &'a str, body: &str) -> Result<(Vec<i64>, Vec<Token>)> {
        let mut s = Scanner {
            literal,
            chars: body.chars().collect(),
            i: 0,
            tokens: Vec::new(),
            counts: Vec::new(),
            leaves: Vec::new(),
        };
        if body.trim().is_empty() {
            return Err(s.malformed(match literal.get(body.len() + 1..) {
                Some(t) => format!("there is no value before \":{t}\" (as in 1:{t} or [1,2]:{t})"),
                None => "it is empty: write a value such as 1.5, true or [1,2,3]".to_string(),
            }));
        }
        s.value(0)?;
        s.skip_ws();
        if let Some(&c) = s.chars.get(s.i) {
            let at = s.i + 1;
            return Err(s.malformed(match c {
                ']' => format!("unbalanced brackets: the \"]\" at character {at} closes no \"[\""),
                ',' => format!(
                    "the \",\" at character {at} is outside brackets: write a list in brackets, \
                     as [{}]",
                    body.trim()
                ),
                _ => format!(
                    "{:?} at character {at} follows a complete value",
                    c.to_string()
                ),
            }));
        }
        let dims = s.counts.iter().map_while(|n| n.map(|n| n as i64));
        Ok((dims.collect(), s.tokens))
    }

    fn malformed(&self, why: String) -> Error {
        invalid(format!("malformed literal{}: {why}", shown(self.literal)))
    }

    fn ragged(&self, why: String) -> Error {
        let quoted = shown(self.literal);
        invalid(format!(
            "ragged literal{quoted}: {why} (a literal is rectangular)"
        ))
    }

    fn skip_ws(&mut self) {
        while self.chars.get(self.i).is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<()> {
        self.skip_ws();
        let at = self.i + 1;
        match self.chars.get(self.i) {
            None => Err(self.malformed(format!("a value is missing at character {at} (its end)"))),
            Some('[') => self.list(depth),
            Some(']') => Err(self.malformed(format!(
                "unbalanced brackets: a value is missing at character {at}, where a \"]\" \
                 closes no \"[\""
            ))),
            Some(',') => Err(self.malformed(format!(
                "an empty element at character {at} (a \",\" with no value before it)"
            ))),
            Some(_) => self.atom(depth),
        }
    }

    /// A token (whitespace before it already skipped).
    fn atom(&mut self, depth: usize) -> Result<()> {
        let start = self.i;
        while (self.chars.get(self.i)).is_some_and(|c| !matches!(c, '[' | ']' | ',')) {
            self.i += 1;
        }
        let raw: String = self.chars[start..self.i].iter().collect();
        let token = raw.trim_end();
        if let Some(gap) = token.find(char::is_whitespace) {
            let (a, rest) = token.split_at(gap);
            let b = rest.split_whitespace().next().unwrap_or("");
            let at = start + a.chars().count() + 1;
            return Err(self.malformed(format!(
                "{a:?} and {b:?} are separated by a space at character {at}, not a \",\" \
                 (a list is written [{a}, {b}])"
            )));
        }
        if self.chars.get(self.i) == Some(&'[') {
            return Err(self.malformed(format!(
                "the \"[\" at character {} follows the value {token:?} with no \",\" between \
                 them",
                self.i + 1
            )));
        }
        if self.counts.get(depth).copied().flatten().is_some() {
            return Err(self.ragged(format!(
                "{token:?} at character {} is a single value where the other elements at its \
                 depth are lists",
                start + 1
            )));
        }
        if self.leaves.len() <= depth {
            self.leaves.resize(depth + 1, false);
        }
        self.leaves[depth] = true;
        self.tokens.push((start + 1, token.to_string()));
        Ok(())
    }

    /// The list opened at the current character, its elements at `depth + 1`.
    fn list(&mut self, depth: usize) -> Result<()> {
        let open = self.i + 1;
        // Bounded before it recurses: deep brackets would otherwise overflow the stack.
        if depth >= scalars::MAX_DEPTH {
            return Err(self.malformed(format!(
                "it is nested deeper than {} levels, rpjrt's highest rank (the \"[\" at \
                 character {open})",
                scalars::MAX_DEPTH
            )));
        }
        if self.leaves.get(depth) == Some(&true) {
            return Err(self.ragged(format!(
                "the list at character {open} stands where the other elements at its depth \
                 are single values"
            )));
        }
        let mut n = 0;
        self.i += 1;
        loop {
            self.skip_ws();
            match self.chars.get(self.i) {
                None => {
                    return Err(self.malformed(format!(
                        "unbalanced brackets: the \"[\" at character {open} is never closed"
                    )))
                }
                Some(']') => break,
                _ => self.value(depth + 1)?,
            }
            n += 1;
            self.skip_ws();
            match self.chars.get(self.i) {
                // After a comma, a `]` may follow (a trailing comma is allowed).
                Some(',') => self.i += 1,
                None | Some(']') => {}
                Some(&c) => {
                    return Err(self.malformed(format!(
                        "{:?} at character {} follows an element with no \",\" between them",
                        c.to_string(),
                        self.i + 1
                    )))
                }
            }
        }
        self.i += 1;
        if self.counts.len() <= depth {
            self.counts.resize(depth + 1, None);
        }
        match self.counts[depth] {
            Some(m) if m != n => Err(self.ragged(format!(
                "the list at character {open} has {n} element(s) where the list before it at \
                 that depth has {m}"
            ))),
            _ => {
                self.counts[depth] = Some(n);
                Ok(())
            }
        }
    }
}

/// The largest value of the float type `t` below 1 (its bits are 1.0's less one: a
/// positive float's bits grow with its value); 1.0 for a type without such a value.
fn below_one(t: ElementType) -> f64 {
    scalars::encode_float(1.0, t)
        .ok()
        .filter(|&bits| bits > 0)
        .and_then(|bits| scalars::decode_float(bits - 1, t))
        .filter(|v| *v < 1.0)
        .unwrap_or(1.0)
}

/// Random values of a type and shape, from a small deterministic generator seeded by
/// `seed`: floats in [-1, 1) as stored in the type (float8_e8m0fnu, which holds only
/// powers of two: 2^-4 to 2^3), complex numbers with both parts in [-1, 1), integers
/// uniform in [0, 10) (in 0 up to the type's largest value where that is below 9: int2
/// 0-1, uint2 0-3, int4 0-7), random bools. A draw that the type would round up to 1.0
/// (float16's, bfloat16's, a float8's nearest value to 0.9999) is taken as the type's
/// largest value below 1 instead, so that 1.0 is never among them.
pub fn random(ty: ElementType, dims: &[i64], seed: u64) -> Result<Array> {
    let n = element_count(dims)?;
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    // splitmix64's output function.
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(state)
    };
    // In [-1, 1) once rounded to `ty` (or, for a complex type, to its parts' type).
    let part = match ty {
        ElementType::C64 => ElementType::F32,
        ElementType::C128 => ElementType::F64,
        t => t,
    };
    let top = below_one(part);
    let unit = |r: u64| ((r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0).min(top);
    // Uniform over what the type holds of [0, 10): `r % 10 % (hi + 1)` made 0 and 1 twice
    // as likely as the rest for int4 and uint2.
    let (_, hi) = scalars::int_range(ty);
    let int_span = (hi + 1).clamp(1, 10) as u64;
    use rpjrt::ElementKind as K;
    use Scalar as S;
    let mut leaves = Vec::new();
    leaves
        .try_reserve_exact(n)
        .map_err(|_| Error::ResourceExhausted(format!("{n} random values")))?;
    for _ in 0..n {
        let r = next();
        leaves.push(match ty.kind() {
            K::Bool => S::Bool(r & 1 == 1),
            K::Float if ty == ElementType::F8E8M0FNU => S::Float(2f64.powi((r % 8) as i32 - 4)),
            K::Float => S::Float(unit(r)),
            // The real part as before; the imaginary one from the same draw, mixed again
            // (it was always 0, so complex programs never saw an imaginary part).
            K::Complex => S::Complex(unit(r), unit(mix(r ^ 0x5851_f42d_4c95_7f2d))),
            _ => S::Int(i128::from(r % int_span)),
        });
    }
    dense_array(&leaves, dims.to_vec(), ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Complex inputs got an imaginary part of 0, and int2/uint2/int4 took `r % 10 %
    /// (hi + 1)`: skewed towards 0 and 1. Every type now covers what the docs say, evenly.
    #[test]
    fn random_values_cover_the_documented_range() {
        for t in [ElementType::C64, ElementType::C128] {
            let a = random(t, &[200], 3).unwrap();
            let leaves: Vec<Scalar> = (0..a.len()).map(|i| a.get(i).unwrap()).collect();
            let (mut re_seen, mut im_seen) = (false, false);
            for v in &leaves {
                let Scalar::Complex(re, im) = *v else {
                    panic!("{t}: {v:?}")
                };
                assert!(
                    (-1.0..1.0).contains(&re) && (-1.0..1.0).contains(&im),
                    "{t}: {v:?}"
                );
                re_seen |= re != 0.0;
                im_seen |= im.abs() > 0.5;
            }
            assert!(re_seen && im_seen, "{t}: {leaves:?}");
            // Reproducible.
            assert_eq!(random(t, &[200], 3).unwrap().data, a.data, "{t}");
            assert_ne!(random(t, &[200], 4).unwrap().data, a.data, "{t}");
        }
        for (t, span) in [
            (ElementType::S2, 2),
            (ElementType::U2, 4),
            (ElementType::S4, 8),
            (ElementType::U4, 10),
            (ElementType::S8, 10),
            (ElementType::U32, 10),
            (ElementType::S64, 10),
        ] {
            let n = 4000;
            let a = random(t, &[n as i64], 7).unwrap();
            let mut counts = vec![0usize; span];
            for v in (0..a.len()).map(|i| a.get(i).unwrap()) {
                let Scalar::Int(i) = v else {
                    panic!("{t}: {v:?}")
                };
                assert!((0..span as i128).contains(&i), "{t}: {i}");
                counts[i as usize] += 1;
            }
            let even = n / span;
            for (i, &c) in counts.iter().enumerate() {
                assert!(
                    c > even * 3 / 4 && c < even * 5 / 4,
                    "{t}: value {i} came {c} times of {n}, not about {even}: {counts:?}"
                );
            }
        }
    }

    /// float16, bfloat16 and the float8/6/4 types drew 1.0 (a draw just below 1 rounded
    /// up to it); the documented range is [-1, 1) as stored, for every float type.
    #[test]
    fn random_floats_stay_below_one_once_rounded() {
        for &t in ElementType::ALL {
            let part = match t {
                ElementType::C64 => ElementType::F32,
                ElementType::C128 => ElementType::F64,
                t if t.kind() == rpjrt::ElementKind::Float => t,
                _ => continue,
            };
            if t == ElementType::F8E8M0FNU {
                continue;
            }
            let a = random(t, &[50_000], 0).unwrap();
            let mut top = f64::MIN;
            for v in (0..a.len()).map(|i| a.get(i).unwrap()) {
                let (re, im) = match v {
                    Scalar::Float(x) => (x, 0.0),
                    Scalar::Complex(re, im) => (re, im),
                    v => panic!("{t}: {v:?}"),
                };
                for x in [re, im] {
                    assert!((-1.0..1.0).contains(&x), "{t}: {x}");
                }
                top = top.max(re);
            }
            // The top of the range is still reached where the type's values are coarse.
            if part.bit_width() <= 16 {
                assert_eq!(top, below_one(part), "{t}");
            }
        }
        assert_eq!(below_one(ElementType::F16), 1.0 - 2f64.powi(-11));
        assert_eq!(below_one(ElementType::BF16), 1.0 - 2f64.powi(-8));
        assert_eq!(below_one(ElementType::F4E2M1FN), 0.5);
        assert_eq!(below_one(ElementType::F32), 1.0 - 2f64.powi(-24));
    }

    #[test]
    fn random_values_for_every_type() {
        for &t in ElementType::ALL {
            if t == ElementType::Token {
                continue;
            }
            let a = random(t, &[3, 5], 1).unwrap();
            assert_eq!(a.data.len(), t.dense_byte_size(15).unwrap(), "{t}");
        }
    }

    #[test]
    fn literal_nesting_is_bounded_not_a_stack_overflow() {
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let a = parse_literal(&nested(scalars::MAX_DEPTH), None).unwrap();
        assert_eq!(a.dims, vec![1; scalars::MAX_DEPTH]);
        for n in [scalars::MAX_DEPTH + 1, 100_000] {
            let e = parse_literal(&nested(n), None).unwrap_err().to_string();
            assert!(e.contains("nested deeper than 64 levels"), "{e}");
            assert!(e.contains("(the \"[\" at character 65)"), "{e}");
        }
    }

    fn why(text: &str) -> String {
        parse_literal(text, None).unwrap_err().to_string()
    }

    /// Malformed literals say where, by 1-based character (not byte) of the trimmed text.
    #[test]
    fn malformed_literals_say_where() {
        assert_eq!(
            why(" [1, ,2] "),
            "invalid argument: malformed literal \"[1, ,2]\": an empty element at character 5 \
             (a \",\" with no value before it)"
        );
        assert_eq!(
            why("[[1,2],[3]]"),
            "invalid argument: ragged literal \"[[1,2],[3]]\": the list at character 8 has 1 \
             element(s) where the list before it at that depth has 2 (a literal is rectangular)"
        );
        assert_eq!(
            why("[[1,2],[3,x]]:f32"),
            "invalid argument: \"x\" is not a number (the element at character 11 of the \
             literal \"[[1,2],[3,x]]:f32\")"
        );
        // A lone token is the whole literal; a long literal is not quoted back.
        assert_eq!(why("x:f32"), "invalid argument: \"x\" is not a number");
        let long = format!("[{}", "1,".repeat(50));
        assert!(why(&long).starts_with("invalid argument: malformed literal: unbalanced"));
        let nothing = "there is no value before \":f32\" (as in 1:f32 or [1,2]:f32)";
        for (text, says) in [
            ("[1,,2]", "an empty element at character 4"),
            ("[,]", "an empty element at character 2"),
            ("[1,2,,]", "an empty element at character 6"),
            (
                "[",
                "unbalanced brackets: the \"[\" at character 1 is never closed",
            ),
            ("[[1,2]", "the \"[\" at character 1 is never closed"),
            ("[[1,2],[3", "the \"[\" at character 8 is never closed"),
            (
                "]",
                "a value is missing at character 1, where a \"]\" closes no \"[\"",
            ),
            (
                "[1,2]]",
                "unbalanced brackets: the \"]\" at character 6 closes no \"[\"",
            ),
            (
                "[1 2]",
                "\"1\" and \"2\" are separated by a space at character 3, not a \",\"",
            ),
            ("nan nan", "separated by a space at character 4"),
            (
                "1,2",
                "the \",\" at character 2 is outside brackets: write a list in brackets, as [1,2]",
            ),
            ("[1][2]", "\"[\" at character 4 follows a complete value"),
            ("[1]x:f32", "\"x\" at character 4 follows a complete value"),
            (
                "[[1]2]",
                "\"2\" at character 5 follows an element with no \",\"",
            ),
            ("[1[2]]", "the \"[\" at character 3 follows the value \"1\""),
            ("", "malformed literal \"\": it is empty: write a value"),
            (":f32", nothing),
            // Ragged rows at depths 2 and 3, either way round.
            (
                "[[[1,2],[3,4]],[[5,6],[7]]]",
                "the list at character 23 has 1 element(s)",
            ),
            (
                "[[1],2]",
                "\"2\" at character 6 is a single value where the other elements",
            ),
            (
                "[[[1,2],[3,4]],[[5,6],7]]",
                "\"7\" at character 23 is a single value",
            ),
            (
                "[1,[2]]",
                "the list at character 4 stands where the other elements",
            ),
            (
                "[[],[1]]",
                "the list at character 5 has 1 element(s) where the list before",
            ),
            (
                "[1e400, 0]",
                "for an infinity) (the element at character 2 of the literal",
            ),
            // Characters, not bytes: "é" is two bytes but one character.
            ("[é,,1]", "an empty element at character 4"),
            (
                "[1,é]",
                "\"é\" is not a number (the element at character 4 of the literal",
            ),
            ("[\"é\",[2]]", "the list at character 6 stands where"),
            (
                "[[1],[2],é é]",
                "\"é\" and \"é\" are separated by a space at character 11",
            ),
        ] {
            let e = why(text);
            assert!(e.contains(says), "{text:?}: {e}");
        }
        // Well-formed ones, trailing commas included.
        for (text, dims) in [
            ("[1,2,]", vec![2]),
            ("[[1,2,],[3,4],]", vec![2, 2]),
            ("[[],[]]", vec![2, 0]),
            ("[]", vec![0]),
            (" 7 ", vec![]),
        ] {
            assert_eq!(parse_literal(text, None).unwrap().dims, dims, "{text}");
        }
    }
    #[test]
    fn literals() {
        let a = parse_literal("[[1, 2], [3, 4]]:f32", None).unwrap();
        assert_eq!(a.element_type, ElementType::F32);
        assert_eq!(a.dims, vec![2, 2]);
        assert_eq!(a.get(3), Some(Scalar::Float(4.0)));
        assert_eq!(
            parse_literal("3", None).unwrap().element_type,
            ElementType::S32
        );
        assert_eq!(
            parse_literal("3", Some(ElementType::F64)).unwrap().get(0),
            Some(Scalar::Float(3.0))
        );
        assert_eq!(
            parse_literal("[true,false]", None).unwrap().element_type,
            ElementType::Pred
        );
        assert!(parse_literal("[[1,2],[3]]", None)
            .unwrap_err()
            .to_string()
            .contains("ragged"));
        assert!(parse_literal("300:uint8", None)
            .unwrap_err()
            .to_string()
            .contains("does not fit"));
        // The one rule for numbers: no float into an integer type, no overflow, and the
        // types numpy lacks (packed when sub-byte).
        let e = parse_literal("[1, 2.0]:int8", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("without rounding"), "{e}");
        let e = parse_literal("1e300:float16", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("overflows float16"), "{e}");
        let a = parse_literal("[1, -2, 7]:int4", None).unwrap();
        assert_eq!(a.data, vec![0xE1, 0x07]);
        let a = parse_literal("[1.5, 448]:f8e4m3fn", None).unwrap();
        assert_eq!(a.data, vec![0x3C, 0x7E]);
        let a = parse_literal("[1, 0.5]", Some(ElementType::BF16)).unwrap();
        assert_eq!(a.data, [0x3F80u16, 0x3F00].map(u16::to_le_bytes).concat());
        let e = parse_literal("123456789012345678901234567890123456789012", None).unwrap_err();
        assert!(e.to_string().contains("does not fit in int32"), "{e}");
        assert!(parse_literal("[1, x]", None)
            .unwrap_err()
            .to_string()
            .contains("\"x\" is not a number"));
        assert_eq!(
            parse_literal("[nan, -inf]", None).unwrap().element_type,
            ElementType::F32
        );
        // A finite decimal beyond float64 is out of range for every float type (it was
        // read as inf), like 1e39 for f32; inf is written as a word.
        for t in ["f32", "f64", "bf16"] {
            let e = parse_literal(&format!("[1e400, 0]:{t}"), None)
                .unwrap_err()
                .to_string();
            assert!(e.contains("1e400 is out of range"), "{e}");
        }
        let e = parse_literal("1e39:f32", None).unwrap_err().to_string();
        assert!(e.contains("overflows float32"), "{e}");
        assert!(parse_literal("[inf, -inf]:f32", None).is_ok());
        // Any case, `infinity` too (as Python's float() takes them), and quoted as JSON
        // output writes them: `run --json`'s output reads back as a literal.
        for text in [
            "[NaN, Inf, -Infinity, +INF]",
            r#"["nan", "inf", "-inf", 1.5]"#,
            r#"[1.0, "NaN", "-inf", "Infinity"]"#,
        ] {
            let a = parse_literal(text, None).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(a.element_type, ElementType::F32, "{text}");
        }
        assert!(parse_literal("[nana]", None).is_err());
        assert!(parse_literal("[infinit]", None).is_err());
        assert!(parse_literal("[1,2", None).is_err());
        assert!(parse_literal("x:f32", None).is_err());
        assert!(parse_literal("1:nosuchtype", None).is_err());
    }

    /// `values` (row-major) of shape `dims` as literal text, with `sep` after each comma.
    fn nested_text(values: &[String], dims: &[usize], sep: &str) -> String {
        match dims.split_first() {
            None => values[0].clone(),
            Some((&n, rest)) => {
                let inner: usize = rest.iter().product();
                let parts: Vec<String> = (0..n)
                    .map(|i| nested_text(&values[i * inner..], rest, sep))
                    .collect();
                format!("[{}]", parts.join(&format!(",{sep}")))
            }
        }
    }

    fn shape() -> impl proptest::strategy::Strategy<Value = Vec<usize>> {
        proptest::collection::vec(1usize..4, 0..=3)
    }

    proptest::proptest! {
        /// Integers of any width round-trip through their text, or are refused by range.
        #[test]
        fn integer_literals_round_trip(
            dims in shape(),
            pool in proptest::collection::vec(proptest::prelude::any::<i64>(), 27),
            sep in "[ ]{0,2}",
        ) {
            let n: usize = dims.iter().product();
            let values: Vec<String> = pool[..n].iter().map(|v| v.to_string()).collect();
            let text = format!("{}:int64", nested_text(&values, &dims, &sep));
            let a = parse_literal(&text, None).unwrap();
            let want: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            proptest::prop_assert_eq!(&a.dims, &want);
            let data: Vec<u8> = pool[..n].iter().flat_map(|v| v.to_le_bytes()).collect();
            proptest::prop_assert_eq!(&a.data, &data);
            // In int32 only when every value fits; else the error names the value.
            let r = parse_literal(&text.replace("int64", "int32"), None);
            let fits = pool[..n].iter().all(|&v| i32::try_from(v).is_ok());
            match r {
                Ok(a) => proptest::prop_assert!(fits && a.data.len() == 4 * n),
                Err(e) => proptest::prop_assert!(!fits && e.to_string().contains("does not fit in int32")),
            }
        }

        /// Floats printed by Rust (shortest round-trip form) parse to the same bits.
        #[test]
        fn float_literals_round_trip(
            dims in shape(),
            pool in proptest::collection::vec(proptest::num::f32::NORMAL | proptest::num::f32::SUBNORMAL | proptest::num::f32::ZERO, 27),
        ) {
            let n: usize = dims.iter().product();
            let values: Vec<String> = pool[..n].iter().map(|v| format!("{v:?}")).collect();
            let a = parse_literal(&format!("{}:f32", nested_text(&values, &dims, " ")), None).unwrap();
            let data: Vec<u8> = pool[..n].iter().flat_map(|v| v.to_le_bytes()).collect();
            proptest::prop_assert_eq!(a.element_type, ElementType::F32);
            proptest::prop_assert_eq!(&a.data, &data);
            for (i, v) in pool[..n].iter().enumerate() {
                proptest::prop_assert_eq!(a.get(i), Some(Scalar::Float(f64::from(*v))));
            }
        }

        /// Arbitrary text is parsed or refused, never a panic.
        #[test]
        fn any_text_is_a_literal_or_an_error(text in "[\\[\\], 0-9.e:a-z+-]{0,40}") {
            let _ = parse_literal(&text, None);
        }

        /// Decimal numbers with any exponent: a finite value or an error, never an
        /// infinity that nobody wrote (`1e400` is out of range, not inf).
        #[test]
        fn decimals_never_become_infinities(
            mantissa in "[+-]?[0-9]{1,3}(\\.[0-9]{0,3})?",
            exp in -400i32..400,
            ty in proptest::sample::select(vec!["f32", "f64", "bf16", "f16"]),
        ) {
            let text = format!("[{mantissa}e{exp}]:{ty}");
            if let Ok(a) = parse_literal(&text, None) {
                let v = a.get(0);
                proptest::prop_assert!(
                    matches!(v, Some(Scalar::Float(x)) if x.is_finite()),
                    "{text} -> {v:?}"
                );
            }
        }
    }
}
