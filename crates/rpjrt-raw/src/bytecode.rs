//! Pure readers of MLIR bytecode's building blocks (varints, sections, the string and
//! properties sections) and of the symbol names an operation's attributes hold, shared by
//! rpjrt's program screen. Nothing here touches a plugin.

/// Reads MLIR bytecode's prefix varint: the count of trailing zero bits of the first byte
/// says how many more bytes follow (a zero first byte: eight more, the whole value).
pub fn read_varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *data.get(*pos)?;
    if first == 0 {
        let bytes = data.get(pos.checked_add(1)?..pos.checked_add(9)?)?;
        *pos += 9;
        return Some(u64::from_le_bytes(bytes.try_into().ok()?));
    }
    let extra = first.trailing_zeros() as usize;
    let bytes = data.get(*pos..pos.checked_add(extra + 1)?)?;
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    *pos += extra + 1;
    Some(u64::from_le_bytes(buf) >> (extra + 1))
}

/// [`read_varint`] as a `usize`.
pub fn read_usize(data: &[u8], pos: &mut usize) -> Option<usize> {
    usize::try_from(read_varint(data, pos)?).ok()
}

/// Reads a section header and its data: `(id, data)`.
pub fn read_section<'a>(code: &'a [u8], pos: &mut usize) -> Option<(u8, &'a [u8])> {
    let id_and_aligned = *code.get(*pos)?;
    *pos += 1;
    let len = read_usize(code, pos)?;
    if id_and_aligned & 0x80 != 0 {
        let align = read_varint(code, pos)?;
        if align == 0 || !align.is_power_of_two() {
            return None;
        }
        // Padding bytes (0xCB) up to the alignment.
        while *pos < code.len() && code[*pos] == 0xCB && !(*pos as u64).is_multiple_of(align) {
            *pos += 1;
        }
    }
    let data = code.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    Some((id_and_aligned & 0x7f, data))
}

/// The string section: a count, the lengths in reverse order, then the NUL-terminated data.
pub fn string_section(data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut p = 0;
    let count = read_usize(data, &mut p)?;
    if count > data.len() {
        return None;
    }
    let mut lengths = Vec::with_capacity(count);
    for _ in 0..count {
        lengths.push(read_usize(data, &mut p)?);
    }
    lengths.reverse();
    let mut out = Vec::with_capacity(count);
    for n in lengths {
        let s = data.get(p..p.checked_add(n)?)?;
        p += n;
        out.push(s.strip_suffix(&[0]).unwrap_or(s));
    }
    Some(out)
}

/// The properties section's entries: a count, then each entry as a size and its bytes
/// (empty when it cannot be read).
pub fn property_entries(d: Option<&[u8]>) -> Vec<&[u8]> {
    (|| {
        let d = d?;
        let mut q = 0;
        let n = read_usize(d, &mut q)?;
        let mut out = Vec::with_capacity(n.min(d.len()));
        for _ in 0..n.min(d.len()) {
            let size = read_usize(d, &mut q)?;
            out.push(d.get(q..q.checked_add(size)?)?);
            q += size;
        }
        Some(out)
    })()
    .unwrap_or_default()
}

/// An attribute table entry: its dialect, whether its bytes are the dialect's own encoding
/// (else they are its text), and the bytes.
pub type AttrEntry<'a> = (String, bool, &'a [u8]);

// Builtin attribute codes (MLIR's BuiltinDialectBytecode).
const BUILTIN_DICTIONARY: u64 = 1;
const BUILTIN_STRING: u64 = 2;
const BUILTIN_STRING_WITH_TYPE: u64 = 3;
const BUILTIN_FLAT_SYMBOL_REF: u64 = 4;

/// The strings attribute `i` may hold as a name: a builtin string or flat symbol
/// reference, a VHLO attribute of one value (a string, or a reference to one), or their
/// text form (`"f"`, `@f`). Over-reads rather than misses.
fn attr_strings(
    attrs: &[AttrEntry],
    strings: &[&[u8]],
    i: usize,
    depth: u32,
    out: &mut Vec<String>,
) {
    let Some((dialect, custom, bytes)) = attrs.get(i) else {
        return;
    };
    let s = |k: u64| usize::try_from(k).ok().and_then(|k| strings.get(k));
    if !custom {
        let t = String::from_utf8_lossy(bytes.strip_suffix(&[0]).unwrap_or(bytes)).into_owned();
        let t = t
            .strip_prefix('@')
            .unwrap_or(&t)
            .trim_matches('"')
            .to_string();
        out.push(t);
        return;
    }
    let mut q = 0;
    let mut v = Vec::new();
    while q < bytes.len() && v.len() < 4 {
        match read_varint(bytes, &mut q) {
            Some(x) => v.push(x),
            None => return,
        }
    }
    let builtin = dialect == "builtin";
    match v.as_slice() {
        [BUILTIN_STRING, k] | [BUILTIN_STRING_WITH_TYPE, k, _] if builtin => {
            out.extend(s(*k).map(|t| String::from_utf8_lossy(t).into_owned()))
        }
        [BUILTIN_FLAT_SYMBOL_REF, a] if builtin && depth < 4 => {
            attr_strings(attrs, strings, *a as usize, depth + 1, out)
        }
        [_, k] if dialect == "vhlo" => {
            out.extend(s(*k).map(|t| String::from_utf8_lossy(t).into_owned()));
            if depth < 4 {
                attr_strings(attrs, strings, *k as usize, depth + 1, out);
            }
        }
        _ => {}
    }
}

/// The names an operation's symbol attributes may give: each string its properties entry
/// (`props`, an index into `props_entries`) refers to, and the values of `sym_name`,
/// `callee` and `decomposition` in its attribute dictionary (`dict`, an attribute index).
/// Empty when none can be read.
pub fn symbol_names(
    attrs: &[AttrEntry],
    strings: &[&[u8]],
    props_entries: &[&[u8]],
    props: Option<usize>,
    dict: Option<usize>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(entry) = props.and_then(|i| props_entries.get(i)) {
        let mut q = 0;
        while q < entry.len() {
            match read_usize(entry, &mut q) {
                Some(a) => attr_strings(attrs, strings, a, 0, &mut out),
                None => break,
            }
        }
    }
    if let Some((dialect, true, bytes)) = dict.and_then(|i| attrs.get(i)) {
        let mut q = 0;
        let mut v = Vec::new();
        while q < bytes.len() && v.len() < 8192 {
            match read_usize(bytes, &mut q) {
                Some(x) => v.push(x),
                None => break,
            }
        }
        if dialect == "builtin" && v.first() == Some(&(BUILTIN_DICTIONARY as usize)) {
            for kv in v[2.min(v.len())..].chunks_exact(2) {
                let mut key = Vec::new();
                attr_strings(attrs, strings, kv[0], 4, &mut key);
                if key
                    .iter()
                    .any(|k| ["sym_name", "callee", "decomposition"].contains(&k.as_str()))
                {
                    attr_strings(attrs, strings, kv[1], 0, &mut out);
                }
            }
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_names() {
        let mut p = 0;
        assert_eq!(read_varint(&[0x05], &mut p), Some(2));
        let strings: Vec<&[u8]> = vec![b"sym_name", b"clip"];
        let attrs: Vec<AttrEntry> = vec![
            ("builtin".into(), true, &[0x05, 0x01]), // string 0
            ("builtin".into(), true, &[0x05, 0x03]), // string 1
            ("builtin".into(), true, &[0x09, 0x03]), // flat symbol ref to attribute 1
            ("builtin".into(), false, b"@other\0"),
            ("builtin".into(), true, &[0x03, 0x03, 0x01, 0x03]), // {sym_name = "clip"}
        ];
        let props: Vec<&[u8]> = vec![&[0x05, 0x07]];
        assert_eq!(
            symbol_names(&attrs, &strings, &props, Some(0), None),
            ["clip", "other"]
        );
        assert_eq!(
            symbol_names(&attrs, &strings, &props, None, Some(4)),
            ["clip"]
        );
        assert!(symbol_names(&attrs, &strings, &props, Some(9), Some(0)).is_empty());
    }
}
