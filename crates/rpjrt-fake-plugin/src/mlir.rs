//! Just enough reading of StableHLO text to learn the `@main` signature.

use rpjrt_sys as sys;

/// An array type: element type and dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    /// A `PJRT_Buffer_Type` value.
    pub ty: sys::PJRT_Buffer_Type,
    /// Dimensions, major to minor.
    pub dims: Vec<i64>,
}

/// What the fake learned from a program's text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signature {
    /// `module @name`, if present.
    pub module_name: Option<String>,
    /// The parameters of `@main` (None: no readable `@main`); a parameter whose type is
    /// not a static tensor the fake knows is None.
    pub params: Option<Vec<Option<TensorType>>>,
    /// How many results `@main` declares (`-> (a, b, ...)`); None when unreadable.
    pub num_results: Option<usize>,
}

/// Parses `tensor<2x3xf32>` (also `tensor<f32>`, and ignores an encoding after a comma).
pub fn parse_tensor_type(text: &str) -> Option<TensorType> {
    let inner = text.trim().strip_prefix("tensor<")?;
    let end = matching(inner)?;
    let mut body = &inner[..end];
    if let Some(comma) = top_level_split(body, ',').first().map(|s| s.len()) {
        body = &body[..comma];
    }
    let mut dims = Vec::new();
    let mut rest = body.trim();
    loop {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || rest.as_bytes().get(digits) != Some(&b'x') {
            break;
        }
        dims.push(rest[..digits].parse().ok()?);
        rest = &rest[digits + 1..];
    }
    Some(TensorType {
        ty: crate::buffer::mlir_element_type(rest.trim())?,
        dims,
    })
}

/// The byte positions in `s`, outside quoted strings, where `stop(char, depth)` holds,
/// `depth` being the bracket depth before the char (`(<{[` open, `)>}]` close, the `>`
/// of `->` does neither).
fn scan(s: &str, mut stop: impl FnMut(char, i32) -> bool) -> Vec<usize> {
    let (mut depth, mut in_str, mut escaped, mut prev, mut out) = (0, false, false, '\0', vec![]);
    for (i, c) in s.char_indices() {
        match (in_str, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') | (false, _, '"') => in_str = !in_str,
            (true, ..) => {}
            _ if stop(c, depth) => out.push(i),
            (.., '(' | '<' | '{' | '[') => depth += 1,
            (.., '>') if prev == '-' => {}
            (.., ')' | '>' | '}' | ']') => depth -= 1,
            _ => {}
        }
        prev = c;
    }
    out
}

/// Position in `s` of the bracket that closes an already consumed opening one.
fn matching(s: &str) -> Option<usize> {
    scan(s, |c, depth| {
        depth == 0 && matches!(c, ')' | '>' | '}' | ']')
    })
    .first()
    .copied()
}

/// Splits at `sep` outside any brackets or strings.
fn top_level_split(s: &str, sep: char) -> Vec<&str> {
    let cuts = scan(s, |c, depth| c == sep && depth == 0);
    let starts = std::iter::once(0).chain(cuts.iter().map(|i| i + sep.len_utf8()));
    let ends = cuts.iter().copied().chain(std::iter::once(s.len()));
    starts.zip(ends).map(|(a, b)| &s[a..b]).collect()
}

fn symbol_after(text: &str, marker: &str) -> Option<String> {
    let at = text.find(marker)? + marker.len();
    let rest = &text[at..];
    if let Some(quoted) = rest.strip_prefix('"') {
        return quoted.find('"').map(|end| quoted[..end].to_string());
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-'))
        .collect();
    if name.is_empty() {
        None
    } else {
        Some(name)
    }
}

/// Reads the module name and the `@main` parameters from StableHLO text. Never fails:
/// whatever cannot be read is None.
pub fn parse_signature(code: &[u8]) -> Signature {
    let Ok(text) = std::str::from_utf8(code) else {
        return Signature::default();
    };
    let module_name = symbol_after(text, "module @");
    let mut num_results = None;
    let params = text.find("@main(").and_then(|at| {
        let open = at + "@main(".len();
        let close = open + matching(&text[open..])?;
        num_results = count_results(&text[close + 1..]);
        let list = text[open..close].trim();
        if list.is_empty() {
            return Some(Vec::new());
        }
        Some(
            top_level_split(list, ',')
                .into_iter()
                .map(|arg| {
                    let (_, ty) = arg.split_once(':')?;
                    parse_tensor_type(ty)
                })
                .collect(),
        )
    });
    Signature {
        module_name,
        params,
        num_results,
    }
}

/// The number of results in `-> T` or `-> (T, U, ...)` at the start of `after` (what
/// follows `@main`'s parameter list); None when there is no arrow.
fn count_results(after: &str) -> Option<usize> {
    let rest = after.trim_start().strip_prefix("->")?.trim_start();
    match rest.strip_prefix('(') {
        Some(inner) => {
            let list = inner[..matching(inner)?].trim();
            Some(if list.is_empty() {
                0
            } else {
                top_level_split(list, ',').len()
            })
        }
        None => Some(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_main_signature() {
        let text = r#"module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {mhlo.sharding = "{replicated}"}, %arg1: tensor<i32>, %arg2: tensor<4xcomplex<f32>>) -> (tensor<2x3xf32>) {
    return %arg0 : tensor<2x3xf32>
  }
}"#;
        let sig = parse_signature(text.as_bytes());
        assert_eq!(sig.module_name.as_deref(), Some("jit_f"));
        let params = sig.params.unwrap();
        assert_eq!(params.len(), 3);
        assert_eq!(
            params[0],
            Some(TensorType {
                ty: sys::PJRT_Buffer_Type_F32,
                dims: vec![2, 3]
            })
        );
        assert_eq!(
            params[1],
            Some(TensorType {
                ty: sys::PJRT_Buffer_Type_S32,
                dims: vec![]
            })
        );
        assert_eq!(
            params[2],
            Some(TensorType {
                ty: sys::PJRT_Buffer_Type_C64,
                dims: vec![4]
            })
        );
    }

    #[test]
    fn unknown_types_and_missing_main() {
        let sig =
            parse_signature(b"func.func @main(%arg0: tensor<?xf32>, %arg1: !stablehlo.token) {}");
        assert_eq!(sig.params, Some(vec![None, None]));
        assert_eq!(sig.module_name, None);
        let sig = parse_signature(b"func.func @other() {}");
        assert_eq!(sig.params, None);
        let sig = parse_signature(b"func.func @main() {}");
        assert_eq!(sig.params, Some(vec![]));
        assert_eq!(sig.num_results, None);
    }

    #[test]
    fn counts_results() {
        let n = |t: &str| parse_signature(t.as_bytes()).num_results;
        assert_eq!(
            n("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {"),
            Some(1)
        );
        assert_eq!(
            n("func.func @main(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x3xf32> {jax.result_info = \"a,b\"}) {"),
            Some(2)
        );
        assert_eq!(n("func.func @main(%a: tensor<4xf32>) -> () {"), Some(0));
    }
}
