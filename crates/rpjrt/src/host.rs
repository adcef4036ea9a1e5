//! Host data going to a device: the host array description, its checks, the layout
//! decision and the one `put`.
//!
//! A [`HostArray`] describes elements in host memory the way numpy, the buffer protocol and
//! DLPack do: bytes (borrowed, or owned by something that keeps them alive), the element
//! type, dims, byte strides (zero and negative allowed), a byte offset of element
//! `[0, 0, ...]` and a byte order. [`Client::put`] checks it against its bytes (every
//! addressed byte must lie inside), decides how to hand it to the plugin and, per
//! [`CopyMode`], lends the memory (zero-copy), lets the plugin read it with strides, or
//! gathers it into a dense copy first. Every allocation sized by the request is fallible:
//! one that cannot be made is [`Error::ResourceExhausted`], never an abort.
//!
//! Conversions made on the way (never silently lossy):
//! - non-native byte order is swapped into a copy;
//! - `bool` elements holding bytes other than 0 and 1 are read as "nonzero is true" and
//!   normalised into a copy (PJRT assumes 0/1 and some plugins compute wrong answers
//!   otherwise).

use std::borrow::Cow;
use std::sync::Arc;

use crate::client::buffer::Buffer;
use crate::client::{Client, Device, Memory};
use crate::dtype::{element_count, try_pack_sub_byte, ElementType};
use crate::error::{Error, Result};
use crate::raw::hostmem::LentBytes;

pub use crate::dtype::{try_alloc, try_zeroed};
pub use crate::raw::hostmem::HostBytes;

/// The byte order of the elements of a host array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ByteOrder {
    /// This machine's order (what device buffers hold).
    #[default]
    Native,
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    /// Whether elements in this order must be swapped to reach the native order.
    pub const fn is_foreign(self) -> bool {
        match self {
            ByteOrder::Native => false,
            ByteOrder::Little => cfg!(target_endian = "big"),
            ByteOrder::Big => cfg!(target_endian = "little"),
        }
    }
}

/// Whether [`Client::put`] may, must or must not copy the host data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// Always copy: the buffer never uses the host memory afterwards.
    Always,
    /// Use the host memory in place where the array and the plugin allow it, else copy.
    #[default]
    IfNeeded,
    /// Use the host memory in place or fail (strided data, a conversion, a borrowed slice
    /// or a plugin that copies anyway are errors).
    Never,
}

/// The bytes of a [`HostArray`]: borrowed for the call, or owned and lendable.
#[derive(Clone)]
pub enum HostData<'a> {
    /// Bytes that are only read during the call (the buffer never uses them afterwards).
    Borrowed(&'a [u8]),
    /// Bytes an owner keeps alive; a zero-copy buffer keeps the owner until it is gone.
    Owned(Arc<dyn HostBytes>),
}

/// A description of an array in host memory (see the module documentation).
#[derive(Clone)]
pub struct HostArray<'a> {
    data: HostData<'a>,
    element_type: ElementType,
    dims: Cow<'a, [i64]>,
    byte_strides: Option<Cow<'a, [i64]>>,
    offset: usize,
    byte_order: ByteOrder,
    unpacked: bool,
}

/// How the elements of a host array sit in memory, as [`classify`] decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Dense row-major (or empty): `len` bytes from the array's first element.
    Dense {
        /// Bytes of the dense data.
        len: usize,
    },
    /// Dense under a permutation of the dimensions (e.g. Fortran order) with non-negative
    /// strides: the plugin can read it with these byte strides from `start`, `span` bytes.
    Strided {
        /// The byte strides to give the plugin (size-1 dimensions get a harmless stride).
        strides: Vec<i64>,
        /// Bytes the array spans.
        span: usize,
    },
    /// Anything else (zero, negative or overlapping strides, gaps): gather a dense copy.
    Gather,
}

pub use crate::raw::util::extent;

/// Row-major byte strides of `itemsize`-byte elements (saturating; only compared).
pub fn c_strides(dims: &[i64], itemsize: usize) -> Vec<i64> {
    let mut s = vec![0i64; dims.len()];
    let mut acc = itemsize as i64;
    for i in (0..dims.len()).rev() {
        s[i] = acc;
        acc = acc.saturating_mul(dims[i].max(1));
    }
    s
}

/// Whether `dims`/`byte_strides` of `itemsize`-byte elements are dense row-major (size-1
/// dimensions may have any stride).
pub fn is_c_contiguous(dims: &[i64], byte_strides: &[i64], itemsize: usize) -> bool {
    let mut acc = itemsize as i64;
    for (&d, &s) in dims.iter().zip(byte_strides).rev() {
        if d != 1 && s != acc {
            return false;
        }
        acc = acc.saturating_mul(d.max(1));
    }
    true
}

/// Classifies `dims`/`byte_strides` of `itemsize`-byte elements (checked with [`extent`]
/// beforehand): dense row-major, dense under a permutation, or to be gathered.
pub fn classify(dims: &[i64], byte_strides: &[i64], itemsize: usize) -> Layout {
    let n: i128 = dims.iter().map(|&d| i128::from(d.max(0))).product();
    if n == 0 {
        return Layout::Dense { len: 0 };
    }
    let dense_len = (n * itemsize as i128) as usize;
    if is_c_contiguous(dims, byte_strides, itemsize) {
        return Layout::Dense { len: dense_len };
    }
    if byte_strides
        .iter()
        .zip(dims)
        .any(|(&s, &d)| s <= 0 && d != 1)
    {
        return Layout::Gather;
    }
    // Dense under some permutation of the dimensions (e.g. Fortran order)?
    let mut order: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] != 1).collect();
    order.sort_by_key(|&i| byte_strides[i]);
    let mut expect = itemsize as i64;
    for &i in &order {
        if byte_strides[i] != expect {
            return Layout::Gather;
        }
        expect = expect.saturating_mul(dims[i]);
    }
    let strides = dims
        .iter()
        .zip(byte_strides)
        .map(|(&d, &s)| if d == 1 { itemsize as i64 } else { s })
        .collect();
    Layout::Strided {
        strides,
        span: dense_len,
    }
}

/// The element type and byte order of a one-element buffer-protocol (PEP 3118) format with
/// items of `itemsize` bytes, e.g. `"<f"`, `">i"`, `"=Zd"`, `"?"`; `None` for a format
/// that is not one element rpjrt knows (structs, pointers, counts, padding, `"g"`...).
/// Integer codes take their size from `itemsize` (`"l"` is 4 or 8 bytes by platform);
/// `"c"` (a char) is uint8.
pub fn buffer_format_type(format: &str, itemsize: usize) -> Option<(ElementType, ByteOrder)> {
    let (order, f) = match format.as_bytes().first() {
        Some(b'@') | Some(b'=') => (ByteOrder::Native, &format[1..]),
        Some(b'<') => (ByteOrder::Little, &format[1..]),
        Some(b'>') | Some(b'!') => (ByteOrder::Big, &format[1..]),
        _ => (ByteOrder::Native, format),
    };
    let int = |signed: bool| -> Option<ElementType> {
        Some(match (signed, itemsize) {
            (true, 1) => ElementType::S8,
            (true, 2) => ElementType::S16,
            (true, 4) => ElementType::S32,
            (true, 8) => ElementType::S64,
            (false, 1) => ElementType::U8,
            (false, 2) => ElementType::U16,
            (false, 4) => ElementType::U32,
            (false, 8) => ElementType::U64,
            _ => return None,
        })
    };
    let t = match f {
        "b" | "h" | "i" | "l" | "q" | "n" => int(true)?,
        "B" | "c" | "H" | "I" | "L" | "Q" | "N" => int(false)?,
        "?" => ElementType::Pred,
        "e" => ElementType::F16,
        "f" => ElementType::F32,
        "d" => ElementType::F64,
        "Zf" => ElementType::C64,
        "Zd" => ElementType::C128,
        _ => return None,
    };
    (t.host_itemsize() == itemsize).then_some((t, order))
}

/// The element type whose buffer-protocol format carries `t`'s host elements: `t` itself
/// where it has a format; otherwise the unsigned integer of its host size, holding the raw
/// bits (bfloat16 travels as `uint16`, the float8 types, `uint4` and `int4` as `uint8`:
/// an `int4` -1 is the byte 0x0f, ml_dtypes' form, which as a signed `int8` would read as
/// the wrong number 15). The token has no data and carries as `uint8`.
pub fn carrier_type(t: ElementType) -> ElementType {
    if t.buffer_format().is_some() {
        return t;
    }
    match t.host_itemsize() {
        2 => ElementType::U16,
        4 => ElementType::U32,
        8 => ElementType::U64,
        _ => ElementType::U8,
    }
}

/// Whether a buffer-protocol format is raw bytes (`"B"`, `"b"` or `"c"`, any byte-order
/// prefix): the only formats rpjrt reinterprets as another element type.
pub fn is_raw_byte_format(format: &str) -> bool {
    let f = format.trim_start_matches(['@', '=', '<', '>', '!']);
    matches!(f, "B" | "b" | "c")
}

/// Copies the elements at `offset` + index·`byte_strides` of `src` into a dense row-major
/// vector (fallibly allocated). The caller has checked with [`extent`] that every element
/// lies inside `src`.
pub fn gather(
    src: &[u8],
    offset: usize,
    dims: &[i64],
    byte_strides: &[i64],
    itemsize: usize,
) -> Result<Vec<u8>> {
    let n = element_count(dims)?;
    let len = n
        .checked_mul(itemsize)
        .ok_or_else(|| Error::ResourceExhausted(format!("{n} elements overflow usize")))?;
    let mut out = try_alloc(len, "gathering a strided host array")?;
    if n == 0 {
        return Ok(out);
    }
    let rank = dims.len();
    // The innermost dimension is copied in one run when it is contiguous.
    let (inner_n, inner_s) = if rank == 0 {
        (1usize, itemsize as i64)
    } else {
        (dims[rank - 1] as usize, byte_strides[rank - 1])
    };
    let outer = rank.saturating_sub(1);
    let mut idx = vec![0i64; outer];
    let mut base = offset as i128;
    loop {
        if inner_s == itemsize as i64 {
            let at = base as usize;
            out.extend_from_slice(&src[at..at + inner_n * itemsize]);
        } else {
            let mut at = base;
            for _ in 0..inner_n {
                let a = at as usize;
                out.extend_from_slice(&src[a..a + itemsize]);
                at += i128::from(inner_s);
            }
        }
        // Advance the odometer over the outer dimensions.
        let mut k = outer;
        loop {
            if k == 0 {
                return Ok(out);
            }
            k -= 1;
            idx[k] += 1;
            base += i128::from(byte_strides[k]);
            if idx[k] < dims[k] {
                break;
            }
            base -= i128::from(byte_strides[k]) * i128::from(dims[k]);
            idx[k] = 0;
        }
    }
}

/// Reverses the bytes of each `unit`-byte group in place (complex types swap each part).
fn swap_bytes(data: &mut [u8], unit: usize) {
    if unit > 1 {
        data.chunks_exact_mut(unit).for_each(|c| c.reverse());
    }
}

impl std::fmt::Debug for HostArray<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, len) = match &self.data {
            HostData::Borrowed(b) => ("borrowed", b.len()),
            HostData::Owned(o) => ("owned", o.bytes().len()),
        };
        f.debug_struct("HostArray")
            .field("element_type", &self.element_type)
            .field("dims", &self.dims)
            .field("byte_strides", &self.byte_strides)
            .field("offset", &self.offset)
            .field("byte_order", &self.byte_order)
            .field("unpacked", &self.unpacked)
            .field("data", &format_args!("{kind} {len} bytes"))
            .finish()
    }
}

impl<'a> HostArray<'a> {
    /// A dense row-major array of `element_type` and `dims` in `bytes` (rpjrt's dense form:
    /// sub-byte types packed, see [`crate::pack_sub_byte`]), native byte order.
    pub fn new(
        data: HostData<'a>,
        element_type: ElementType,
        dims: impl Into<Cow<'a, [i64]>>,
    ) -> HostArray<'a> {
        HostArray {
            data,
            element_type,
            dims: dims.into(),
            byte_strides: None,
            offset: 0,
            byte_order: ByteOrder::Native,
            unpacked: false,
        }
    }

    /// A dense row-major array over borrowed bytes.
    pub fn from_slice(
        bytes: &'a [u8],
        element_type: ElementType,
        dims: impl Into<Cow<'a, [i64]>>,
    ) -> Self {
        HostArray::new(HostData::Borrowed(bytes), element_type, dims)
    }

    /// A dense row-major array over an owner's bytes (which a zero-copy buffer may use).
    pub fn from_owner(
        owner: Arc<dyn HostBytes>,
        element_type: ElementType,
        dims: impl Into<Cow<'a, [i64]>>,
    ) -> Self {
        HostArray::new(HostData::Owned(owner), element_type, dims)
    }

    /// Elements at `offset + Σ index[k]·byte_strides[k]` bytes (strides may be zero or
    /// negative; `offset` locates element `[0, ...]`). Sub-byte types must be
    /// [`HostArray::unpacked`] to be strided.
    pub fn with_byte_strides(
        mut self,
        byte_strides: impl Into<Cow<'a, [i64]>>,
        offset: usize,
    ) -> Self {
        self.byte_strides = Some(byte_strides.into());
        self.offset = offset;
        self
    }

    /// The byte order of the elements (default [`ByteOrder::Native`]).
    pub fn with_byte_order(mut self, order: ByteOrder) -> Self {
        self.byte_order = order;
        self
    }

    /// Sub-byte types hold one element per byte (numpy / ml_dtypes form; the low bits
    /// count) instead of rpjrt's packed form.
    pub fn unpacked(mut self) -> Self {
        self.unpacked = true;
        self
    }

    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }

    /// The dims.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Bytes per addressed item: the element's byte width, 1 for unpacked sub-byte types.
    fn itemsize(&self) -> Result<usize> {
        let t = self.element_type;
        if t == ElementType::Token {
            return Err(Error::invalid("a token has no host data"));
        }
        match t.byte_width() {
            Some(w) => Ok(w),
            None if self.unpacked => Ok(1),
            None if self.byte_strides.is_some() => Err(Error::invalid(format!(
                "byte strides over packed {t} data are not supported (describe it unpacked, \
                 one element per byte)"
            ))),
            None => Ok(0),
        }
    }

    /// Checks the description against its bytes and decides the layout; returns the
    /// layout, the item size (0 for packed sub-byte data) and the element count.
    pub fn plan(&self) -> Result<(Layout, usize, usize)> {
        let have = match &self.data {
            HostData::Borrowed(b) => b.len(),
            HostData::Owned(o) => o.bytes().len(),
        };
        self.plan_for(have)
    }

    /// [`HostArray::plan`] for `have` bytes of data (read once by the caller).
    fn plan_for(&self, have: usize) -> Result<(Layout, usize, usize)> {
        let t = self.element_type;
        let itemsize = self.itemsize()?;
        crate::dtype::array_bytes(t, &self.dims)?;
        let n = element_count(&self.dims)?;
        if itemsize == 0 {
            let need = t.dense_byte_size(n)?;
            if have < need {
                return Err(Error::invalid(format!(
                    "host data has {have} bytes, but packed {t}{:?} needs {need}",
                    self.dims
                )));
            }
            return Ok((Layout::Dense { len: need }, 0, n));
        }
        let strides: Cow<'_, [i64]> = match &self.byte_strides {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(c_strides(&self.dims, itemsize)),
        };
        let Some((lo, end)) = extent(&self.dims, &strides, itemsize)? else {
            return Ok((Layout::Dense { len: 0 }, itemsize, 0));
        };
        let off = self.offset as i128;
        if off + lo < 0 || off + end > have as i128 {
            return Err(Error::invalid(format!(
                "{t}{:?} with byte strides {strides:?} from byte offset {} addresses bytes \
                 {}..{}, but the host data has {have}",
                self.dims,
                self.offset,
                off + lo,
                off + end
            )));
        }
        Ok((classify(&self.dims, &strides, itemsize), itemsize, n))
    }
}

impl HostArray<'_> {
    /// A dense copy in rpjrt's dense form: row-major, native byte order, bools as 0/1,
    /// sub-byte types packed.
    pub fn to_dense(&self) -> Result<Vec<u8>> {
        let t = self.element_type;
        let src: &[u8] = match &self.data {
            HostData::Borrowed(b) => b,
            HostData::Owned(o) => o.bytes(),
        };
        let (_, itemsize, n) = self.plan_for(src.len())?;
        if itemsize == 0 {
            let len = t.dense_byte_size(n)?;
            let mut v = try_alloc(len, "copying a packed host array")?;
            v.extend_from_slice(&src[..len]);
            return Ok(v);
        }
        let strides: Cow<'_, [i64]> = match &self.byte_strides {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(c_strides(&self.dims, itemsize)),
        };
        self.dense_from(src, &strides, itemsize)
    }

    /// The dense form of this array read from `src` (the one read of its bytes) with byte
    /// `strides`: gathered row-major, swapped to native order, bools as 0/1, sub-byte
    /// types packed.
    fn dense_from(&self, src: &[u8], strides: &[i64], itemsize: usize) -> Result<Vec<u8>> {
        let t = self.element_type;
        let mut dense = gather(src, self.offset, &self.dims, strides, itemsize)?;
        if self.byte_order.is_foreign() && itemsize > 1 {
            let unit = if t.kind() == crate::dtype::ElementKind::Complex {
                itemsize / 2
            } else {
                itemsize
            };
            swap_bytes(&mut dense, unit);
        }
        if t == ElementType::Pred {
            dense.iter_mut().for_each(|b| *b = u8::from(*b != 0));
        }
        if let Some((i, b)) = crate::dtype::first_foreign_byte(t, &dense) {
            return Err(Error::invalid(format!(
                "the {t}{:?} host array's {}",
                self.dims,
                crate::dtype::foreign_byte_text(t, i, b)
            )));
        }
        if self.unpacked && t.is_sub_byte() {
            dense = try_pack_sub_byte(t, &dense)?;
        }
        Ok(dense)
    }
}

impl Client {
    /// Makes a buffer on `device` (or in `memory`) from a host array description, copying
    /// or not as `mode` says (see [`crate::host`]): dense native data from an owner is used
    /// in place where the plugin allows it (the buffer keeps the owner alive); byte-strided
    /// data the plugin can read directly is handed over with its strides; everything else
    /// (zero, negative or overlapping strides, foreign byte order, bool bytes other than
    /// 0/1, unpacked sub-byte elements) is converted into a dense copy first.
    ///
    /// Errors: a description that addresses bytes outside its data, an element type the
    /// plugin predates, a `mode` that cannot be honoured, and [`Error::ResourceExhausted`]
    /// when a copy cannot be allocated.
    pub fn put(
        &self,
        array: &HostArray<'_>,
        device: &Device,
        memory: Option<&Memory>,
        mode: CopyMode,
    ) -> Result<Buffer> {
        let t = array.element_type;
        // The one read of an owner's bytes: everything below uses this range.
        let lent_all: Option<Arc<dyn HostBytes>> = match &array.data {
            HostData::Borrowed(_) => None,
            HostData::Owned(o) => Some(Arc::new(LentBytes::capture_all(Arc::clone(o)))),
        };
        let src: &[u8] = match (&array.data, &lent_all) {
            (_, Some(l)) => l.bytes(),
            (HostData::Borrowed(b), None) => b,
            (HostData::Owned(_), None) => unreachable!("owned data is always captured"),
        };
        let lent_from = lent_all.as_ref();
        let (layout, itemsize, n) = array.plan_for(src.len())?;
        let dims = &array.dims;
        if itemsize == 0 {
            // Packed sub-byte data: the plugin takes one element per byte, so it is copied.
            if mode == CopyMode::Never && n > 0 {
                return Err(Error::invalid(format!(
                    "no-copy mode (CopyMode::Never, Python's copy=False) is impossible for {t}: \
                     the plugin takes it unpacked"
                )));
            }
            let Layout::Dense { len } = layout else {
                unreachable!("packed data is always dense")
            };
            return self.buffer_from_host(&src[..len], t, dims, None, device, memory);
        }
        let swap = array.byte_order.is_foreign() && itemsize > 1;
        let start = array.offset;
        let fix_bool = t == ElementType::Pred && {
            let range = match &layout {
                Layout::Dense { len } => Some(&src[start..start + len]),
                Layout::Strided { span, .. } => Some(&src[start..start + span]),
                Layout::Gather => None,
            };
            match range {
                Some(r) => r.iter().any(|&b| b > 1),
                None => true, // checked after the gather
            }
        };
        // A type stored a byte per element with bits to spare (float6): a byte with them
        // set holds no value. Dense data is checked here (it may be used as it is); other
        // layouts are converted, which checks every element (`dense_from`).
        let spare_bits = !t.is_sub_byte() && t.bit_width() > 0 && t.bit_width() < 8;
        let check_spare = spare_bits && {
            match &layout {
                Layout::Dense { len } => {
                    match crate::dtype::first_foreign_byte(t, &src[start..start + len]) {
                        Some((i, b)) => {
                            return Err(Error::invalid(format!(
                                "the {t}{dims:?} host array's {}",
                                crate::dtype::foreign_byte_text(t, i, b)
                            )))
                        }
                        None => false,
                    }
                }
                _ => true,
            }
        };
        let must_convert = swap || fix_bool || (array.unpacked && t.is_sub_byte());
        let convert = must_convert || check_spare;
        if mode == CopyMode::Never {
            let why = if must_convert {
                Some("its elements must be converted (byte order, bool bytes or sub-byte packing)")
            } else if !matches!(layout, Layout::Dense { .. }) {
                Some("it is not C-contiguous (dense row-major)")
            } else if lent_from.is_none() {
                Some("its bytes are only borrowed for the call")
            } else {
                None
            };
            if let (Some(why), true) = (why, n > 0) {
                return Err(Error::invalid(format!(
                    "no-copy mode (CopyMode::Never, Python's copy=False) cannot use this \
                     {t}{dims:?} host array in place: {why}"
                )));
            }
        }
        // In place: dense, native, owned.
        if let (Layout::Dense { len }, false, Some(owner), false) =
            (&layout, convert, lent_from, mode == CopyMode::Always)
        {
            if *len > 0 {
                let lent = LentBytes::capture(Arc::clone(owner), start, *len)?;
                let addr = lent.bytes().as_ptr() as usize;
                let b =
                    self.buffer_from_host_owned(Arc::new(lent), t, dims, None, device, memory)?;
                if mode == CopyMode::Never && b.unsafe_pointer().map(|p| p != addr).unwrap_or(true)
                {
                    return Err(Error::invalid(format!(
                        "no-copy mode (CopyMode::Never, Python's copy=False): the plugin did not \
                         use the host memory in place (the data \
                         is at {addr:#x}, {} bytes past a 64-byte boundary; XLA's CPU plugins \
                         alias only 64-byte-aligned memory)",
                        addr % 64
                    )));
                }
                return Ok(b);
            }
        }
        if !convert {
            match &layout {
                Layout::Dense { len } if *len >= crate::transfer::STAGING_THRESHOLD => {
                    // Full-speed copy through huge-page staging (see `crate::transfer`).
                    return self.put_staged(&src[start..start + len], t, dims, device, memory);
                }
                Layout::Dense { len } => {
                    return self.buffer_from_host(
                        &src[start..start + len],
                        t,
                        dims,
                        None,
                        device,
                        memory,
                    );
                }
                Layout::Strided { strides, span } => {
                    return self.buffer_from_host(
                        &src[start..start + span],
                        t,
                        dims,
                        Some(strides),
                        device,
                        memory,
                    );
                }
                Layout::Gather => {}
            }
        }
        // A dense converted copy.
        let strides: Cow<'_, [i64]> = match &array.byte_strides {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(c_strides(dims, itemsize)),
        };
        let dense = array.dense_from(src, &strides, itemsize)?;
        self.buffer_from_host(&dense, t, dims, None, device, memory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_covers_negative_and_zero_strides() {
        assert_eq!(extent(&[3], &[4], 4).unwrap(), Some((0, 12)));
        assert_eq!(extent(&[3], &[-4], 4).unwrap(), Some((-8, 4)));
        assert_eq!(extent(&[1 << 40], &[0], 4).unwrap(), Some((0, 4)));
        assert_eq!(extent(&[2, 0], &[4, 4], 4).unwrap(), None);
        assert!(extent(&[2], &[4, 4], 4).is_err());
        assert!(extent(&[-1], &[4], 4).is_err());
        let huge = extent(&[i64::MAX, i64::MAX], &[i64::MAX, i64::MAX], 8).unwrap();
        assert!(huge.is_some());
    }

    #[test]
    fn classify_layouts() {
        assert_eq!(classify(&[2, 3], &[12, 4], 4), Layout::Dense { len: 24 });
        assert_eq!(classify(&[2, 0], &[0, 0], 4), Layout::Dense { len: 0 });
        assert_eq!(classify(&[1, 3], &[999, 4], 4), Layout::Dense { len: 12 });
        assert_eq!(
            classify(&[2, 3], &[4, 8], 4),
            Layout::Strided {
                strides: vec![4, 8],
                span: 24
            }
        );
        assert_eq!(classify(&[3], &[0], 4), Layout::Gather);
        assert_eq!(classify(&[3], &[-4], 4), Layout::Gather);
        assert_eq!(classify(&[3], &[8], 4), Layout::Gather);
        assert_eq!(classify(&[2, 2], &[4, 4], 4), Layout::Gather);
    }

    #[test]
    fn gather_reads_strided_elements() {
        let src: Vec<u8> = (0..16).collect();
        // Reversed pairs of bytes.
        assert_eq!(
            gather(&src, 14, &[3], &[-2], 2).unwrap(),
            vec![14, 15, 12, 13, 10, 11]
        );
        // Broadcast.
        assert_eq!(
            gather(&src, 4, &[2, 2], &[0, 1], 1).unwrap(),
            vec![4, 5, 4, 5]
        );
        // 0-d.
        assert_eq!(gather(&src, 3, &[], &[], 1).unwrap(), vec![3]);
    }

    #[test]
    fn huge_gathers_are_resource_exhausted() {
        let src = [0u8; 4];
        let e = gather(&src, 0, &[1 << 40], &[0], 4).unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{e}");
        let e = gather(&src, 0, &[1 << 62, 1 << 62], &[0, 0], 4).unwrap_err();
        assert!(
            matches!(e, Error::ResourceExhausted(_) | Error::InvalidArgument(_)),
            "{e}"
        );
    }

    #[test]
    fn buffer_formats_carry_byte_order() {
        let f = buffer_format_type;
        assert_eq!(f("<f", 4), Some((ElementType::F32, ByteOrder::Little)));
        assert_eq!(f(">i", 4), Some((ElementType::S32, ByteOrder::Big)));
        assert_eq!(f("!d", 8), Some((ElementType::F64, ByteOrder::Big)));
        assert_eq!(f("l", 8), Some((ElementType::S64, ByteOrder::Native)));
        assert_eq!(f("<Zf", 8), Some((ElementType::C64, ByteOrder::Little)));
        assert_eq!(f("c", 1), Some((ElementType::U8, ByteOrder::Native)));
        assert_eq!(f("f", 8), None);
        assert_eq!(f("T{i}", 4), None);
        assert_eq!(f("2i", 8), None);
        assert!(is_raw_byte_format(">B") && is_raw_byte_format("c") && is_raw_byte_format("b"));
        assert!(!is_raw_byte_format("<i") && !is_raw_byte_format("?"));
    }

    #[test]
    fn plan_refuses_out_of_bounds_descriptions() {
        let bytes = [0u8; 16];
        let a = HostArray::from_slice(&bytes, ElementType::F32, &[5]);
        assert!(a.plan().unwrap_err().to_string().contains("16"));
        let a = HostArray::from_slice(&bytes, ElementType::F32, &[4]).with_byte_strides(&[-4], 8);
        assert!(a.plan().is_err());
        let a = HostArray::from_slice(&bytes, ElementType::F32, &[4]).with_byte_strides(&[-4], 12);
        assert_eq!(a.plan().unwrap(), (Layout::Gather, 4, 4));
        let a = HostArray::from_slice(&bytes, ElementType::S4, &[32]);
        assert_eq!(a.plan().unwrap(), (Layout::Dense { len: 16 }, 0, 32));
        let a = HostArray::from_slice(&bytes, ElementType::Token, &[]);
        assert!(a.plan().is_err());
    }
}
