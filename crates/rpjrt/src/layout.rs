//! Device layouts through the PJRT Layouts extension, byte strides, and copies to host into
//! a caller's strided destination.
//!
//! The Layouts extension's struct grew under a constant version (72 bytes at PJRT 0.81, 80
//! at 0.115); rpjrt reads a slot only when it lies inside the size the plugin reports.
//! Layouts come back serialized (XLA's layout text, e.g. `{1,0}`, on the CPU plugins; a
//! `LayoutProto` is accepted too), decoded here into [`DeviceLayout`].

use crate::client::buffer::Buffer;
use crate::client::Client;
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::raw::layout::layouts_ext;

/// The subset of XLA's `LayoutProto` rpjrt reads.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TileProto {
        #[prost(int64, repeated, tag = "1")]
        pub dimensions: Vec<i64>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LayoutProto {
        #[prost(int64, repeated, tag = "1")]
        pub minor_to_major: Vec<i64>,
        #[prost(message, repeated, tag = "6")]
        pub tiles: Vec<TileProto>,
        #[prost(int64, tag = "7")]
        pub element_size_in_bits: i64,
        #[prost(int64, tag = "8")]
        pub memory_space: i64,
    }
}

/// A buffer's layout in device memory, as the plugin's Layouts extension reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLayout {
    /// Dimension numbers from the fastest-varying to the slowest.
    pub minor_to_major: Vec<i64>,
    /// Tile shapes, outermost first (empty for a plain dense layout).
    pub tiles: Vec<Vec<i64>>,
    /// Bits per element when packed (0: the type's natural size).
    pub element_size_bits: i64,
    /// The memory space number (0: the default).
    pub memory_space: i64,
    /// The bytes the plugin serialized.
    pub serialized: Vec<u8>,
}

impl DeviceLayout {
    fn parse(bytes: Vec<u8>) -> Result<DeviceLayout> {
        if bytes.first() == Some(&b'{') {
            return Self::parse_text(bytes);
        }
        use prost::Message;
        let p = proto::LayoutProto::decode(bytes.as_slice()).map_err(|e| {
            Error::invalid(format!(
                "the plugin's layout is neither XLA layout text nor a LayoutProto: {e}"
            ))
        })?;
        Ok(DeviceLayout {
            minor_to_major: p.minor_to_major,
            tiles: p.tiles.into_iter().map(|t| t.dimensions).collect(),
            element_size_bits: p.element_size_in_bits,
            memory_space: p.memory_space,
            serialized: bytes,
        })
    }

    /// XLA's layout text: `{1,0}` or `{1,0:T(8,128)(2,1)E(4)S(1)}` (tiles, element size in
    /// bits, memory space; other attributes are ignored).
    fn parse_text(bytes: Vec<u8>) -> Result<DeviceLayout> {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let bad = || Error::invalid(format!("cannot read the plugin's layout {text:?}"));
        let inner = text
            .trim()
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(bad)?;
        let (dims, attrs) = inner.split_once(':').unwrap_or((inner, ""));
        let ints = |s: &str| -> Result<Vec<i64>> {
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| p.parse::<i64>().map_err(|_| bad()))
                .collect()
        };
        let minor_to_major = ints(dims)?;
        let mut tiles = Vec::new();
        let (mut element_size_bits, mut memory_space) = (0, 0);
        let mut rest = attrs.trim();
        while let Some(c) = rest.chars().next() {
            rest = &rest[c.len_utf8()..];
            let mut groups = Vec::new();
            while let Some(r) = rest.strip_prefix('(') {
                let close = r.find(')').ok_or_else(bad)?;
                groups.push(&r[..close]);
                rest = &r[close + 1..];
            }
            match c {
                'T' => {
                    for g in groups {
                        tiles.push(ints(&g.replace('*', "-1"))?);
                    }
                }
                'E' => {
                    element_size_bits = groups
                        .first()
                        .map_or(Ok(0), |g| g.trim().parse().map_err(|_| bad()))?
                }
                'S' => {
                    memory_space = groups
                        .first()
                        .map_or(Ok(0), |g| g.trim().parse().map_err(|_| bad()))?
                }
                _ => {}
            }
        }
        Ok(DeviceLayout {
            minor_to_major,
            tiles,
            element_size_bits,
            memory_space,
            serialized: bytes,
        })
    }

    /// Whether this is dense row-major (`minor_to_major` = `[rank-1, ..., 0]`, no tiles).
    pub fn is_row_major(&self) -> bool {
        let n = self.minor_to_major.len() as i64;
        self.tiles.is_empty()
            && self
                .minor_to_major
                .iter()
                .enumerate()
                .all(|(i, &d)| d == n - 1 - i as i64)
    }

    /// Byte strides of an untiled layout for `dims` of `itemsize`-byte elements; `None`
    /// for tiled layouts, which have no strides, and when `minor_to_major` is not an order
    /// of the dimensions (each exactly once).
    pub fn byte_strides(&self, dims: &[i64], itemsize: usize) -> Option<Vec<i64>> {
        if !self.tiles.is_empty() {
            return None;
        }
        let order = dimension_order(&self.minor_to_major, dims.len())?;
        let mut strides = vec![0i64; dims.len()];
        let mut step = itemsize as i64;
        for d in order {
            strides[d] = step;
            step = step.checked_mul(dims[d].max(1))?;
        }
        Some(strides)
    }
}

/// `minor_to_major` as dimension indices when it is a permutation of `0..rank`, the only
/// orders a dense layout can have; `None` for any other list a plugin reports (a repeated
/// or missing dimension would give strides that address bytes outside the buffer).
pub(crate) fn dimension_order(minor_to_major: &[i64], rank: usize) -> Option<Vec<usize>> {
    let mut seen = vec![false; rank];
    let order = minor_to_major
        .iter()
        .map(|&d| {
            let d = usize::try_from(d).ok().filter(|&d| d < rank && !seen[d])?;
            seen[d] = true;
            Some(d)
        })
        .collect::<Option<Vec<usize>>>()?;
    (order.len() == rank).then_some(order)
}

impl Buffer {
    /// A dense row-major host copy whatever the device layout: buffers whose device layout
    /// is not the default row-major one are read with an explicit row-major host layout.
    pub fn to_vec_row_major(&self) -> Result<Vec<u8>> {
        self.check()?;
        let row_major = match self.layout() {
            Ok(Some(m2m)) => {
                let n = m2m.len() as i64;
                m2m.iter().enumerate().all(|(i, &d)| d == n - 1 - i as i64)
            }
            _ => true,
        };
        if row_major || self.element_type().is_sub_byte() || self.dims().len() < 2 {
            return self.to_vec();
        }
        self.block_until_ready()?;
        let _span =
            crate::trace::span(crate::trace::Category::Fetch, "to_host").bytes(self.host_size());
        let what = self.host_copy_text("a row-major host copy");
        let mut v = crate::dtype::try_zeroed(self.host_size(), &what)?;
        self.raw().to_host_row_major(self.dims().len(), &mut v)?;
        Ok(v)
    }

    /// The buffer's device layout through the plugin's Layouts extension
    /// (`Error::Unsupported` when the plugin lacks the extension or the entry).
    pub fn device_layout(&self) -> Result<DeviceLayout> {
        self.check()?;
        let ext = layouts_ext(self.core().api())?;
        DeviceLayout::parse(ext.buffer_layout(self.raw())?)
    }

    /// Byte strides of the buffer's device layout (from the core API's
    /// `PJRT_Buffer_GetMemoryLayout`); errors for a tiled layout.
    pub fn byte_strides(&self) -> Result<Vec<i64>> {
        let itemsize = self.element_type().byte_width().ok_or_else(|| {
            Error::invalid(format!(
                "{} elements are not whole bytes, so they have no byte strides",
                self.element_type()
            ))
        })?;
        let m2m = self.layout()?.ok_or_else(|| {
            Error::invalid("the buffer's layout is not a plain dense one (no byte strides)")
        })?;
        let l = DeviceLayout {
            minor_to_major: m2m.clone(),
            tiles: Vec::new(),
            element_size_bits: 0,
            memory_space: 0,
            serialized: Vec::new(),
        };
        l.byte_strides(self.dims(), itemsize).ok_or_else(|| {
            Error::invalid(format!(
                "the plugin reports the layout {m2m:?}, which is not an order of the \
                     buffer's {} dimensions",
                self.dims().len()
            ))
        })
    }

    /// Checks that this buffer can be copied to a host array whose element type is named
    /// `type_name` (numpy's `dtype.name`, where the destination states one): refuses a
    /// deleted buffer, the token (no data) and another type's name. The first step of
    /// [`Buffer::check_host_destination`], for a binding to call before it asks the
    /// destination for its memory.
    pub fn check_host_type(&self, type_name: Option<&str>) -> Result<()> {
        self.check()?;
        let t = self.element_type();
        if t == ElementType::Token {
            return Err(Error::invalid("a token has no data to copy to the host"));
        }
        if let Some(name) = type_name {
            if name != t.name() {
                return Err(Error::invalid(format!(
                    "the destination holds {name}, but the buffer holds {t} (a copy to the host does \
                     not convert)"
                )));
            }
        }
        Ok(())
    }

    /// Checks that a caller's host array can receive this buffer's elements as they are
    /// (no conversion), and returns the byte range `(lo, end)` it addresses, relative to its
    /// first element (`lo <= 0` with negative strides; `(0, 0)` when it is empty). The
    /// caller then lends those bytes to [`Buffer::copy_to_host_strided`] with offset `-lo`.
    ///
    /// In this order, each refusal naming what is wrong: [`Buffer::check_host_type`] (a
    /// deleted buffer, the token, a stated type name that is not the buffer's), a format
    /// that names no element type or another one than the buffer's or its carrier's
    /// ([`crate::host::carrier_type`]: bfloat16 into `uint16`, ...), foreign byte order
    /// for multi-byte elements, another shape, and strides whose extent overflows.
    pub fn check_host_destination(&self, dest: &HostDestination<'_>) -> Result<(i128, i128)> {
        self.check_host_type(dest.type_name)?;
        let t = self.element_type();
        let fmt = dest.format;
        let Some((ft, order)) = crate::host::buffer_format_type(fmt, dest.itemsize) else {
            return Err(Error::invalid(format!(
                "the destination's format {fmt:?} ({}-byte items) is no element type; the \
                 buffer holds {t}",
                dest.itemsize
            )));
        };
        if ft != t && ft != crate::host::carrier_type(t) {
            return Err(Error::invalid(format!(
                "the destination holds {ft}, but the buffer holds {t} (a copy to the host does \
                 not convert)"
            )));
        }
        if order.is_foreign() && dest.itemsize > 1 {
            return Err(Error::invalid(format!(
                "the destination is in foreign byte order (format {fmt:?}); a copy to the \
                 host writes native order"
            )));
        }
        if dest.dims != self.dims() {
            return Err(Error::invalid(format!(
                "the destination has shape {}, but the buffer has shape {}",
                shape_tuple(dest.dims),
                shape_tuple(self.dims())
            )));
        }
        Ok(crate::host::extent(dest.dims, dest.byte_strides, dest.itemsize)?.unwrap_or((0, 0)))
    }

    /// Copies the buffer into a caller's strided destination: element `[i, j, ...]` goes to
    /// byte `offset + i*byte_strides[0] + j*byte_strides[1] + ...` of `dst`. Strides may be
    /// negative; two elements may not land on overlapping bytes; every addressed byte must
    /// lie inside `dst`. Sub-byte types (int4 ...) are written one element per byte, low
    /// bits only, as numpy / ml_dtypes hold them; the token has no data and is refused.
    pub fn copy_to_host_strided(
        &self,
        dst: &mut [u8],
        byte_strides: &[i64],
        offset: usize,
    ) -> Result<()> {
        let t = self.element_type();
        let itemsize = match t {
            ElementType::Token => {
                return Err(Error::invalid(
                    "a token has no data to copy to the host".to_string(),
                ))
            }
            _ => t.host_itemsize(),
        };
        let dims = self.dims().to_vec();
        if byte_strides.len() != dims.len() {
            return Err(Error::invalid(format!(
                "{} byte strides given for a rank-{} buffer",
                byte_strides.len(),
                dims.len()
            )));
        }
        let Some((lo, end)) = crate::host::extent(&dims, byte_strides, itemsize)? else {
            return Ok(()); // empty
        };
        let base = offset as i128;
        if base + lo < 0 || base + end > dst.len() as i128 {
            return Err(Error::invalid(format!(
                "a {t}{dims:?} array with byte strides {byte_strides:?} from offset {offset} \
                 addresses bytes {}..{}, outside the destination's {} bytes",
                base + lo,
                base + end,
                dst.len()
            )));
        }
        // A dense row-major destination takes the host-array form as it is: one copy,
        // straight from the buffer, with no intermediate vector (memcpy speed).
        if crate::host::is_c_contiguous(&dims, byte_strides, itemsize) {
            let len = self.host_array_size();
            let start = usize::try_from(base + lo).expect("checked inside the destination");
            return self.to_host_array(&mut dst[start..start + len]);
        }
        // No two elements may share bytes: sorted by |stride|, each stride must clear the
        // extent of everything faster-varying.
        let mut order: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] > 1).collect();
        order.sort_by_key(|&i| byte_strides[i].unsigned_abs());
        let mut span = itemsize as u128;
        for &i in &order {
            let s = byte_strides[i].unsigned_abs() as u128;
            if s < span {
                return Err(Error::invalid(format!(
                    "byte strides {byte_strides:?} make elements of the destination overlap"
                )));
            }
            span += s * (dims[i] as u128 - 1);
        }
        let n = crate::dtype::element_count(&dims)?;
        let mut dense = self.to_vec_row_major()?;
        if t.is_sub_byte() {
            let mask = ((1u16 << t.bit_width()) - 1) as u8;
            dense = crate::dtype::try_unpack_sub_byte(t, &dense, n)?;
            dense.iter_mut().for_each(|x| *x &= mask);
        }
        let mut index = vec![0i64; dims.len()];
        for k in 0..n {
            let mut at = base;
            for (d, &i) in index.iter().enumerate() {
                at += i as i128 * byte_strides[d] as i128;
            }
            let at = at as usize;
            dst[at..at + itemsize].copy_from_slice(&dense[k * itemsize..(k + 1) * itemsize]);
            for d in (0..dims.len()).rev() {
                index[d] += 1;
                if index[d] < dims[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(())
    }
}

/// A shape as Python writes a tuple: `(3,)`, `(2, 3)`, `()`.
fn shape_tuple(dims: &[i64]) -> String {
    match dims {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A caller's writable host array, as a binding describes it (a Python buffer-protocol
/// export, a numpy array), for [`Buffer::check_host_destination`].
#[derive(Clone, Copy, Debug)]
pub struct HostDestination<'a> {
    /// The element type's name where the destination states one (numpy's `dtype.name`);
    /// it must be the buffer's.
    pub type_name: Option<&'a str>,
    /// The buffer-protocol (PEP 3118) format of one element, e.g. `"<f"` or `"H"`.
    pub format: &'a str,
    /// Bytes per element.
    pub itemsize: usize,
    /// The shape.
    pub dims: &'a [i64],
    /// The byte stride of each dimension (negative ones allowed).
    pub byte_strides: &'a [i64],
}

impl Client {
    /// The plugin's default device layout for `element_type[dims]` (Layouts extension).
    pub fn default_layout(&self, element_type: ElementType, dims: &[i64]) -> Result<DeviceLayout> {
        self.core().check("client")?;
        crate::dtype::array_bytes(element_type, dims)?;
        let ext = layouts_ext(self.core().api())?;
        DeviceLayout::parse(ext.default_layout(self.core().raw(), element_type.code(), dims)?)
    }

    /// Size in bytes of the plugin's Layouts extension struct (72 at PJRT 0.81, 80 at
    /// 0.115); `Unsupported` when the plugin has none.
    pub fn layouts_extension_size(&self) -> Result<usize> {
        Ok(layouts_ext(self.core().api())?.struct_size())
    }
}

impl Client {
    /// [`Client::put_with_layout`] from a host array description (any byte strides and
    /// byte order, as [`Client::put`] takes): the array is made dense first (a copy).
    pub fn put_array_with_layout(
        &self,
        array: &crate::host::HostArray<'_>,
        minor_to_major: &[i64],
        device: &crate::client::Device,
        memory: Option<&crate::client::Memory>,
    ) -> Result<Buffer> {
        let dense = array.to_dense()?;
        self.put_with_layout(
            &dense,
            array.element_type(),
            array.dims(),
            minor_to_major,
            device,
            memory,
        )
    }

    /// Copies dense row-major host bytes into a new buffer whose device layout has the
    /// given `minor_to_major` order (e.g. `[0, 1]` for column-major 2-d), as
    /// `PJRT_Client_BufferFromHostBuffer`'s `device_layout` asks. Plugins that cannot honour
    /// the request return their error. Host reads of the buffer are row-major as always.
    ///
    /// A buffer with a non-default layout is refused as an execute argument: programs take
    /// the default layout, and plugins disagree on such a buffer (the 0.81 CPU plugin
    /// converts it, the 0.115 one reads its bytes as if they were row-major — a silent wrong
    /// answer, measured). Read it back with `to_host` (always row-major) or copy it first.
    pub fn put_with_layout(
        &self,
        data: &[u8],
        element_type: ElementType,
        dims: &[i64],
        minor_to_major: &[i64],
        device: &crate::client::Device,
        memory: Option<&crate::client::Memory>,
    ) -> Result<Buffer> {
        self.core().check("client")?;
        let itemsize = element_type
            .byte_width()
            .filter(|_| element_type != ElementType::Token && element_type != ElementType::Pred)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "a put with a device layout takes whole-byte numeric elements; \
                     {element_type} is not one"
                ))
            })?;
        if dimension_order(minor_to_major, dims.len()).is_none() {
            return Err(Error::invalid(format!(
                "minor_to_major {minor_to_major:?} is not a permutation of the {} dimensions",
                dims.len()
            )));
        }
        let need = crate::dtype::element_count(dims)?
            .checked_mul(itemsize)
            .ok_or_else(|| Error::invalid("the array is too large to address"))?;
        if data.len() != need {
            return Err(Error::invalid(format!(
                "{element_type}{dims:?} needs {need} bytes of dense data, got {}",
                data.len()
            )));
        }
        // Same target checks as every put.
        let _ = self.default_device()?;
        let raw = crate::raw::transfer::buffer_from_host_with_layout(
            self.core().raw(),
            data,
            element_type.code(),
            dims,
            minor_to_major,
            device.raw_ref(),
            memory.map(|m| m.raw_ref()),
            {
                let mut meta =
                    crate::client::buffer::BufferMeta::new(self.core(), element_type, dims);
                // Row-major is minor_to_major = [rank-1, ..., 0]; anything else is marked.
                meta.set_non_default_layout(
                    minor_to_major
                        .iter()
                        .rev()
                        .enumerate()
                        .any(|(i, &d)| d != i as i64),
                );
                meta
            },
        )?;
        Ok(Buffer::from_raw(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_text_is_read() {
        let l = DeviceLayout::parse(b"{1,0}".to_vec()).unwrap();
        assert_eq!((l.minor_to_major, l.tiles.len()), (vec![1, 0], 0));
        let l = DeviceLayout::parse(b"{0,1:T(8,128)(2,1)E(4)S(1)}".to_vec()).unwrap();
        assert_eq!(l.minor_to_major, vec![0, 1]);
        assert_eq!(l.tiles, vec![vec![8, 128], vec![2, 1]]);
        assert_eq!((l.element_size_bits, l.memory_space), (4, 1));
        assert_eq!(l.byte_strides(&[2, 3], 4), None);
        assert!(DeviceLayout::parse(b"{}".to_vec())
            .unwrap()
            .minor_to_major
            .is_empty());
        assert!(DeviceLayout::parse(b"{1,x}".to_vec()).is_err());
        let l = DeviceLayout::parse(b"{0,1}".to_vec()).unwrap();
        assert_eq!(l.byte_strides(&[2, 3], 4), Some(vec![4, 8]));
        assert!(!l.is_row_major());
    }
}
