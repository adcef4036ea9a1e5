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
pub fn parse_literal(text: &str, default: Option<ElementType>) -> Result<Array> {
    let text = text.trim();
    let (body, ty) = match text.rsplit_once(':') {
        Some((b, t)) if !t.contains(']') => (b, Some(ElementType::from_name(t.trim())?)),
        _ => (text, None),
    };
    let mut dims = Vec::new();
    let mut values = Vec::new();
    parse_nested(body.trim(), 0, &mut dims, &mut values)?;
    let leaves = values
        .iter()
        .map(|v| token_scalar(v))
        .collect::<Result<Vec<_>>>()?;
    let ty = match ty.or(default) {
        Some(t) => t,
        None => {
            if values.iter().all(|v| v == "true" || v == "false") && !values.is_empty() {
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

fn parse_nested(s: &str, depth: usize, dims: &mut Vec<i64>, out: &mut Vec<String>) -> Result<()> {
    // Bounded before it recurses: deep brackets would otherwise overflow the stack.
    if depth > scalars::MAX_DEPTH {
        return Err(invalid(format!(
            "the literal is nested deeper than {} levels (rpjrt's highest rank)",
            scalars::MAX_DEPTH
        )));
    }
    let s = s.trim();
    let Some(inner) = s.strip_prefix('[') else {
        if s.is_empty() || s.contains([',', ']']) {
            return Err(invalid(format!("malformed literal near {s:?}")));
        }
        if dims.len() > depth {
            return Err(invalid(
                "ragged literal: nesting depth differs between elements",
            ));
        }
        out.push(s.to_string());
        return Ok(());
    };
    let inner = inner
        .strip_suffix(']')
        .ok_or_else(|| invalid(format!("unbalanced brackets in {s:?}")))?;
    // Split at top-level commas.
    let mut parts = Vec::new();
    let (mut level, mut start) = (0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '[' => level += 1,
            ']' => level -= 1,
            ',' if level == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if level < 0 {
            return Err(invalid(format!("unbalanced brackets in {s:?}")));
        }
    }
    let last = inner[start..].trim();
    if !last.is_empty() {
        parts.push(last);
    } else if !parts.is_empty() {
        // trailing comma: fine
    }
    let n = parts.len() as i64;
    if dims.len() == depth {
        dims.push(n);
    } else if dims[depth] != n {
        return Err(invalid(format!(
            "ragged literal: {n} elements where {} were expected",
            dims[depth]
        )));
    }
    for p in parts {
        parse_nested(p, depth + 1, dims, out)?;
    }
    Ok(())
}

/// Random values of a type and shape: floats in [-1, 1), integers in [0, 10), random
/// bools, from a small deterministic generator seeded by `seed`.
pub fn random(ty: ElementType, dims: &[i64], seed: u64) -> Result<Array> {
    let n = element_count(dims)?;
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    use rpjrt::ElementKind as K;
    use Scalar as S;
    let (_, hi) = scalars::int_range(ty);
    let mut leaves = Vec::new();
    leaves
        .try_reserve_exact(n)
        .map_err(|_| Error::ResourceExhausted(format!("{n} random values")))?;
    for _ in 0..n {
        let r = next();
        leaves.push(match ty.kind() {
            K::Bool => S::Bool(r & 1 == 1),
            K::Float | K::Complex if ty == ElementType::F8E8M0FNU => {
                S::Float(2f64.powi((r % 8) as i32 - 4))
            }
            K::Float | K::Complex => S::Float((r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0),
            _ => S::Int(i128::from(r % 10) % (hi + 1).max(1)),
        });
    }
    dense_array(&leaves, dims.to_vec(), ty)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(e.contains("nested deeper than 64"), "{e}");
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
