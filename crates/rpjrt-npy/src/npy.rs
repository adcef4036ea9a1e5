//! The `.npy` format (versions 1.0 to 3.0): a magic string, a header length, a
//! Python-literal header dict (`descr`, `fortran_order`, `shape`) and the raw data.
//!
//! The header is read on its own, from a stream, so that a caller can check it (against a
//! slot, against the size an archive declares) before any data is read or inflated.

use std::io::Read;

use rpjrt::{element_count, ByteOrder, ElementKind, ElementType, Error, Result};

use crate::array::Array;
use crate::invalid;

/// The longest header read, in bytes. numpy itself refuses headers over 10 000 bytes by
/// default; a rank-64 shape needs about 1 300.
pub const MAX_HEADER: usize = 64 * 1024;

/// A `.npy` header: the fields of its dict and where the data starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// numpy's type string (`<f4`, `|V2`, `<U12`).
    pub descr: String,
    /// Whether the data is column-major.
    pub fortran: bool,
    /// Dimensions.
    pub dims: Vec<i64>,
    /// Bytes before the data: magic, version, length and the header text.
    pub len: usize,
}

fn bad(why: &str) -> Error {
    invalid(format!("not a valid .npy file: {why}"))
}

/// Reads a `.npy` header from `r`, leaving `r` at the first data byte. Reads at most
/// 12 + [`MAX_HEADER`] bytes.
pub fn read_header(r: &mut impl Read) -> Result<Header> {
    let mut fixed = [0u8; 10];
    read_full(r, &mut fixed, "truncated header")?;
    if &fixed[..6] != b"\x93NUMPY" {
        return Err(bad("it does not start with the .npy magic bytes"));
    }
    let (header_len, prefix) = match fixed[6] {
        1 => (usize::from(u16::from_le_bytes([fixed[8], fixed[9]])), 10),
        2 | 3 => {
            let mut more = [0u8; 2];
            read_full(r, &mut more, "truncated header")?;
            let n = u32::from_le_bytes([fixed[8], fixed[9], more[0], more[1]]);
            (n as usize, 12)
        }
        v => return Err(bad(&format!("unknown format version {v}"))),
    };
    if header_len > MAX_HEADER {
        return Err(bad(&format!(
            "the header claims {header_len} bytes (at most {MAX_HEADER} are read)"
        )));
    }
    let mut text = vec![0u8; header_len];
    read_full(r, &mut text, "truncated header")?;
    let text = std::str::from_utf8(&text).map_err(|_| bad("the header is not text"))?;
    let (descr, fortran, dims) = parse_dict(text)?;
    Ok(Header {
        descr,
        fortran,
        dims,
        len: prefix + header_len,
    })
}

/// `read_exact`, with an end of input reported as `why`.
fn read_full(r: &mut impl Read, buf: &mut [u8], why: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => bad(why),
        // Not the format's fault: the bytes could not be read (a damaged archive member).
        _ => invalid(format!("its data cannot be read ({e})")),
    })
}

/// Reads the header dict, a Python literal such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, as numpy's own reader
/// accepts it: keys and strings in single or double quotes, exactly the three keys (numpy
/// refuses others), each once (in a Python dict a repeated key silently takes the last
/// value, so reading either one could disagree with numpy), `True`/`False` as they are
/// spelled, and a shape that is a tuple of non-negative integers. Anything else is refused
/// with what was wrong, never skipped.
fn parse_dict(header: &str) -> Result<(String, bool, Vec<i64>)> {
    let mut p = DictParser {
        text: header,
        pos: 0,
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    let mut structured = false;
    p.skip_space();
    p.expect('{', "the header is not a dict")?;
    loop {
        p.skip_space();
        if p.eat('}') {
            break;
        }
        let key = p
            .string()?
            .ok_or_else(|| bad(&format!("expected a quoted key {}", p.here())))?;
        p.skip_space();
        p.expect(':', &format!("expected ':' after the key '{key}'"))?;
        p.skip_space();
        let fresh = match key.as_str() {
            "descr" => {
                // A structured (record) dtype is a list of fields: valid .npy, read whole
                // here (so the rest of the header is still checked) and refused below.
                let v = if p.peek() == Some('[') {
                    structured = true;
                    p.list_text()?.to_string()
                } else {
                    p.string()?.ok_or_else(|| {
                        bad(&format!("'descr' is not a quoted type string {}", p.here()))
                    })?
                };
                descr.replace(v).is_none()
            }
            "fortran_order" => {
                let v = match p.word() {
                    "True" => true,
                    "False" => false,
                    other => {
                        return Err(bad(&format!(
                            "'fortran_order' is {other:?}, neither True nor False"
                        )))
                    }
                };
                fortran.replace(v).is_none()
            }
            "shape" => shape.replace(p.shape()?).is_none(),
            other => {
                return Err(bad(&format!(
                    "unexpected key '{other}' in the header (numpy writes only 'descr', \
                     'fortran_order' and 'shape')"
                )))
            }
        };
        if !fresh {
            return Err(bad(&format!(
                "the key '{key}' appears twice in the header (numpy would take the last \
                 value silently); the file was not written by numpy"
            )));
        }
        p.skip_space();
        if p.eat(',') {
            continue;
        }
        p.skip_space();
        p.expect('}', "expected ',' or '}' after a value")?;
        break;
    }
    if !p.text[p.pos..].trim().is_empty() {
        return Err(bad(&format!(
            "unexpected text after the header dict {}",
            p.here()
        )));
    }
    let descr = descr.ok_or_else(|| bad("no 'descr' in the header"))?;
    let fortran = fortran.ok_or_else(|| bad("no 'fortran_order' in the header"))?;
    let dims = shape.ok_or_else(|| bad("no 'shape' in the header"))?;
    if structured {
        return Err(structured_refusal(&descr));
    }
    // numpy reads a type code without a byte order (`'f4'`) in the machine's order.
    let native = {
        let mut c = descr.chars();
        c.next().is_some_and(|k| k.is_ascii_alphabetic())
            && !c.as_str().is_empty()
            && c.as_str().chars().all(|d| d.is_ascii_digit())
    };
    let descr = if native { format!("={descr}") } else { descr };
    Ok((descr, fortran, dims))
}

/// The refusal of a valid `.npy` file whose dtype is structured (`descr` is a list of
/// fields, as `[('a', '<f4'), ('b', '<i4')]`): the file is fine, the type is unsupported.
fn structured_refusal(fields: &str) -> Error {
    const SHOWN: usize = 200;
    let shown: String = if fields.chars().count() > SHOWN {
        format!("{}...", fields.chars().take(SHOWN).collect::<String>())
    } else {
        fields.to_string()
    };
    invalid(format!(
        "a valid .npy file, but its dtype {shown} is a structured (record) type, which rpjrt \
         does not support: it reads arrays of one numeric type; save each field as an array \
         of its own (numpy.savez(path, a=arr[\"a\"], ...))"
    ))
}

/// A cursor over the text of a header dict (see [`parse_dict`]).
struct DictParser<'a> {
    text: &'a str,
    pos: usize,
}

impl DictParser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, why: &str) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(bad(&format!("{why} {}", self.here())))
        }
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// Where the cursor is, for an error: `at byte N (near "...")`.
    fn here(&self) -> String {
        let near: String = self.text[self.pos..].chars().take(20).collect();
        format!("at byte {} (near {near:?})", self.pos)
    }

    /// A run of letters, digits and underscores (possibly empty).
    fn word(&mut self) -> &str {
        let rest = &self.text[self.pos..];
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += n;
        &rest[..n]
    }

    /// A string literal in single or double quotes; `None` when none starts here. The
    /// escapes `\\`, `\'` and `\"` are read; other escapes are refused.
    fn string(&mut self) -> Result<Option<String>> {
        let Some(quote) = self.peek().filter(|&c| c == '\'' || c == '"') else {
            return Ok(None);
        };
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.text[self.pos..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.pos += i + 1;
                    return Ok(Some(out));
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('\\' | '\'' | '"'))) => out.push(e),
                    _ => {
                        return Err(bad(&format!(
                            "unsupported escape in a string of the header {}",
                            self.here()
                        )))
                    }
                },
                '\n' => break,
                c => out.push(c),
            }
        }
        Err(bad(&format!(
            "a string in the header is not closed {}",
            self.here()
        )))
    }

    /// The text of a bracketed Python literal starting here (a structured dtype's list of
    /// fields, `[('a', '<f4'), ('b', '<i4', (2,))]`), through its closing bracket: nested
    /// brackets and quoted strings (with backslash escapes) are skipped whole; a bracket
    /// closed by another kind, or one never closed, is refused.
    fn list_text(&mut self) -> Result<&str> {
        let start = self.pos;
        let mut open = Vec::new();
        let mut quote = None;
        let mut chars = self.text[start..].char_indices();
        while let Some((i, c)) = chars.next() {
            match (quote, c) {
                (Some(_), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), '\n') => break,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '[') => open.push(']'),
                (None, '(') => open.push(')'),
                (None, '{') => open.push('}'),
                (None, ']' | ')' | '}') => {
                    if open.pop() != Some(c) {
                        self.pos = start + i;
                        return Err(bad(&format!(
                            "unbalanced brackets in the structured 'descr' list {}",
                            self.here()
                        )));
                    }
                    if open.is_empty() {
                        self.pos = start + i + 1;
                        return Ok(&self.text[start..self.pos]);
                    }
                }
                (None, _) => {}
            }
        }
        Err(bad(&format!(
            "the structured 'descr' list is not closed {}",
            self.here()
        )))
    }

    /// The shape: `()`, `(N,)` or `(N, M, ...)`, with an optional trailing comma and
    /// Python 2's `L` suffix; a one-element tuple needs its comma, as in Python.
    fn shape(&mut self) -> Result<Vec<i64>> {
        self.expect('(', "the shape is not a tuple")?;
        let mut dims = Vec::new();
        let mut comma = false;
        loop {
            self.skip_space();
            if self.eat(')') {
                break;
            }
            if !dims.is_empty() && !comma {
                return Err(bad(&format!(
                    "expected ',' or ')' in the shape {}",
                    self.here()
                )));
            }
            if self.peek() == Some('(') {
                return Err(bad(&format!(
                    "a dimension of the shape is in parentheses {}; write the shape as a \
                     plain tuple of integers, e.g. (2, 3)",
                    self.here()
                )));
            }
            let at = self.here();
            let word = self.word();
            let digits = word.strip_suffix('L').unwrap_or(word);
            let dim = (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
                .then(|| digits.parse::<i64>().ok())
                .flatten()
                .ok_or_else(|| {
                    bad(&format!(
                        "a dimension of the shape is not a non-negative integer {at}"
                    ))
                })?;
            dims.push(dim);
            self.skip_space();
            comma = self.eat(',');
        }
        if dims.len() == 1 && !comma {
            return Err(bad(
                "the shape is not a tuple: a one-dimensional shape is written (N,)",
            ));
        }
        Ok(dims)
    }
}

/// Whether `.npy` files carry `t` under a type string of its own: numpy's built-in types,
/// the ones with a buffer-protocol format in the element-type table. (ml_dtypes types such
/// as bfloat16 share a kind letter and size with a built-in one, so numpy writes them as
/// raw bytes.)
fn has_descr(t: ElementType) -> bool {
    t.buffer_format().is_some() && t.byte_width().is_some()
}

/// Bytes per element of the types `.npy` files carry; `None` for the others.
fn byte_size(t: ElementType) -> Option<usize> {
    t.byte_width().filter(|_| has_descr(t))
}

/// numpy's type string for `t`, built from the element-type table: byte order (`|` for
/// one-byte types, else `<`), numpy's kind letter and the size in bytes (`<f4`, `|b1`).
pub fn descr_of(t: ElementType) -> Result<String> {
    match byte_size(t) {
        Some(size) => {
            let order = if size == 1 { '|' } else { '<' };
            Ok(format!("{order}{}{size}", t.kind().numpy_char()))
        }
        None => Err(invalid(format!(
            "{t} has no .npy type (numpy stores it as raw bytes); convert it to a numpy type first"
        ))),
    }
}

/// The element type of a numpy type string and whether it is big-endian; raw-byte types
/// (`|V2`) and types PJRT lacks are refused with a message naming the type string.
pub fn type_of_descr(descr: &str) -> Result<(ElementType, bool)> {
    // By character, not byte: a header is any text, and a byte split could cut one.
    // The byte order: numpy writes one of these; a type string without one is native
    // (numpy reads `f8` or `d` as it reads `<f8` here).
    let (big, code) = match descr.chars().next() {
        Some('<' | '|' | '=') => (false, &descr[1..]),
        Some('>') => (true, &descr[1..]),
        _ => (false, descr),
    };
    // numpy's one-character codes (`<d`, `?`, `<i` ...), which other writers use: the
    // sizes are those of this platform's C types (LP64), as numpy reads them.
    let short = match code {
        "?" => Some("b1"),
        "b" => Some("i1"),
        "B" => Some("u1"),
        "h" => Some("i2"),
        "H" => Some("u2"),
        "i" => Some("i4"),
        "I" => Some("u4"),
        "l" | "q" | "p" => Some("i8"),
        "L" | "Q" | "P" => Some("u8"),
        "e" => Some("f2"),
        "f" => Some("f4"),
        "d" => Some("f8"),
        "F" => Some("c8"),
        "D" => Some("c16"),
        // numpy's type names, which numpy also reads in a header (native byte order).
        "bool" => Some("b1"),
        "int8" => Some("i1"),
        "uint8" => Some("u1"),
        "int16" => Some("i2"),
        "uint16" => Some("u2"),
        "int32" => Some("i4"),
        "uint32" => Some("u4"),
        "int64" => Some("i8"),
        "uint64" => Some("u8"),
        "float16" | "half" => Some("f2"),
        "float32" | "single" => Some("f4"),
        "float64" | "double" => Some("f8"),
        "complex64" => Some("c8"),
        "complex128" => Some("c16"),
        _ => None,
    };
    let code = short.unwrap_or(code);
    if code.is_empty() {
        return Err(invalid(format!("unknown .npy type {descr:?}")));
    }
    if code.starts_with('V') {
        return Err(invalid(format!(
            "the .npy type {descr:?} is raw bytes (how numpy saves bfloat16, float8 and \
             other ml_dtypes types): it names no element type; save as float32 instead"
        )));
    }
    let mut chars = code.chars();
    let kind = chars.next();
    let size = chars.as_str().parse::<usize>().ok();
    ElementType::ALL
        .iter()
        .copied()
        .find(|&t| has_descr(t) && Some(t.kind().numpy_char()) == kind && byte_size(t) == size)
        .map(|t| (t, big))
        .ok_or_else(|| {
            let why = match ml_dtypes_guess(descr) {
                Some(guess) => format!(
                    ": {}; numpy itself cannot load such a file. .npy readers take numpy's own \
                     types only: save the array as one (arr.astype(numpy.{})){}",
                    guess.what,
                    guess.numpy_type,
                    if guess.in_pjrt {
                        format!(
                            ", or, for Session.restore, as raw bytes (arr.view(\"V{}\")), \
                             which take their slot's type",
                            guess.itemsize
                        )
                    } else {
                        String::new()
                    }
                ),
                None => String::new(),
            };
            invalid(format!(
                "the .npy type {descr:?} has no PJRT element type{why}"
            ))
        })
}

/// What a numpy type string that names no numpy type most likely holds: an ml_dtypes type
/// that ml_dtypes gives a numpy kind letter of its own (`f`, `c`) rather than `V`, so that
/// `numpy.save` writes it as that letter and its size ([`type_of_descr`] refuses it).
pub(crate) struct MlDtypesGuess {
    /// The ml_dtypes type's name (`float8_e5m2`).
    pub name: &'static str,
    /// Why the type string is taken for it, for a message.
    pub what: &'static str,
    /// The numpy type to convert such an array to, so that `.npy` readers can read it.
    pub numpy_type: &'static str,
    /// Whether PJRT has the type (rpjrt can read it from the raw-bytes form).
    pub in_pjrt: bool,
    /// Bytes per element (the size in the type string).
    pub itemsize: usize,
}

/// The ml_dtypes type numpy most likely wrote as `descr` (any byte order): `f1` (numpy has
/// no 1-byte float; ml_dtypes' `float8_e5m2` is of kind `f`) or `c4` (numpy has no 4-byte
/// complex; ml_dtypes' `complex32` is of kind `c`). `None` for any other type string.
pub(crate) fn ml_dtypes_guess(descr: &str) -> Option<MlDtypesGuess> {
    let code = descr.strip_prefix(['<', '>', '|', '=']).unwrap_or(descr);
    match code {
        "f1" => Some(MlDtypesGuess {
            name: "float8_e5m2",
            what: "numpy has no 1-byte float, and a 1-byte float type string is what numpy \
                   writes for an ml_dtypes float8_e5m2 array (the one float8 type ml_dtypes \
                   gives numpy's float kind 'f'; the other float8 types are saved as raw \
                   bytes, '<V1'), so the array is most likely float8_e5m2",
            numpy_type: "float32",
            in_pjrt: true,
            itemsize: 1,
        }),
        "c4" => Some(MlDtypesGuess {
            name: "complex32",
            what: "numpy has no 4-byte complex, and a 4-byte complex type string is what \
                   numpy writes for an ml_dtypes complex32 array (a pair of float16), a type \
                   PJRT does not have",
            numpy_type: "complex64",
            in_pjrt: false,
            itemsize: 4,
        }),
        _ => None,
    }
}

/// The byte order a numpy type string states: `>` big-endian, `<` little-endian, and
/// native for `|` (not applicable), `=` or none. Raw-byte types (`>V2`, as numpy writes an
/// ml_dtypes bfloat16 array in big-endian order) state one too; a reader that knows their
/// element size must honour it.
pub(crate) fn byte_order_of_descr(descr: &str) -> ByteOrder {
    match descr.chars().next() {
        Some('>') => ByteOrder::Big,
        Some('<') => ByteOrder::Little,
        _ => ByteOrder::Native,
    }
}

/// The element type and data size of an array header, refusing raw-byte types. Returns the
/// type, whether it is big-endian and the number of data bytes. A Fortran-order array's
/// data is column-major: [`c_order`] turns it into the row-major data an [`Array`] holds.
pub(crate) fn array_layout(h: &Header) -> Result<(ElementType, bool, usize)> {
    let (t, big) = type_of_descr(&h.descr)?;
    let want = t.dense_byte_size(element_count(&h.dims)?)?;
    Ok((t, big, want))
}

/// The byte strides of column-major (`fortran_order`) data of `dims`, `itemsize` bytes an
/// element: the first axis fastest.
pub(crate) fn fortran_strides(dims: &[i64], itemsize: usize) -> Vec<i64> {
    let mut strides = vec![0i64; dims.len()];
    let mut step = itemsize as i64;
    for (k, &d) in dims.iter().enumerate() {
        strides[k] = step;
        step = step.saturating_mul(d.max(1));
    }
    strides
}

/// The row-major bytes of column-major (`fortran_order`) data of `dims`, each element
/// `width` bytes (rpjrt's strided gather).
pub(crate) fn c_order(width: usize, dims: &[i64], data: Vec<u8>) -> Result<Vec<u8>> {
    if dims.iter().filter(|&&d| d > 1).count() < 2 {
        return Ok(data); // at most one axis longer than 1: both orders are the same bytes
    }
    rpjrt::host::gather(&data, 0, dims, &fortran_strides(dims, width), width)
}

/// Parses a `.npy` file's bytes.
pub fn read_npy(bytes: &[u8]) -> Result<Array> {
    let mut r = bytes;
    let h = read_header(&mut r)?;
    let (element_type, big, want) = array_layout(&h)?;
    if r.len() != want {
        return Err(bad(&format!(
            "shape {:?} of {element_type} needs {want} data bytes, the file has {}",
            h.dims,
            r.len()
        )));
    }
    let mut data = r.to_vec();
    if big {
        swap_to_little(element_type, &mut data);
    }
    if h.fortran {
        data = c_order(element_type.host_itemsize(), &h.dims, data)?;
    }
    Array::new(element_type, h.dims, data)
}

/// Reverses each element's bytes (each half's, for complex types) in place.
pub(crate) fn swap_to_little(t: ElementType, data: &mut [u8]) {
    let size = t.byte_width().unwrap_or(1);
    let part = if t.kind() == ElementKind::Complex {
        size / 2
    } else {
        size
    };
    for chunk in data.chunks_exact_mut(part.max(1)) {
        chunk.reverse();
    }
}

/// The bytes of a `.npy` file (format 1.0, or 2.0 when the header needs it) with the given
/// type string, C-order dimensions and data.
pub fn write_npy_raw(descr: &str, dims: &[i64], data: &[u8]) -> Vec<u8> {
    let shape = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that the data starts at a multiple of 64 bytes, ending with a newline.
    // The padded header (up to 64 bytes more) must fit version 1.0's 16-bit length.
    let v1 = header.len() + 64 <= u16::MAX as usize;
    let prefix = if v1 { 10 } else { 12 };
    let unpadded = prefix + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(prefix + header.len() + data.len());
    if v1 {
        out.extend_from_slice(b"\x93NUMPY\x01\x00");
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(b"\x93NUMPY\x02\x00");
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The bytes of a `.npy` file holding `array`.
pub fn write_npy(array: &Array) -> Result<Vec<u8>> {
    Ok(write_npy_raw(
        &descr_of(array.element_type)?,
        &array.dims,
        &array.data,
    ))
}

/// A `.npy` file holding one 0-d numpy string (`<U…`, UTF-32), as `np.array("text")`.
pub(crate) fn write_npy_text(text: &str) -> Vec<u8> {
    let mut data: Vec<u8> = text
        .chars()
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    let chars = data.len() / 4;
    if data.is_empty() {
        data = vec![0; 4];
    }
    write_npy_raw(&format!("<U{}", chars.max(1)), &[], &data)
}

/// The number of data bytes of a 0-d numpy string header (`<U…`), or an error saying what
/// the header holds instead.
pub(crate) fn text_len(h: &Header) -> Result<usize> {
    let n = h
        .descr
        .strip_prefix(['<', '='])
        .and_then(|d| d.strip_prefix('U'))
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(|| {
            invalid(format!(
                "expected a numpy string (<U…), found type {:?}",
                h.descr
            ))
        })?;
    if !h.dims.is_empty() {
        return Err(invalid(format!(
            "expected one string, found shape {:?}",
            h.dims
        )));
    }
    n.checked_mul(4)
        .ok_or_else(|| invalid(format!("a string of {n} characters is too long")))
}

/// The text of a 0-d numpy string's data (UTF-32); trailing NULs are numpy's padding.
pub(crate) fn decode_text(data: &[u8]) -> Result<String> {
    let mut s = String::with_capacity(data.len() / 4);
    for c in data.chunks_exact(4) {
        let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        if u == 0 {
            break;
        }
        s.push(char::from_u32(u).ok_or_else(|| invalid(format!("{u:#x} is not a character")))?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte-order marker a type string can carry is kept, raw bytes included.
    #[test]
    fn byte_order_of_descr_keeps_every_marker() {
        for (descr, order) in [
            (">V2", ByteOrder::Big),
            ("<V2", ByteOrder::Little),
            ("|V2", ByteOrder::Native),
            ("=V2", ByteOrder::Native),
            (">f4", ByteOrder::Big),
            ("<c8", ByteOrder::Little),
            ("|u1", ByteOrder::Native),
            ("d", ByteOrder::Native),
        ] {
            assert_eq!(byte_order_of_descr(descr), order, "{descr}");
        }
    }

    /// `f1` and `c4` in any byte-order spelling are taken for ml_dtypes' types; numpy's
    /// own type strings and others are not.
    #[test]
    fn ml_dtypes_type_strings_are_recognised() {
        for d in ["<f1", ">f1", "|f1", "=f1", "f1"] {
            assert_eq!(
                ml_dtypes_guess(d).map(|g| g.name),
                Some("float8_e5m2"),
                "{d}"
            );
        }
        assert_eq!(ml_dtypes_guess("<c4").map(|g| g.name), Some("complex32"));
        for d in ["<f2", "<f16", "|V1", "<c8", "f", ""] {
            assert!(ml_dtypes_guess(d).is_none(), "{d}");
        }
    }
    use crate::literal::{parse_literal, random};

    #[test]
    fn npy_round_trip_every_type() {
        for &t in ElementType::ALL {
            if descr_of(t).is_err() {
                continue;
            }
            let a = random(t, &[2, 3], 7).unwrap();
            let bytes = write_npy(&a).unwrap();
            assert_eq!(read_npy(&bytes).unwrap(), a, "{t}");
            let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!(header_end % 64, 0);
        }
        let scalar = parse_literal("2.5", None).unwrap();
        assert_eq!(scalar.dims, Vec::<i64>::new());
        assert_eq!(read_npy(&write_npy(&scalar).unwrap()).unwrap(), scalar);
        let empty = parse_literal("[]:f32", None).unwrap();
        assert_eq!(empty.dims, vec![0]);
        assert_eq!(read_npy(&write_npy(&empty).unwrap()).unwrap(), empty);
    }

    #[test]
    fn type_strings_come_from_the_element_table() {
        use ElementType as T;
        let want = [
            (T::Pred, "|b1"),
            (T::S8, "|i1"),
            (T::S16, "<i2"),
            (T::S32, "<i4"),
            (T::S64, "<i8"),
            (T::U8, "|u1"),
            (T::U16, "<u2"),
            (T::U32, "<u4"),
            (T::U64, "<u8"),
            (T::F16, "<f2"),
            (T::F32, "<f4"),
            (T::F64, "<f8"),
            (T::C64, "<c8"),
            (T::C128, "<c16"),
        ];
        for &t in ElementType::ALL {
            match want.iter().find(|(w, _)| *w == t) {
                Some((_, d)) => {
                    assert_eq!(descr_of(t).unwrap(), *d);
                    assert_eq!(type_of_descr(d).unwrap(), (t, false));
                    let big = format!(">{}", &d[1..]);
                    assert_eq!(type_of_descr(&big).unwrap(), (t, true));
                }
                None => assert!(descr_of(t).unwrap_err().to_string().contains("raw bytes")),
            }
        }
        // bfloat16 shares float16's kind and size: never read as one another.
        assert_eq!(type_of_descr("<f2").unwrap().0, T::F16);
        assert!(type_of_descr("<f16").is_err());
        assert!(type_of_descr("<U5").is_err());
        assert!(type_of_descr("|V2")
            .unwrap_err()
            .to_string()
            .contains("raw bytes"));
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(read_npy(b"hello").is_err());
        let a = parse_literal("[1,2,3]:f32", None).unwrap();
        let mut bytes = write_npy(&a).unwrap();
        bytes.pop();
        assert!(read_npy(&bytes)
            .unwrap_err()
            .to_string()
            .contains("needs 12 data bytes"));
        let mut v2 = write_npy(&a).unwrap();
        let at = v2.windows(3).position(|w| w == b"<f4").unwrap();
        v2[at..at + 3].copy_from_slice(b"|V4");
        assert!(read_npy(&v2).unwrap_err().to_string().contains("raw bytes"));
        // A header length past the bound is refused before it is read.
        let mut huge = b"\x93NUMPY\x02\x00".to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        let e = read_npy(&huge).unwrap_err().to_string();
        assert!(e.contains("the header claims 4294967295 bytes"), "{e}");
        // Big-endian data is swapped; a one-element Fortran-order array is the same bytes.
        let be = write_npy_raw(">i4", &[2], &[0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(
            read_npy(&be).unwrap().data,
            [258i32, -2].map(i32::to_le_bytes).concat()
        );
        let mut f = write_npy_raw("<f4", &[1], &[0; 4]);
        let at = f.windows(5).position(|w| w == b"False").unwrap();
        f[at..at + 5].copy_from_slice(b"True ");
        assert_eq!(read_npy(&f).unwrap().data, vec![0; 4]);
    }

    #[test]
    fn text_members_round_trip() {
        for text in ["", "{\"w\": \"bfloat16\"}", "näme ☃"] {
            let bytes = write_npy_text(text);
            let mut r = bytes.as_slice();
            let h = read_header(&mut r).unwrap();
            assert_eq!(text_len(&h).unwrap(), r.len());
            assert_eq!(decode_text(r).unwrap(), text);
        }
    }

    #[test]
    fn numpys_one_character_type_strings_and_plain_sizes_are_read() {
        use ElementType as T;
        for (descr, t, big) in [
            ("<d", T::F64, false),
            ("<e", T::F16, false),
            ("<i", T::S32, false),
            ("?", T::Pred, false),
            ("|b", T::S8, false),
            ("B", T::U8, false),
            (">h", T::S16, true),
            ("<q", T::S64, false),
            ("<F", T::C64, false),
            ("f4", T::F32, false),
            (">f8", T::F64, true),
        ] {
            assert_eq!(type_of_descr(descr).unwrap(), (t, big), "{descr}");
        }
        for bad in ["", "<", "<g", "|V2", "<U4", "x"] {
            assert!(type_of_descr(bad).is_err(), "{bad}");
        }
    }
}
