//! What an MLIR program uses, read without an MLIR library: the dialects it names, its
//! operation names and the element types (with their shapes) of its tensors.
//!
//! Two readers, both total (any input gives an answer or `None`, never a panic):
//! - **text**: a token scan. Operation names are the `dialect.op` tokens that are not
//!   attributes or types (`#stablehlo.…`, `!stablehlo.…`); element types come from tensor
//!   shape tokens such as `0x3xf6E2M3FN` or `f32`.
//! - **bytecode** (plain MLIR bytecode and StableHLO portable artifacts): the string,
//!   dialect, attribute/type and offset sections. Types with the builtin or VHLO dialect's
//!   own encoding are decoded for the few element types rpjrt has to recognise and for
//!   ranked tensors (shape and element type); everything else is skipped.
//!
//! rpjrt uses this to switch the Shardy partitioner on and to refuse, before compiling,
//! programs that a plugin's compiler is known to abort on (see `crate::screen`).

use std::collections::BTreeSet;

use crate::dtype::ElementType;

/// MLIR bytecode starts with these four bytes.
pub(crate) const BYTECODE_MAGIC: &[u8] = b"ML\xefR";

/// What a program uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Uses {
    /// Operation names as `dialect.op`, with a VHLO name given as its StableHLO name
    /// (`vhlo.concatenate_v1` is `stablehlo.concatenate`).
    pub ops: BTreeSet<String>,
    /// The recognised element types, each with whether some tensor of that type has no
    /// elements (a zero in its shape).
    pub types: Vec<(ElementType, bool)>,
    /// Text only: some shape has a zero dimension, whatever its element type is spelled
    /// as (a type alias such as `tensor<0x3x!e>` hides it from `types`).
    pub any_zero_size: bool,
    /// Text only: element types that appear on the same line as a `constant` operation.
    /// `None` for bytecode, where a constant cannot be tied to its type this cheaply.
    pub constant_types: Option<Vec<ElementType>>,
    /// Bytecode only: some integer attribute has type `index` (the text form's `5 :
    /// index`), builtin or VHLO.
    pub index_attribute: bool,
    /// The first tensor type found whose size in bits passes 2**63 - 1, described.
    pub oversize: Option<String>,
}

impl Uses {
    /// Records a use of `ty`, in a tensor with no elements when `zero_size`.
    pub(crate) fn note(&mut self, ty: ElementType, zero_size: bool) {
        match self.types.iter_mut().find(|(t, _)| *t == ty) {
            Some((_, z)) => *z |= zero_size,
            None => self.types.push((ty, zero_size)),
        }
    }

    /// Records `what[dims]` of `bits`-bit elements when it passes 2**63 - 1 bits.
    pub(crate) fn size(&mut self, what: impl std::fmt::Display, dims: &[i64], bits: usize) {
        if self.oversize.is_none() && crate::dtype::exceeds_array_bits(dims, bits) {
            self.oversize = Some(crate::dtype::array_bits_text(what, dims, bits));
        }
    }

    /// Whether `ty` is used, and if so whether in a tensor with no elements.
    #[cfg(test)]
    fn zero_size(&self, ty: ElementType) -> Option<bool> {
        self.types.iter().find(|(t, _)| *t == ty).map(|(_, z)| *z)
    }
}

/// The element type an MLIR type spelling names, for the types the screen needs.
fn text_element_type(name: &str) -> Option<ElementType> {
    Some(match name {
        "f6E2M3FN" => ElementType::F6E2M3FN,
        "f6E3M2FN" => ElementType::F6E3M2FN,
        "f4E2M1FN" => ElementType::F4E2M1FN,
        "f8E8M0FNU" => ElementType::F8E8M0FNU,
        "i2" | "si2" => ElementType::S2,
        "ui2" => ElementType::U2,
        _ => return None,
    })
}

/// Bits of one element of an MLIR element type, for the size check (`i1`, XLA's PRED, is
/// stored in a byte; `complex` counts as the widest, 128).
fn text_element_bits(name: &str) -> Option<usize> {
    Some(match name {
        "i1" => 8,
        "index" | "f64" => 64,
        "complex" => 128,
        "bf16" | "f16" => 16,
        "tf32" | "f32" => 32,
        _ if name.starts_with("f8E") || name.starts_with("f6E") => 8,
        _ if name.starts_with("f4E") => 4,
        _ => {
            let n = ["si", "ui", "i"]
                .iter()
                .find_map(|p| name.strip_prefix(p))?;
            n.parse().ok().filter(|&w| w > 0)?
        }
    })
}

/// Reads a program in either form; `None` for bytecode that cannot be read.
pub(crate) fn uses(code: &[u8]) -> Option<Uses> {
    if code.starts_with(BYTECODE_MAGIC) {
        Bytecode::read(code).map(|b| b.uses())
    } else {
        Some(text_uses(code))
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$'
}

/// `dialect.op` of an operation token, VHLO names mapped to StableHLO.
fn op_name(dialect: &str, op: &str) -> String {
    if dialect == "vhlo" {
        let base = match op.rfind("_v") {
            Some(i) if op[i + 2..].bytes().all(|b| b.is_ascii_digit()) && i + 2 < op.len() => {
                &op[..i]
            }
            _ => op,
        };
        return format!("stablehlo.{base}");
    }
    format!("{dialect}.{op}")
}

/// The text with every `//` comment (outside string literals) turned into spaces, up to
/// its line's end: a comment may hold anything (an old signature, a note naming an
/// operation or a type), and the scans of a program's text read code only. Byte offsets
/// are kept, so positions found in the result are positions in `code`.
fn blank_comments(code: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !code.windows(2).any(|w| w == b"//") {
        return std::borrow::Cow::Borrowed(code);
    }
    let mut out = code.to_vec();
    let (mut in_str, mut esc, mut in_comment) = (false, false, false);
    for i in 0..out.len() {
        let b = out[i];
        if in_comment {
            if b == b'\n' {
                in_comment = false;
            } else {
                out[i] = b' ';
            }
            continue;
        }
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') | (false, b'\n') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'/' if out.get(i + 1) == Some(&b'/') => {
                in_comment = true;
                out[i] = b' ';
            }
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The text with the whitespace inside `<...>` removed (MLIR accepts
/// `tensor<0 x 3 x f6E2M3FN>`, even across lines), so that a shape reads as one token.
/// The `>` of `->` closes nothing.
fn squeeze_angles(code: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(code.len());
    let mut depth = 0usize;
    for (k, &b) in code.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' if depth > 0 && k > 0 && code[k - 1] != b'-' => depth -= 1,
            _ if depth > 0 && b.is_ascii_whitespace() => continue,
            _ => {}
        }
        out.push(b);
    }
    out
}

fn text_uses(code: &[u8]) -> Uses {
    let mut out = Uses {
        constant_types: Some(Vec::new()),
        ..Uses::default()
    };
    let code = squeeze_angles(&blank_comments(code));
    for line in code.split(|&b| b == b'\n') {
        let mut line_types = Vec::new();
        let mut line_has_constant = false;
        let mut i = 0;
        while i < line.len() {
            if !is_ident(line[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < line.len() && is_ident(line[i]) {
                i += 1;
            }
            let prev = start.checked_sub(1).map(|p| line[p]);
            // SSA values, symbols, block labels, attributes and dialect types are not ops.
            if matches!(prev, Some(b'%' | b'@' | b'^' | b'#' | b'!')) {
                continue;
            }
            let token = String::from_utf8_lossy(&line[start..i]);
            if let Some((dialect, op)) = token.split_once('.') {
                if matches!(
                    dialect,
                    "stablehlo" | "mhlo" | "chlo" | "vhlo" | "func" | "sdy" | "builtin"
                ) && !op.is_empty()
                    && !op.contains('.')
                {
                    let name = op_name(dialect, op);
                    if name.ends_with(".constant") {
                        line_has_constant = true;
                    }
                    out.ops.insert(name);
                }
                continue;
            }
            // A shape token: `4x0xf32`, `?x3xi2`, or a bare type `f32`.
            let parts: Vec<&str> = token.split('x').collect();
            let (dims, ty) = parts.split_at(parts.len() - 1);
            let dims_ok = dims
                .iter()
                .all(|d| !d.is_empty() && (*d == "?" || d.bytes().all(|b| b.is_ascii_digit())));
            let zero_dim = dims_ok && dims.iter().any(|d| d.bytes().all(|b| b == b'0'));
            // A shape with a zero: `0x3xf32`, or `0x3x` before `!alias` (an element type
            // spelled elsewhere). `0x7F` (hex, a digit after the x) is not one.
            out.any_zero_size |=
                zero_dim && ty[0].bytes().next().is_none_or(|b| b.is_ascii_alphabetic());
            if let (true, false, Some(w)) = (dims_ok, dims.is_empty(), text_element_bits(ty[0])) {
                // `?` (dynamic) is left out; a dimension past i64 counts as i64::MAX. The
                // size is checked first: the dims are gathered only for a refusal.
                let dim = |d: &&str| match d.parse() {
                    Ok(n) => n,
                    Err(_) if *d == "?" => -1,
                    Err(_) => i64::MAX,
                };
                let bits = (dims.iter().map(dim).filter(|&n| n >= 0))
                    .fold(w as u128, |t, n| t.saturating_mul(n as u128));
                if bits > crate::dtype::MAX_ARRAY_BITS {
                    out.size(ty[0], &dims.iter().map(dim).collect::<Vec<i64>>(), w);
                }
            }
            let ty = if dims_ok {
                text_element_type(ty[0])
            } else {
                text_element_type(&token)
            };
            if let Some(ty) = ty {
                out.note(ty, zero_dim);
                if !line_types.contains(&ty) {
                    line_types.push(ty);
                }
            }
        }
        if line_has_constant {
            if let Some(c) = out.constant_types.as_mut() {
                for ty in line_types {
                    if !c.contains(&ty) {
                        c.push(ty);
                    }
                }
            }
        }
    }
    out
}

use crate::raw::bytecode::{read_section, read_usize, read_varint, string_section};

/// The sections of a bytecode file that rpjrt reads.
struct Bytecode<'a> {
    version: u64,
    strings: Vec<&'a [u8]>,
    dialect: &'a [u8],
    attr_type: Option<&'a [u8]>,
    offsets: Option<&'a [u8]>,
    ir: Option<&'a [u8]>,
    properties: Option<&'a [u8]>,
}

/// Dialect names and operation names of the dialect section.
struct DialectSection {
    dialects: Vec<String>,
    ops: Vec<String>,
}

impl<'a> Bytecode<'a> {
    fn read(code: &'a [u8]) -> Option<Bytecode<'a>> {
        let mut pos = BYTECODE_MAGIC.len();
        if !code.starts_with(BYTECODE_MAGIC) {
            return None;
        }
        let version = read_varint(code, &mut pos)?;
        // Producer string, NUL-terminated.
        let end = code.get(pos..)?.iter().position(|&b| b == 0)?;
        pos += end + 1;
        let (mut strings, mut dialect, mut attr_type, mut offsets) = (None, None, None, None);
        let (mut ir, mut properties) = (None, None);
        while pos < code.len() {
            let (id, data) = read_section(code, &mut pos)?;
            match id {
                0 => strings = Some(string_section(data)?),
                1 => dialect = Some(data),
                2 => attr_type = Some(data),
                3 => offsets = Some(data),
                4 => ir = Some(data),
                8 => properties = Some(data),
                _ => {}
            }
        }
        Some(Bytecode {
            version,
            strings: strings?,
            dialect: dialect?,
            attr_type,
            offsets,
            ir,
            properties,
        })
    }

    fn string(&self, index: u64) -> Option<String> {
        let s = self.strings.get(usize::try_from(index).ok()?)?;
        Some(String::from_utf8_lossy(s).into_owned())
    }

    fn dialect_section(&self) -> Option<DialectSection> {
        let data = self.dialect;
        let mut p = 0;
        let count = read_usize(data, &mut p)?;
        if count > data.len() {
            return None;
        }
        let mut dialects = Vec::with_capacity(count);
        for _ in 0..count {
            let mut v = read_varint(data, &mut p)?;
            // From version 1 on, the low bit says a dialect version (a nested section) follows.
            if self.version >= 1 {
                let has_version = v & 1 == 1;
                v >>= 1;
                if has_version {
                    read_section(data, &mut p)?;
                }
            }
            dialects.push(self.string(v)?);
        }
        // Operation names, grouped by dialect; from version 5 on, after a total count and
        // with a "registered" flag in each name's low bit.
        let mut ops = Vec::new();
        let total = if self.version >= 5 {
            Some(read_usize(data, &mut p)?)
        } else {
            None
        };
        while p < data.len() && total.is_none_or(|t| ops.len() < t) {
            let d = read_usize(data, &mut p)?;
            let dialect = dialects.get(d)?;
            let n = read_usize(data, &mut p)?;
            if n > data.len() {
                return None;
            }
            for _ in 0..n {
                let mut v = read_varint(data, &mut p)?;
                if self.version >= 5 {
                    v >>= 1;
                }
                ops.push(op_name(dialect, &self.string(v)?));
            }
        }
        Some(DialectSection { dialects, ops })
    }

    /// The attribute and type tables: for each entry, its dialect and its bytes, with
    /// whether the bytes are the dialect's own encoding (else they are its text).
    #[allow(clippy::type_complexity)]
    fn table(
        &self,
        dialects: &[String],
    ) -> Option<(Vec<(String, bool, &'a [u8])>, Vec<(String, bool, &'a [u8])>)> {
        let (Some(data), Some(offsets)) = (self.attr_type, self.offsets) else {
            return Some((Vec::new(), Vec::new()));
        };
        let mut p = 0;
        let n_attrs = read_usize(offsets, &mut p)?;
        let n_types = read_usize(offsets, &mut p)?;
        if n_attrs > offsets.len() || n_types > offsets.len() {
            return None;
        }
        let mut entries = Vec::with_capacity(n_attrs + n_types);
        for total in [n_attrs, n_types] {
            let mut seen = 0;
            while seen < total {
                let dialect = dialects.get(read_usize(offsets, &mut p)?)?;
                let n = read_usize(offsets, &mut p)?;
                if n == 0 || n > total - seen {
                    return None;
                }
                for _ in 0..n {
                    let v = read_varint(offsets, &mut p)?;
                    entries.push((dialect.clone(), v & 1 == 1, usize::try_from(v >> 1).ok()?));
                }
                seen += n;
            }
        }
        let mut at = 0usize;
        let mut attrs = Vec::with_capacity(n_attrs);
        let mut types = Vec::with_capacity(n_types);
        for (i, (dialect, custom, size)) in entries.into_iter().enumerate() {
            let bytes = data.get(at..at.checked_add(size)?)?;
            at += size;
            if i >= n_attrs {
                types.push((dialect, custom, bytes));
            } else {
                attrs.push((dialect, custom, bytes));
            }
        }
        Some((attrs, types))
    }

    fn uses(&self) -> Uses {
        let mut out = Uses::default();
        let Some(section) = self.dialect_section() else {
            return out;
        };
        out.ops = section.ops.iter().cloned().collect();
        let (attrs, types) = self.table(&section.dialects).unwrap_or_default();
        let elements: Vec<Option<ElementType>> = types
            .iter()
            .map(|(d, custom, bytes)| bytecode_element_type(d, *custom, bytes))
            .collect();
        for ty in elements.iter().flatten() {
            out.note(*ty, false);
        }
        out.index_attribute = attrs.iter().any(|(d, custom, bytes)| {
            integer_attribute_type(d, *custom, bytes)
                .and_then(|t| types.get(t))
                .is_some_and(|(d, custom, bytes)| is_index_type(d, *custom, bytes))
        });
        for (dialect, custom, bytes) in &types {
            if let Some((dims, element)) = ranked_tensor(dialect, *custom, bytes) {
                if let Some((d, c, b)) = types.get(element) {
                    if let Some(w) = bytecode_element_bits(d, *c, b) {
                        out.size(format!("tensor of {w}-bit elements"), &dims, w);
                    }
                }
                if let Some(Some(ty)) = elements.get(element) {
                    out.note(*ty, dims.contains(&0));
                }
            }
        }
        out
    }
}

/// The strings of an MLIR bytecode file's string section (`None` when it cannot be read).
pub(crate) fn bytecode_strings(code: &[u8]) -> Option<Vec<String>> {
    let b = Bytecode::read(code)?;
    Some(
        b.strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

/// The dialect names listed in an MLIR bytecode file's dialect section, or `None` when the
/// file cannot be read that far.
pub(crate) fn bytecode_dialects(code: &[u8]) -> Option<Vec<String>> {
    let b = Bytecode::read(code)?;
    Some(b.dialect_section()?.dialects)
}

// Type codes of the builtin and VHLO dialects' own bytecode encodings, for the types the
// screen recognises. Read off bytecode that MLIR's writer (as shipped in jaxlib 0.10) and
// StableHLO's portable-artifact writer produced for one-type programs; these numbers are
// part of the bytecode formats' compatibility promise and do not change.
const BUILTIN_INTEGER: u64 = 0;
const BUILTIN_RANKED_TENSOR: u64 = 13;
const BUILTIN_F6E2M3FN: u64 = 30;
const BUILTIN_F6E3M2FN: u64 = 31;
const VHLO_RANKED_TENSOR: u64 = 20;
const VHLO_I2: u64 = 31;
const VHLO_UI2: u64 = 32;
const VHLO_F4E2M1FN: u64 = 37;
const VHLO_F6E2M3FN: u64 = 38;
const VHLO_F6E3M2FN: u64 = 39;

const BUILTIN_INDEX: u64 = 1;
const VHLO_INDEX: u64 = 9;
// Attribute codes of the integer attributes (builtin `IntegerAttr`, VHLO `IntegerV1Attr`),
// whose encoding starts with the index of their type in the type table.
const BUILTIN_INTEGER_ATTR: u64 = 8;
const VHLO_INTEGER_ATTR: u64 = 9;

/// The type-table index of an integer attribute's type; `None` for any other attribute.
fn integer_attribute_type(dialect: &str, custom: bool, bytes: &[u8]) -> Option<usize> {
    if !custom {
        return None;
    }
    let mut p = 0;
    match (dialect, read_varint(bytes, &mut p)?) {
        ("builtin", BUILTIN_INTEGER_ATTR) | ("vhlo", VHLO_INTEGER_ATTR) => {
            read_usize(bytes, &mut p)
        }
        _ => None,
    }
}

/// Whether a type-table entry is `index` (builtin `IndexType`, VHLO `IndexV1Type`).
fn is_index_type(dialect: &str, custom: bool, bytes: &[u8]) -> bool {
    if !custom {
        return bytes.strip_suffix(&[0]).unwrap_or(bytes) == b"index";
    }
    let mut p = 0;
    matches!(
        (dialect, read_varint(bytes, &mut p)),
        ("builtin", Some(BUILTIN_INDEX)) | ("vhlo", Some(VHLO_INDEX))
    )
}

fn bytecode_element_type(dialect: &str, custom: bool, bytes: &[u8]) -> Option<ElementType> {
    if !custom {
        // A type written as its text, NUL-terminated.
        let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        return text_element_type(std::str::from_utf8(text).ok()?);
    }
    let mut p = 0;
    let code = read_varint(bytes, &mut p)?;
    match (dialect, code) {
        ("builtin", BUILTIN_F6E2M3FN) | ("vhlo", VHLO_F6E2M3FN) => Some(ElementType::F6E2M3FN),
        ("builtin", BUILTIN_F6E3M2FN) | ("vhlo", VHLO_F6E3M2FN) => Some(ElementType::F6E3M2FN),
        ("vhlo", VHLO_F4E2M1FN) => Some(ElementType::F4E2M1FN),
        ("vhlo", VHLO_I2) => Some(ElementType::S2),
        ("vhlo", VHLO_UI2) => Some(ElementType::U2),
        ("builtin", BUILTIN_INTEGER) => {
            // Width and signedness: width << 2 | (0 signless, 1 signed, 2 unsigned).
            let w = read_varint(bytes, &mut p)?;
            match (w >> 2, w & 3) {
                (2, 0 | 1) => Some(ElementType::S2),
                (2, 2) => Some(ElementType::U2),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Bits of one element of a bytecode type-table entry: builtin integers, and VHLO's
/// integer and float types (`None` for others, such as builtin floats).
fn bytecode_element_bits(dialect: &str, custom: bool, bytes: &[u8]) -> Option<usize> {
    let mut p = 0;
    let code = custom.then(|| read_varint(bytes, &mut p))??;
    Some(match (dialect, code) {
        ("builtin", BUILTIN_INTEGER) => match read_varint(bytes, &mut p)? >> 2 {
            1 => 8,
            w => usize::try_from(w).ok().filter(|&w| w > 0)?,
        },
        ("vhlo", 0 | 6 | 7 | 11 | 16) => 8,
        ("vhlo", 2 | 3 | 12 | 17) => 16,
        ("vhlo", 4 | 13 | 18) => 32,
        ("vhlo", 5 | 14 | 19) => 64,
        ("vhlo", 10 | 15 | VHLO_F4E2M1FN) => 4,
        ("vhlo", VHLO_I2 | VHLO_UI2) => 2,
        _ => return None,
    })
}

/// A ranked tensor type's dims and the index of its element type in the type table.
fn ranked_tensor(dialect: &str, custom: bool, bytes: &[u8]) -> Option<(Vec<i64>, usize)> {
    if !custom {
        return None;
    }
    let mut p = 0;
    let code = read_varint(bytes, &mut p)?;
    if !matches!(
        (dialect, code),
        ("builtin", BUILTIN_RANKED_TENSOR) | ("vhlo", VHLO_RANKED_TENSOR)
    ) {
        return None;
    }
    let rank = read_usize(bytes, &mut p)?;
    if rank > bytes.len() {
        return None;
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        // Signed varints are zigzag-encoded.
        let z = read_varint(bytes, &mut p)?;
        dims.push(((z >> 1) as i64) ^ -((z & 1) as i64));
    }
    let element = read_usize(bytes, &mut p)?;
    Some((dims, element))
}

/// The names of the entry function's parameters, from MLIR text: for each parameter of
/// `@main` (or the only public function), in order, its `jax.arg_info` attribute, else
/// its location name (`loc("x")`, which jax.export writes), else its SSA name when the
/// author chose one (`%x`, not `%arg0`); bytecode is read by `bytecode_parameter_names`.
/// `None` for a program without a recognisable entry function, or a parameter without
/// any name (names are all or nothing).
pub(crate) fn entry_parameter_names(code: &[u8]) -> Option<Vec<String>> {
    if code.starts_with(BYTECODE_MAGIC) {
        return bytecode_parameter_names(code);
    }
    let code = blank_comments(code);
    let text = std::str::from_utf8(&code).ok()?;
    let list = entry_parameter_list(text)?;
    let params = split_top_level(list);
    let mut names = Vec::with_capacity(params.len());
    for p in params {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        names.push(parameter_name(p)?);
    }
    Some(names)
}

/// The entry function's signature in MLIR text, from its parameter list to its body.
pub(crate) fn entry_signature(code: &[u8]) -> Option<String> {
    let code = blank_comments(code);
    let text = std::str::from_utf8(&code).ok()?;
    let open = entry_parameter_list(text)?.as_ptr() as usize - text.as_ptr() as usize - 1;
    let body = scan_outside_strings(&code, open, |_, b, d| b == b'{' && d == 1)?;
    Some(text[open..body].trim_end().to_string())
}

/// The text between the parentheses of the entry function's parameter list.
fn entry_parameter_list(text: &str) -> Option<&str> {
    let mut at = None;
    let mut publics = Vec::new();
    // Only the `func.func`s of code: not one inside a string literal (an attribute).
    let bytes = text.as_bytes();
    let mut starts = Vec::new();
    scan_outside_strings(bytes, 0, |i, _, _| {
        if bytes[i..].starts_with(b"func.func") {
            starts.push(i);
        }
        false
    });
    for (k, &start) in starts.iter().enumerate() {
        let from = start + "func.func".len();
        // The parameter list opens before the next function: a search to the end of the
        // text for each `func.func` took quadratic time.
        let rest = &text[from..starts.get(k + 1).copied().unwrap_or(text.len())];
        let Some(open) = rest.find('(') else {
            continue;
        };
        let head = rest[..open].trim();
        let is_public = !head.contains("private") && !head.contains("nested");
        let name = head.rsplit('@').next().unwrap_or("").trim();
        if name == "main" {
            at = Some(from + open);
            break;
        }
        if is_public {
            publics.push(from + open);
        }
    }
    let open = match (at, publics.as_slice()) {
        (Some(o), _) => o,
        (None, [only]) => *only,
        _ => return None,
    };
    let close = scan_outside_strings(text.as_bytes(), open, |_, b, depth| {
        depth == 0 && matches!(b, b')' | b'>' | b'}' | b']')
    })?;
    text.get(open + 1..close)
}

/// Walks `bytes` from `from`, skipping string literals, and calls `visit(index, byte, depth)`
/// for every byte outside them with the bracket depth after that byte (`->` is an arrow,
/// not a closing bracket). Returns the first index where `visit` says stop.
fn scan_outside_strings(
    bytes: &[u8],
    from: usize,
    mut visit: impl FnMut(usize, u8, i32) -> bool,
) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for (i, &b) in bytes.iter().enumerate().skip(from) {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                continue;
            }
            b'(' | b'<' | b'{' | b'[' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => continue,
            b')' | b'>' | b'}' | b']' => depth -= 1,
            _ => {}
        }
        if visit(i, b, depth) {
            return Some(i);
        }
    }
    None
}

/// `s` split at the commas outside brackets and strings.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    scan_outside_strings(s.as_bytes(), 0, |i, b, depth| {
        if b == b',' && depth == 0 {
            out.push(&s[start..i]);
            start = i + 1;
        }
        false
    });
    out.push(&s[start..]);
    out
}

/// The first string literal after `key` in `s` (unescaped for `\"` and `\\`).
fn string_after(s: &str, key: &str) -> Option<String> {
    let at = s.find(key)? + key.len();
    let rest = &s[at..];
    let q = rest.find('"')?;
    let mut out = String::new();
    let mut esc = false;
    for c in rest[q + 1..].chars() {
        match (esc, c) {
            (true, c) => {
                out.push(c);
                esc = false;
            }
            (false, '\\') => esc = true,
            (false, '"') => return Some(out),
            (false, c) => out.push(c),
        }
    }
    None
}

/// One parameter's name: `jax.arg_info`, then `loc("...")`, then a chosen SSA name.
fn parameter_name(p: &str) -> Option<String> {
    if let Some(n) = string_after(p, "jax.arg_info").filter(|n| !n.is_empty()) {
        return Some(n);
    }
    if let Some(at) = p.find("loc(") {
        let rest = p[at + 4..].trim_start();
        if rest.starts_with('"') {
            if let Some(n) = string_after(rest, "").filter(|n| !n.is_empty()) {
                return Some(n);
            }
        }
    }
    let ssa = p.strip_prefix('%')?;
    let end = ssa
        .find(|c: char| c == ':' || c.is_whitespace())
        .unwrap_or(ssa.len());
    let name = &ssa[..end];
    let generic = name
        .strip_prefix("arg")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    let numeric = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
    (!name.is_empty() && !generic && !numeric).then(|| name.to_string())
}

// Builtin attribute codes of MLIR's bytecode encoding (BuiltinDialectBytecode), part of
// the format's compatibility promise.
const BUILTIN_DICTIONARY: u64 = 1;
const BUILTIN_STRING: u64 = 2;
const BUILTIN_NAME_LOC: u64 = 14;
// Bytecode versions that changed what the IR section holds.
const V_LAZY_LOADING: u64 = 2;
const V_USE_LIST_ORDERING: u64 = 3;
const V_ELIDE_UNKNOWN_ARG_LOC: u64 = 4;
const V_PROPERTIES: u64 = 5;
// The operation encoding mask.
const OP_HAS_ATTRS: u8 = 0x01;
const OP_HAS_RESULTS: u8 = 0x02;
const OP_HAS_OPERANDS: u8 = 0x04;
const OP_HAS_SUCCESSORS: u8 = 0x08;
const OP_HAS_REGIONS: u8 = 0x10;
const OP_HAS_USE_LIST_ORDERS: u8 = 0x20;
const OP_HAS_PROPERTIES: u8 = 0x40;

/// One function of the module's top-level block: its attribute dictionary (an attribute
/// index) and, for each parameter of its entry block, its location (an attribute index;
/// `None` for an unknown location).
struct FuncOp {
    attrs: Option<usize>,
    props: Option<usize>,
    args: Vec<Option<usize>>,
}

/// A reader over the IR section: the module op, its top-level block, and for each function
/// op in it the entry block's parameter locations. Everything else is skipped.
struct IrReader<'b> {
    version: u64,
    ops: &'b [String],
    /// When set: the ops whose regions are being read, each call, composite, custom call
    /// and function op as (name, enclosing ops, attribute dictionary, properties entry,
    /// enclosing function: its index in this list), and the functions being read.
    #[allow(clippy::type_complexity)]
    nest: Option<std::cell::RefCell<(Vec<String>, Vec<Walked>, Vec<usize>)>>,
}

impl IrReader<'_> {
    /// Skips a use-list order of a range of `n` values.
    fn skip_use_list(&self, d: &[u8], p: &mut usize, n: usize) -> Option<()> {
        let count = if n > 1 { read_usize(d, p)? } else { 1 };
        for _ in 0..count.min(d.len()) {
            if n > 1 {
                read_varint(d, p)?;
            }
            let len = read_usize(d, p)? >> 1;
            if len > d.len() {
                return None;
            }
            for _ in 0..len {
                read_varint(d, p)?;
            }
        }
        Some(())
    }

    /// Reads a block header: (number of ops, the arguments' locations).
    fn block_header(&self, d: &[u8], p: &mut usize) -> Option<(usize, Vec<Option<usize>>)> {
        let v = read_usize(d, p)?;
        let (n_ops, has_args) = (v >> 1, v & 1 == 1);
        let mut args = Vec::new();
        if has_args {
            let n = read_usize(d, p)?;
            if n > d.len() {
                return None;
            }
            for _ in 0..n {
                if self.version >= V_ELIDE_UNKNOWN_ARG_LOC {
                    let t = read_usize(d, p)?;
                    args.push(if t & 1 == 1 {
                        Some(read_usize(d, p)?)
                    } else {
                        None
                    });
                } else {
                    read_usize(d, p)?;
                    args.push(Some(read_usize(d, p)?));
                }
            }
            if self.version >= V_USE_LIST_ORDERING {
                let mask = *d.get(*p)?;
                *p += 1;
                if mask & OP_HAS_USE_LIST_ORDERS != 0 {
                    self.skip_use_list(d, p, n)?;
                }
            }
        }
        Some((n_ops, args))
    }

    /// Reads (or skips) one operation. With `funcs`, the op is in the module's top-level
    /// block: a function op's entry-block parameter locations are noted there.
    fn op(
        &self,
        d: &[u8],
        p: &mut usize,
        depth: usize,
        funcs: Option<&mut Vec<FuncOp>>,
    ) -> Option<Vec<FuncOp>> {
        if depth > 64 {
            return None;
        }
        let name = self.ops.get(read_usize(d, p)?)?;
        let mask = *d.get(*p)?;
        *p += 1;
        read_varint(d, p)?; // location
        let attrs = if mask & OP_HAS_ATTRS != 0 {
            Some(read_usize(d, p)?)
        } else {
            None
        };
        let props = if mask & OP_HAS_PROPERTIES != 0 && self.version >= V_PROPERTIES {
            Some(read_usize(d, p)?)
        } else {
            None
        };
        let mut n_results = 0;
        if mask & OP_HAS_RESULTS != 0 {
            n_results = read_usize(d, p)?;
            if n_results > d.len() {
                return None;
            }
            for _ in 0..n_results {
                read_varint(d, p)?;
            }
        }
        for bit in [OP_HAS_OPERANDS, OP_HAS_SUCCESSORS] {
            if mask & bit != 0 {
                let n = read_usize(d, p)?;
                if n > d.len() {
                    return None;
                }
                for _ in 0..n {
                    read_varint(d, p)?;
                }
            }
        }
        if mask & OP_HAS_USE_LIST_ORDERS != 0 {
            self.skip_use_list(d, p, n_results)?;
        }
        // Names as the dialect section gives them (VHLO's `func_v1` reads `stablehlo.func`).
        let is_module = name == "builtin.module" || name == "stablehlo.module";
        let is_func = name == "func.func" || name == "stablehlo.func";
        let mut found = Vec::new();
        if let Some(mut n) = self.nest.as_ref().map(|n| n.borrow_mut()) {
            if name.ends_with("call") || name.ends_with(".composite") || is_func {
                let (outer, func, i) = (n.0.clone(), n.2.last().copied(), n.1.len());
                n.1.push((name.clone(), outer, attrs, props, func));
                n.2.extend(is_func.then_some(i));
            }
            n.0.push(name.clone());
        }
        if mask & OP_HAS_REGIONS != 0 {
            let v = read_usize(d, p)?;
            let (n_regions, isolated) = (v >> 1, v & 1 == 1);
            let mut owned;
            let (data, pos): (&[u8], &mut usize) = if isolated && self.version >= V_LAZY_LOADING {
                let (_, section) = read_section(d, p)?;
                owned = 0;
                (section, &mut owned)
            } else {
                (d, p)
            };
            for r in 0..n_regions.min(data.len()) {
                let n_blocks = read_usize(data, pos)?;
                if n_blocks == 0 {
                    continue;
                }
                read_varint(data, pos)?; // values in the region
                for b in 0..n_blocks.min(data.len()) {
                    let (n_ops, args) = self.block_header(data, pos)?;
                    if is_func && funcs.is_some() && r == 0 && b == 0 {
                        found.push(FuncOp { attrs, props, args });
                    }
                    for _ in 0..n_ops.min(data.len()) {
                        if is_module && depth == 0 {
                            let mut inner = Vec::new();
                            self.op(data, pos, depth + 1, Some(&mut inner))?;
                            found.extend(inner);
                        } else {
                            self.op(data, pos, depth + 1, None)?;
                        }
                    }
                }
            }
        }
        if let Some(n) = &self.nest {
            let n = &mut *n.borrow_mut();
            n.0.pop();
            n.2.truncate(n.2.len().saturating_sub(usize::from(is_func)));
        }
        match funcs {
            Some(out) => {
                out.extend(found);
                Some(Vec::new())
            }
            None => Some(found),
        }
    }
}

type Walked = (
    String,
    Vec<String>,
    Option<usize>,
    Option<usize>,
    Option<usize>,
);

/// Each call, composite, custom call and function op of MLIR bytecode with the ops
/// enclosing it, the function holding it and the symbol names it may give or call
/// (`screen`); `None` when the bytecode cannot be read.
pub(crate) fn bytecode_call_nesting(code: &[u8]) -> Option<Vec<crate::raw::ffi::WalkedOp>> {
    let b = Bytecode::read(code)?;
    let section = b.dialect_section()?;
    let (attrs, _) = b.table(&section.dialects).unwrap_or_default();
    let props = crate::raw::bytecode::property_entries(b.properties);
    let reader = IrReader {
        version: b.version,
        ops: &section.ops,
        nest: Some(Default::default()),
    };
    let (ir, mut p) = (b.ir?, 0);
    let (n_ops, _) = reader.block_header(ir, &mut p)?;
    for _ in 0..n_ops.min(ir.len()) {
        reader.op(ir, &mut p, 0, None)?;
    }
    let walked = reader.nest?.into_inner().1;
    let names = |p, a| crate::raw::bytecode::symbol_names(&attrs, &b.strings, &props, p, a);
    let walked = walked.into_iter().map(|(op, outer, a, p, func)| {
        let names = names(p, a);
        crate::raw::ffi::WalkedOp {
            op,
            outer,
            names,
            func,
        }
    });
    Some(walked.collect())
}

/// The entry function's parameter names in MLIR bytecode (plain or a portable artifact):
/// the name locations of its entry block's parameters (`loc("x")`, as jax.export writes
/// them). The entry is the module's only function, or the one whose attributes name it
/// `main`; `None` when that cannot be told or a parameter has no name location.
fn bytecode_parameter_names(code: &[u8]) -> Option<Vec<String>> {
    let b = Bytecode::read(code)?;
    let section = b.dialect_section()?;
    let (attrs, _) = b.table(&section.dialects)?;
    let reader = IrReader {
        version: b.version,
        ops: &section.ops,
        nest: None,
    };
    let ir = b.ir?;
    let mut p = 0;
    let (n_ops, _) = reader.block_header(ir, &mut p)?;
    if n_ops != 1 {
        return None;
    }
    let funcs = reader.op(ir, &mut p, 0, None)?;
    // The builtin custom encoding of an attribute: its code and the varints after it.
    let builtin = |i: usize| -> Option<(u64, Vec<u64>)> {
        let (dialect, custom, bytes) = attrs.get(i)?;
        if dialect != "builtin" || !custom {
            return None;
        }
        let mut q = 0;
        let code = read_varint(bytes, &mut q)?;
        let mut rest = Vec::new();
        while q < bytes.len() && rest.len() < 4096 {
            rest.push(read_varint(bytes, &mut q)?);
        }
        Some((code, rest))
    };
    let string_attr = |i: usize| -> Option<String> {
        match builtin(i)? {
            (BUILTIN_STRING, v) if v.len() == 1 => b.string(v[0]),
            _ => None,
        }
    };
    // Whether an attribute (any dialect's encoding) holds exactly the string "main".
    let main_index = b.strings.iter().position(|s| *s == b"main");
    let names_main = |i: usize| -> bool {
        let Some((dialect, custom, bytes)) = attrs.get(i) else {
            return false;
        };
        if !custom {
            return bytes.strip_suffix(&[0]).unwrap_or(bytes) == b"\"main\"";
        }
        let mut q = 0;
        let code = read_varint(bytes, &mut q);
        // A builtin string, or VHLO's (whose code is its own): the code, then the string.
        if dialect != "vhlo" && code != Some(BUILTIN_STRING) {
            return false;
        }
        let rest = bytes.get(q..).unwrap_or_default();
        let mut r = 0;
        main_index.is_some_and(|m| read_varint(rest, &mut r) == Some(m as u64) && r == rest.len())
    };
    // A function's properties entry lists its inherent attributes (the name among them)
    // as attribute indices, among flags for the absent optional ones.
    let property_entries = crate::raw::bytecode::property_entries(b.properties);
    let props_name_main = |i: usize| -> bool {
        let Some(entry) = property_entries.get(i) else {
            return false;
        };
        let mut q = 0;
        let mut any = false;
        while q < entry.len() {
            match read_varint(entry, &mut q) {
                Some(v) => any |= usize::try_from(v).is_ok_and(names_main),
                None => return false,
            }
        }
        any
    };
    let is_main = |f: &FuncOp| -> bool {
        if f.props.is_some_and(props_name_main) {
            return true;
        }
        let Some((BUILTIN_DICTIONARY, v)) = f.attrs.and_then(builtin) else {
            return false;
        };
        // The count comes from the file: only the (key, value) pairs present are read.
        let n = usize::try_from(v.first().copied().unwrap_or(0)).unwrap_or(usize::MAX);
        v.get(1..)
            .unwrap_or_default()
            .chunks_exact(2)
            .take(n)
            .any(|kv| {
                let (Ok(key), Ok(value)) = (usize::try_from(kv[0]), usize::try_from(kv[1])) else {
                    return false;
                };
                string_attr(key).as_deref() == Some("sym_name") && names_main(value)
            })
    };
    let entry = match funcs.as_slice() {
        [only] => only,
        many => {
            let mut mains = many.iter().filter(|f| is_main(f));
            let first = mains.next()?;
            if mains.next().is_some() {
                return None;
            }
            first
        }
    };
    entry
        .args
        .iter()
        .map(|loc| match builtin((*loc)?)? {
            (BUILTIN_NAME_LOC, v) if !v.is_empty() => {
                string_attr(usize::try_from(v[0]).ok()?).filter(|n| !n.is_empty())
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // `@main(%a: tensor<0x2xf6E2M3FN>, %b: tensor<3xui2>) -> tensor<6xui2>` concatenating
    // `%b` with itself, written as plain bytecode (version 6) by jaxlib's MLIR and as a
    // StableHLO 1.17 portable artifact.
    const PLAIN: &str = "4d4cef520d4d4c495232332e302e3067697400011f070105090901030f030507130503170331170f01170b130b0b0b1313130f1313010f17130b131b070f0279050d170101010d09050f0511170103031701033117010365110d011701050f170107051b0501090b1b030d0501151b0319050505010303073d0102040453050150030107044303010503500b0307042f03070b05030d070f00074613050307050303050415030506030105010093130f0b05190f0f150b116275696c74696e0066756e6300737461626c65686c6f006d6f64756c650072657475726e00636f6e636174656e617465002d006d61696e007075626c696300081b070501010d0105010107130311";
    const PORTABLE: &str = "4d4cef520d537461626c65484c4f5f76312e31372e300001190501050901030b03070f13170337190f010f0b131313131313030b0b0b0b0b0f030f171307131b07070277050d1701030317010507170105351701056f170107151701090b030123091d0f1d11130d01290501090b29030d0541290319051105010303074d1d045305015003010704430301050350050307042f03070b05030707090005460b05030705030307040d03050603010501009b130f0b05151f110f0b116275696c74696e0076686c6f006d6f64756c650066756e635f763100636f6e636174656e6174655f76310072657475726e5f7631002d006d61696e007075626c6963000819070501010b0f110f13150317";

    #[test]
    fn varints() {
        let mut p = 0;
        assert_eq!(read_varint(&[0b0000_0011], &mut p), Some(1));
        let mut p = 0;
        // Two bytes: low bit 0, next bit 1.
        assert_eq!(read_varint(&[0b0000_0110, 0x01], &mut p), Some(0x40 + 1));
        assert_eq!(p, 2);
        let mut p = 0;
        assert_eq!(read_varint(&[0b0000_0010], &mut p), None);
        assert_eq!(read_varint(b"", &mut 0), None);
    }

    #[test]
    fn text_ops_and_types() {
        let u = uses(
            b"func.func public @main(%a: tensor<2x3xi2>, %i2: tensor<0x3xf6E2M3FN>) -> tensor<2x6xi2> {\n\
              %r = stablehlo.concatenate %a, %a, dim = 1 : (tensor<2x3xi2>, tensor<2x3xi2>) -> tensor<2x6xi2>\n\
              %c = stablehlo.constant dense<1.0> : tensor<2xf6E3M2FN>\n\
              %g = \"stablehlo.gather\"(%a) {d = #stablehlo.scatter<>} : (tensor<2x3xi2>) -> tensor<2x3xi2>\n\
              return %r : tensor<2x6xi2> }",
        )
        .unwrap();
        let ops: Vec<&str> = u.ops.iter().map(String::as_str).collect();
        assert_eq!(
            ops,
            [
                "func.func",
                "stablehlo.concatenate",
                "stablehlo.constant",
                "stablehlo.gather"
            ]
        );
        assert_eq!(u.zero_size(ElementType::S2), Some(false));
        assert_eq!(u.zero_size(ElementType::F6E2M3FN), Some(true));
        assert_eq!(u.zero_size(ElementType::F6E3M2FN), Some(false));
        let c = u.constant_types.unwrap();
        assert!(c.contains(&ElementType::F6E3M2FN) && !c.contains(&ElementType::S2));
    }

    #[test]
    fn text_shapes_with_spaces_or_aliases_are_read() {
        let u =
            uses(b"func.func @main(%a: tensor<0 x 3 x f6E2M3FN>) -> tensor<0 x\n 3xf32>").unwrap();
        assert_eq!(u.zero_size(ElementType::F6E2M3FN), Some(true));
        assert!(u.any_zero_size);
        let u =
            uses(b"!e = f6E2M3FN\nfunc.func @main(%a: tensor<0x3x!e>) -> tensor<0x3x!e>").unwrap();
        assert_eq!(u.zero_size(ElementType::F6E2M3FN), Some(false));
        assert!(u.any_zero_size);
        let u =
            uses(b"%c = stablehlo.constant dense<0x7F> : tensor<2xf32> -> tensor<3xf32>").unwrap();
        assert!(!u.any_zero_size);
        assert!(u.ops.contains("stablehlo.constant"));
    }

    #[test]
    fn text_ignores_names_and_hex() {
        let u = uses(b"%i2 = stablehlo.constant dense<0x7F> : tensor<f32> // ui2x").unwrap();
        assert!(u.types.is_empty(), "{u:?}");
    }

    #[test]
    fn bytecode_types_and_ops() {
        for (form, code, ret) in [
            ("plain", PLAIN, "func.return"),
            ("portable", PORTABLE, "stablehlo.return"),
        ] {
            let u = uses(&hex(code)).unwrap();
            assert_eq!(
                u.zero_size(ElementType::F6E2M3FN),
                Some(true),
                "{form}: {u:?}"
            );
            assert_eq!(u.zero_size(ElementType::U2), Some(false), "{form}: {u:?}");
            assert!(u.ops.contains("stablehlo.concatenate"), "{form}: {u:?}");
            assert!(u.ops.contains(ret), "{form}: {u:?}");
            assert_eq!(u.constant_types, None);
        }
        assert_eq!(
            bytecode_dialects(&hex(PORTABLE)).unwrap(),
            ["builtin", "vhlo"]
        );
        assert_eq!(
            bytecode_dialects(&hex(PLAIN)).unwrap(),
            ["builtin", "func", "stablehlo"]
        );
    }

    #[test]
    fn damaged_bytecode_never_panics() {
        let good = hex(PORTABLE);
        for cut in 0..good.len() {
            let _ = uses(&good[..cut]);
        }
        for i in 4..good.len() {
            for b in [0x00, 0xff, 0x01, 0x80] {
                let mut bad = good.clone();
                bad[i] = b;
                let _ = uses(&bad);
            }
        }
    }

    #[test]
    fn entry_signature_from_text() {
        let sig = |t: &str| entry_signature(t.as_bytes());
        let t = "func.func @main(%a: tensor<3x4xf32> {mhlo.sharding = \"{devices=[2,1]<=[2]}\"})\n    -> (tensor<4xf32> {mhlo.sharding = \"{replicated}\"}) {\n  return\n}";
        assert_eq!(
            sig(t).as_deref(),
            Some("(%a: tensor<3x4xf32> {mhlo.sharding = \"{devices=[2,1]<=[2]}\"})\n    -> (tensor<4xf32> {mhlo.sharding = \"{replicated}\"})")
        );
        assert_eq!(
            sig("func.func @main() -> () {\n return\n}").as_deref(),
            Some("() -> ()")
        );
        assert_eq!(
            sig("func.func @main(%a: tensor<f32>) -> tensor<f32> attributes {x} {").as_deref(),
            // A function attribute dictionary ends it early; the types before it stand.
            Some("(%a: tensor<f32>) -> tensor<f32> attributes")
        );
        assert_eq!(sig("ML\u{ef}R"), None);
    }

    #[test]
    fn entry_parameter_names_from_text() {
        let names = |t: &str| entry_parameter_names(t.as_bytes());
        assert_eq!(
            names(
                "func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {"
            ),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        // jax.export text: generic SSA names, the Python names as locations.
        let jax = r#"module @jit_f {
  func.func public @main(%arg0: tensor<8xf32> {mhlo.sharding = "{replicated}"} loc("params['w']"), %arg1: tensor<2x3xf32> loc("lr")) -> (tensor<8xf32> {jax.result_info = "result"}) {"#;
        assert_eq!(
            names(jax),
            Some(vec!["params['w']".to_string(), "lr".to_string()])
        );
        let info = r#"func.func @main(%arg0: tensor<f32> {jax.arg_info = "x", mhlo.sharding = "{replicated}"}) -> tensor<f32> {"#;
        assert_eq!(names(info), Some(vec!["x".to_string()]));
        // Generic names only: the program carries none.
        assert_eq!(
            names("func.func @main(%arg0: tensor<f32>, %arg1: tensor<f32>) -> tensor<f32> {"),
            None
        );
        assert_eq!(names("func.func @main() -> tensor<f32> {"), Some(vec![]));
        // A private helper before the entry is not the entry.
        let two = "func.func private @h(%q: tensor<f32>) -> tensor<f32> {}\nfunc.func @main(%p: tensor<f32>) {";
        assert_eq!(names(two), Some(vec!["p".to_string()]));
        assert_eq!(names("ML\u{ef}R"), None);
        assert_eq!(names("not mlir at all"), None);
    }

    #[test]
    fn comments_and_strings_are_not_code() {
        let names = |t: &str| entry_parameter_names(t.as_bytes());
        let ab = Some(vec!["a".to_string(), "b".to_string()]);
        // An old signature in a comment before the entry, with the parameters swapped.
        let commented = "// was: func.func @main(%b: tensor<f32>, %a: tensor<f32>)
                         func.func @main(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {";
        assert_eq!(names(commented), ab);
        // A comment inside the parameter list, with brackets and a comma in it.
        let inside = "func.func @main(%a: tensor<f32>, // the weights (w, v]
                      %b: tensor<f32>) -> tensor<f32> {";
        assert_eq!(names(inside), ab);
        // An attribute string that holds the words of a signature.
        let attr = "module attributes {doc = \"func.func @main(%b: tensor<f32>)\"} {
                    func.func @main(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {";
        assert_eq!(names(attr), ab);
        // `//` inside a string (a location's file URL) is no comment.
        let url = "func.func @main(%arg0: tensor<f32> loc(\"file://x/a\"),                    %arg1: tensor<f32> loc(\"b\")) {";
        assert_eq!(
            names(url),
            Some(vec!["file://x/a".to_string(), "b".to_string()])
        );
        // A type named in a comment is not a type the program uses.
        let uses = text_uses(b"// f8E4M3FN would be smaller\nfunc.func @main(%a: tensor<f32>) {");
        let plain = text_uses(b"func.func @main(%a: tensor<f32>) {");
        assert_eq!(format!("{uses:?}"), format!("{plain:?}"));
    }

    #[test]
    fn entry_parameter_names_from_bytecode() {
        let fixture = |name: &str| {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
            std::fs::read(format!("{path}{name}")).unwrap()
        };
        // jax.export's portable artifact keeps the Python argument names as locations.
        assert_eq!(
            entry_parameter_names(&fixture("mul_add.jax_export.mlirbc")),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(
            entry_parameter_names(&fixture("shardy_sin.jax_export.mlirbc")),
            Some(vec!["a".to_string()])
        );
        // Two functions: the entry is the one named main (its private callee comes next).
        assert_eq!(
            entry_parameter_names(&fixture("two_funcs.jax_export.mlirbc")),
            Some(vec!["x".to_string(), "y".to_string()])
        );
        // Plain bytecode written without debug information carries no names.
        assert_eq!(entry_parameter_names(&fixture("mul_add.mlirbc")), None);
        // Damaged bytecode gives no names, never a panic.
        let good = fixture("mul_add.jax_export.mlirbc");
        for cut in (8..good.len()).step_by(7) {
            let _ = entry_parameter_names(&good[..cut]);
            let mut bad = good.clone();
            bad[cut] ^= 0x5a;
            let _ = entry_parameter_names(&bad);
        }
    }
}
