//! Transfers at scale: full-speed staged copies, streaming uploads in bounded chunks with
//! progress, partial raw reads, and buffers without host data (uninitialised, error).
//!
//! **Staged copies.** A large dense copy (`put` with `copy=True`, or any borrowed host
//! data) is written into memory rpjrt maps itself and advises to use transparent huge
//! pages, then lent to the plugin zero-copy; when the buffer and the plugin's use of it are
//! gone, the block goes back to the staging pool ([`crate::staging`], bounded, released on
//! demand) and the next put of a similar size copies into its warm pages. The plugins' own
//! destination allocation uses 4 KiB pages and spends most of a 64 MiB copy in page faults;
//! 2 MiB pages cut the faults 512-fold and the pool removes them (and the kernel's page
//! clearing) from repeated puts. Nothing process-wide (malloc settings) changes.
//!
//! **Streaming.** [`Client::put_streaming`] goes through the plugin's async host-to-device
//! transfer manager: it allocates the device buffer, then fills it chunk by chunk from a
//! caller's function, reusing one host chunk, so peak extra host memory is one chunk
//! whatever the array's size. [`Upload`] is the lower-level handle for several buffers.
//! A plugin without the entries gives [`Error::Unsupported`] naming the missing one.

use std::sync::Arc;

use crate::client::buffer::{Buffer, BufferMeta};
use crate::client::{Client, Device, Memory};
use crate::dtype::{element_count, ElementType};
use crate::error::{Code, Error, Result};
use crate::raw::transfer::{create_error_buffer, create_uninitialized_buffer, TransferManager};

/// Dense copies at least this large are staged in huge-page memory (see the module docs);
/// smaller ones are left to the plugin, where the mapping would cost more than it saves.
pub const STAGING_THRESHOLD: usize = 4 << 20;

/// Default chunk size of streaming uploads: 64 MiB.
pub const DEFAULT_CHUNK: usize = 64 << 20;

/// Default size above which a streaming upload reports progress: 256 MiB.
pub const DEFAULT_PROGRESS_THRESHOLD: u64 = 256 << 20;

/// Progress of a transfer: `(bytes done, bytes in all)`; an error stops the transfer with
/// it (a progress bar's cancel button, an interrupted interpreter).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64) -> Result<()>;

/// Options of [`Client::put_streaming`].
pub struct StreamOptions<'a> {
    /// Bytes per chunk (at least 1; 0 is refused); one host chunk of this size is reused
    /// throughout.
    pub chunk_size: usize,
    /// Called after each chunk when the transfer is at least `progress_threshold` bytes.
    pub progress: Option<Progress<'a>>,
    /// Transfers smaller than this report no progress.
    pub progress_threshold: u64,
}

impl Default for StreamOptions<'_> {
    fn default() -> Self {
        StreamOptions {
            chunk_size: DEFAULT_CHUNK,
            progress: None,
            progress_threshold: DEFAULT_PROGRESS_THRESHOLD,
        }
    }
}

fn check_plain(t: ElementType, what: &str) -> Result<()> {
    if t == ElementType::Token || t.is_sub_byte() {
        return Err(Error::invalid(format!(
            "{what} takes byte-sized element types; {t} is not one"
        )));
    }
    Ok(())
}

/// The PJRT (absl) number of a status code.
fn code_number(code: Code) -> i32 {
    code.number()
}

fn target_memory(device: &Device, memory: Option<&Memory>) -> Result<Memory> {
    match memory {
        Some(m) => Ok(m.clone()),
        None => device.default_memory(),
    }
}

impl Client {
    /// Copies dense host bytes into a new buffer through pooled huge-page staging memory
    /// lent to the plugin zero-copy (see the module docs). Same checks as
    /// [`Client::buffer_from_host`]; the target is checked before anything is copied.
    pub fn put_staged(
        &self,
        data: &[u8],
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Buffer> {
        if element_type.is_sub_byte()
            || element_type == ElementType::Token
            || crate::dtype::needs_bool_normalising(element_type, data)
        {
            // Converted into a copy by the plain path anyway.
            return self.buffer_from_host(data, element_type, dims, None, device, memory);
        }
        crate::client::check_host_layout(data.len(), element_type, dims, None)?;
        self.check_put_target(element_type, dims, device, memory)?;
        let staged = crate::staging::stage(crate::staging::global(), data)?;
        self.buffer_from_lent_strided(Arc::new(staged), element_type, dims, None, device, memory)
    }

    /// A dense buffer of `element_type[dims]` whose contents are unspecified
    /// (`PJRT_Client_CreateUninitializedBuffer`), e.g. as an output to be overwritten.
    pub fn create_uninitialized_buffer(
        &self,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Buffer> {
        self.check_put_target(element_type, dims, device, memory)?;
        let raw = create_uninitialized_buffer(
            self.core().raw(),
            element_type.code(),
            dims,
            device.raw_ref(),
            memory.map(|m| m.raw_ref()),
            BufferMeta::new(self.core(), element_type, dims),
        )
        .map_err(|e| {
            let d = device.raw_ref();
            let core = self.core();
            core.with_memory_context(e, &[d], || core.array_request(element_type, dims, d))
        })?;
        let buffer = Buffer::from_raw(raw);
        // The CPU plugins ignore the memory asked for and place the buffer in the device's
        // default one: a buffer somewhere else than asked is refused, not handed out.
        if let Some(want) = memory {
            let got = buffer.memory()?;
            if got != *want {
                return Err(Error::Unsupported {
                    what: format!(
                        "an uninitialized buffer in memory {:?} (the plugin placed it in {:?} \
                         instead; put() or create an error buffer there, or copy it there \
                         with copy_to_memory)",
                        want.kind(),
                        got.kind()
                    ),
                    needs: self.core().api().version(),
                    plugin: self.core().api().version(),
                    missing_slot: true,
                });
            }
        }
        Ok(buffer)
    }

    /// A buffer of `element_type[dims]` that carries an error instead of data
    /// (`PJRT_Client_CreateErrorBuffer`): waiting on it, reading it or running a program on
    /// it reports `code` and `message`.
    pub fn create_error_buffer(
        &self,
        code: Code,
        message: &str,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Buffer> {
        self.check_put_target(element_type, dims, device, memory)?;
        let mem = target_memory(device, memory)?;
        let mut meta = BufferMeta::new(self.core(), element_type, dims);
        meta.set_chosen();
        let raw = create_error_buffer(
            self.core().raw(),
            code_number(code),
            message,
            element_type.code(),
            dims,
            mem.raw_ref(),
            meta,
        )?;
        Ok(Buffer::from_raw(raw))
    }

    pub(crate) fn check_put_target(
        &self,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<()> {
        self.core().check("client")?;
        if !Arc::ptr_eq(device.core(), self.core()) {
            return Err(Error::invalid(format!(
                "{device} belongs to another client"
            )));
        }
        if let Some(m) = memory {
            if !Arc::ptr_eq(m.core(), self.core()) {
                return Err(Error::invalid(format!("{m} belongs to another client")));
            }
        }
        if element_type == ElementType::Token {
            return Err(Error::invalid("a token has no array shape"));
        }
        self.core().api().require(
            &format!("element type {element_type}"),
            element_type.since_pjrt_minor(),
        )?;
        crate::dtype::array_bytes(element_type, dims)?;
        Ok(())
    }

    /// Starts an upload of several buffers through the async host-to-device transfer
    /// manager (`PJRT_Client_CreateBuffersForAsyncHostToDevice`): the plugin allocates them
    /// in `memory` (default: `device`'s default memory); fill each with [`Upload::write`].
    pub fn begin_upload(
        &self,
        shapes: &[(ElementType, Vec<i64>)],
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Upload> {
        if shapes.is_empty() {
            return Err(Error::invalid("an upload needs at least one buffer"));
        }
        let mut specs = Vec::with_capacity(shapes.len());
        let mut sizes = Vec::with_capacity(shapes.len());
        for (t, dims) in shapes {
            self.check_put_target(*t, dims, device, memory)?;
            check_plain(*t, "a streaming upload")?;
            let n = element_count(dims)?;
            let bytes = n
                .checked_mul(t.host_itemsize())
                .ok_or_else(|| Error::invalid(format!("{t}{dims:?} is too large to address")))?;
            specs.push((t.code(), dims.clone()));
            sizes.push(bytes);
        }
        let mem = target_memory(device, memory)?;
        let tm =
            TransferManager::create(self.core().raw(), &specs, mem.raw_ref()).map_err(|e| {
                let total = sizes.iter().map(|&b| b as u64).sum::<u64>();
                let what = format!("an upload of {} buffer(s), {total} bytes", sizes.len());
                (self.core())
                    .with_memory_context(e, &[device.raw_ref()], || Some((what, Some(total))))
            })?;
        let count = tm.buffer_count()?;
        if count != shapes.len() {
            return Err(Error::invalid(format!(
                "the transfer manager holds {count} buffers, {} were asked for",
                shapes.len()
            )));
        }
        for (i, &want) in sizes.iter().enumerate() {
            let on_device = tm.buffer_size(i)?;
            if on_device != want {
                return Err(Error::Unsupported {
                    what: format!(
                        "streaming into buffer {i}: its device form is {on_device} bytes, not \
                         the {want} bytes of the dense host form"
                    ),
                    needs: self.core().api().version(),
                    plugin: self.core().api().version(),
                    missing_slot: false,
                });
            }
        }
        Ok(Upload {
            client: self.clone(),
            tm,
            shapes: shapes.to_vec(),
            sizes,
            written: vec![0; shapes.len()],
            finished: vec![false; shapes.len()],
        })
    }

    /// Uploads `element_type[dims]` (dense, row-major) in chunks: `fill(offset, chunk)`
    /// writes bytes `offset..offset + chunk.len()` of the array into `chunk`, which is one
    /// reused host allocation of at most `options.chunk_size` bytes. Progress is reported
    /// per chunk for transfers of at least `options.progress_threshold` bytes.
    pub fn put_streaming(
        &self,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> Result<()>,
        options: StreamOptions<'_>,
    ) -> Result<Buffer> {
        let mut host: Vec<u8> = Vec::new();
        let mut lend = |offset: usize, n: usize, sink: &mut ChunkSink<'_>| -> Result<()> {
            // The first chunk is the largest: the allocation happens once.
            if host.len() < n {
                host.try_reserve_exact(n - host.len())
                    .map_err(|_| Error::ResourceExhausted(format!("a {n}-byte upload chunk")))?;
                host.resize(n, 0u8);
            }
            fill(offset, &mut host[..n])?;
            sink.write(&host[..n])
        };
        self.put_streaming_lent(element_type, dims, device, memory, &mut lend, options)
    }

    /// Like [`Client::put_streaming`], for data that already sits in host memory in pieces
    /// (a memory-mapped file, a caller's array): `lend(offset, len, sink)` hands bytes
    /// `offset..offset + len` of the row-major array to [`ChunkSink::write`] exactly once,
    /// in place, with no copy into a staging chunk. A `lend` that returns without writing, or
    /// writes a different length, stops the upload with an error naming the range.
    pub fn put_streaming_lent(
        &self,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
        lend: &mut dyn FnMut(usize, usize, &mut ChunkSink<'_>) -> Result<()>,
        options: StreamOptions<'_>,
    ) -> Result<Buffer> {
        if options.chunk_size == 0 {
            return Err(Error::invalid(
                "a streaming upload's chunk size must be at least 1",
            ));
        }
        let mut up = self.begin_upload(&[(element_type, dims.to_vec())], device, memory)?;
        let total = up.sizes[0];
        let mut progress = options.progress;
        let report = total as u64 >= options.progress_threshold;
        let mut offset = 0usize;
        loop {
            let len = options.chunk_size.min(total - offset);
            let mut sink = ChunkSink {
                upload: &mut up,
                offset,
                len,
                written: false,
            };
            lend(offset, len, &mut sink)?;
            if !sink.written {
                return Err(Error::invalid(format!(
                    "the source returned without lending bytes {offset}..{} of the array",
                    offset + len
                )));
            }
            offset += len;
            if report {
                if let Some(p) = progress.as_mut() {
                    p(offset as u64, total as u64)?;
                }
            }
            if offset >= total {
                break;
            }
        }
        up.finish(0)
    }
}

/// Where a [`Client::put_streaming_lent`] source hands over one chunk of the array.
pub struct ChunkSink<'a> {
    upload: &'a mut Upload,
    offset: usize,
    len: usize,
    written: bool,
}

impl std::fmt::Debug for ChunkSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ChunkSink(bytes {}..{}{})",
            self.offset,
            self.offset + self.len,
            if self.written { ", written" } else { "" }
        )
    }
}

impl ChunkSink<'_> {
    /// The chunk's first byte within the array.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The chunk's length: `bytes` given to [`ChunkSink::write`] must be exactly this long.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk is empty (only for a zero-size array).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hands the chunk's bytes to the plugin; returns once it is done with them, so they
    /// may be released or reused afterwards. Called once per chunk. `bool` bytes other than
    /// 0/1 are normalised as [`Upload::write`] says.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if self.written {
            return Err(Error::invalid(format!(
                "bytes {}..{} of the array were already lent",
                self.offset,
                self.offset + self.len
            )));
        }
        if bytes.len() != self.len {
            return Err(Error::invalid(format!(
                "the source lent {} bytes for bytes {}..{} of the array; it must lend exactly {}",
                bytes.len(),
                self.offset,
                self.offset + self.len,
                self.len
            )));
        }
        let last = self.offset + self.len == self.upload.sizes[0];
        self.upload.write(0, self.offset, bytes, last)?;
        self.written = true;
        Ok(())
    }
}

/// An upload of several buffers through the plugin's async host-to-device transfer
/// manager (see [`Client::begin_upload`]).
pub struct Upload {
    client: Client,
    tm: TransferManager,
    shapes: Vec<(ElementType, Vec<i64>)>,
    sizes: Vec<usize>,
    written: Vec<usize>,
    finished: Vec<bool>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("shapes", &self.shapes)
            .field("written", &self.written)
            .field("finished", &self.finished)
            .finish()
    }
}

impl Upload {
    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// Whether the upload holds no buffers (never: `begin_upload` refuses that).
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// Bytes of buffer `index` (dense row-major host form, equal to its device form).
    pub fn size(&self, index: usize) -> Result<usize> {
        self.check_index(index)?;
        Ok(self.sizes[index])
    }

    fn check_index(&self, index: usize) -> Result<()> {
        if index >= self.shapes.len() {
            return Err(Error::invalid(format!(
                "buffer index {index} is out of range for an upload of {}",
                self.shapes.len()
            )));
        }
        Ok(())
    }

    /// Writes `data` at byte `offset` of buffer `index`, in order (`offset` must be where
    /// the previous write ended); `is_last` completes the buffer and must be given exactly
    /// when the write reaches its end. Returns once the plugin is done with `data`. Bytes of
    /// a `bool` buffer are stored as `Client::put` stores them: nonzero is true (1).
    pub fn write(&mut self, index: usize, offset: usize, data: &[u8], is_last: bool) -> Result<()> {
        self.check_index(index)?;
        if self.finished[index] {
            return Err(Error::invalid(format!(
                "buffer {index} of the upload was already completed"
            )));
        }
        if offset != self.written[index] {
            return Err(Error::invalid(format!(
                "upload writes must be in order: buffer {index} is written up to byte {}, \
                 this write starts at {offset}",
                self.written[index]
            )));
        }
        let end = offset
            .checked_add(data.len())
            .filter(|&e| e <= self.sizes[index])
            .ok_or_else(|| {
                Error::invalid(format!(
                    "a write of {} bytes at {offset} runs past buffer {index}'s {} bytes",
                    data.len(),
                    self.sizes[index]
                ))
            })?;
        if is_last != (end == self.sizes[index]) {
            return Err(Error::invalid(format!(
                "is_last must be set exactly on the write that ends buffer {index} (this one \
                 ends at {end} of {})",
                self.sizes[index]
            )));
        }
        self.client.core().check("client")?;
        // Bool bytes other than 0/1 are normalised into a copy, as `Client::put` does (PJRT
        // assumes 0/1 and some plugins compute wrong answers otherwise); other types pay
        // one comparison.
        let normalised;
        let data = if crate::dtype::needs_bool_normalising(self.shapes[index].0, data) {
            normalised = crate::dtype::normalised_bools(data)?;
            normalised.as_slice()
        } else {
            data
        };
        self.tm.transfer_blocking(index, data, offset, is_last)?;
        self.written[index] = end;
        self.finished[index] = is_last;
        Ok(())
    }

    /// The buffer `index` once all of it was written.
    pub fn finish(&mut self, index: usize) -> Result<Buffer> {
        self.check_index(index)?;
        if !self.finished[index] {
            return Err(Error::invalid(format!(
                "buffer {index} of the upload is incomplete: {} of {} bytes written",
                self.written[index], self.sizes[index]
            )));
        }
        self.client.core().check("client")?;
        let (t, dims) = &self.shapes[index];
        let raw = self
            .tm
            .retrieve(index, BufferMeta::new(self.client.core(), *t, dims))?;
        Ok(Buffer::from_raw(raw))
    }
}

impl Buffer {
    /// Copies `dst.len()` bytes starting at byte `offset` of the buffer's on-device
    /// representation into `dst` (`PJRT_Buffer_CopyRawToHost`), e.g. to read a large buffer
    /// in pieces. On the CPU plugins the device form of a dense array is its row-major
    /// bytes. A buffer put with a non-default layout is refused (see `check_raw_read`).
    pub fn copy_raw_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check_raw_read(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.raw().copy_raw_to_host(offset, dst)
    }

    /// The checks of a raw read of `len` bytes at `offset`: a live buffer with the default
    /// layout (the plugins disagree on the bytes of one put with another: one holds them
    /// in that layout's order, the other row-major), and a range inside its on-device size.
    /// A caller that allocates the destination makes these checks first.
    pub fn check_raw_read(&self, offset: usize, len: usize) -> Result<()> {
        self.check()?;
        if self.raw().meta().non_default_layout() {
            return Err(Error::invalid(
                "a buffer put with a non-default device layout (or a copy of one) has no raw \
                 form that every plugin agrees on (one holds its bytes in that layout's order, \
                 another row-major): read it with to_host/to_numpy, which give row-major data",
            ));
        }
        let size = self.on_device_size()?;
        if offset.checked_add(len).is_none_or(|e| e > size) {
            return Err(Error::invalid(format!(
                "raw read of {len} bytes at offset {offset} runs past the buffer's {size} bytes"
            )));
        }
        Ok(())
    }
}

/// The promise that completes an alias buffer (see [`Client::create_alias_buffer`]). Dropped
/// unfulfilled, it completes the alias with a `CANCELLED` error so nothing waits forever.
pub struct AliasFulfiller {
    client: Client,
    /// The plugin's completion, shared with the pending list (`client::alias`).
    slot: Arc<crate::client::alias::AliasSlot>,
    element_type: ElementType,
    dims: Vec<i64>,
    device: Device,
    /// The alias buffer's identity, in the pending list while its completion is unused.
    alias: usize,
    /// Keeps the alias alive while pending, so that its identity cannot pass to another
    /// buffer meanwhile.
    _alias_buffer: Buffer,
    /// The alias's memory, read when it was made (a donated alias's handle is gone, and the
    /// execution it went to waits for its contents); `None` where the plugin has no
    /// memories.
    memory: Option<Memory>,
}

impl std::fmt::Debug for AliasFulfiller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AliasFulfiller")
            .field("element_type", &self.element_type)
            .field("dims", &self.dims)
            .field("pending", &!self.slot.is_taken())
            .finish()
    }
}

impl AliasFulfiller {
    /// The alias's element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }

    /// The alias's dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Completes the alias with `target`'s contents: a buffer of the same client, element
    /// type, shape and device. The fulfiller is consumed either way: a mismatch is an
    /// error and the alias is then cancelled as the fulfiller drops, so test a target you
    /// are not sure of with [`AliasFulfiller::check`] first.
    ///
    /// The plugin moves `target` into the alias (both CPU plugins consume it, as a donation
    /// does), so `target` is marked deleted: later use is [`Error::Deleted`] instead of the
    /// plugin's "deleted or donated" complaint. A target with live host views or external
    /// references is refused, since its memory may not move while they exist, and so is one
    /// that reads its caller's memory in place (a put without a copy, a DLPack import); one
    /// in rpjrt's staging memory (a large put) is copied on the device first.
    pub fn fulfill(self, target: &Buffer) -> Result<()> {
        self.check(target)?;
        if target.borrows_host() {
            // rpjrt's own staging memory (a large put), which the alias must not keep from
            // the pool: the alias gets a copy on the device, and the target is consumed as
            // a moved one is.
            let copy = match &self.memory {
                Some(m) => target.copy_to_memory(m)?,
                None => target.copy_to_device(&self.device)?,
            };
            self.fulfill(&copy)?;
            // Consumed like a moved target; a host view that keeps it alive is the
            // caller's to drop, and the alias is complete either way.
            let _ = target.delete();
            return Ok(());
        }
        target
            .raw()
            .reserve_donation()
            .map_err(|e| target.state_error(e, "moved into an alias"))?;
        crate::client::alias::settled(self.alias);
        let Some(cb) = self.slot.take() else {
            target.raw().cancel_donation();
            return Err(Error::Deleted(
                "the alias buffer was deleted, which failed it: nothing can fulfill it".into(),
            ));
        };
        let r = crate::raw::transfer::fulfill_alias_buffer(
            self.client.core().raw(),
            cb,
            Some(target.raw()),
            0,
            "",
        );
        if r.is_err() {
            target.raw().cancel_donation();
        }
        r
    }

    /// Completes the alias with an error: waiting on it or using it reports `code`/`message`.
    pub fn fail(self, code: Code, message: &str) -> Result<()> {
        // After `Client::close` the alias is failed on drop, with its own message.
        self.client.core().check("alias buffer")?;
        crate::client::alias::settled(self.alias);
        let Some(cb) = self.slot.take() else {
            // Its deletion failed it already.
            return Ok(());
        };
        match crate::raw::transfer::fulfill_alias_buffer::<BufferMeta>(
            self.client.core().raw(),
            cb,
            None,
            code_number(code),
            message,
        ) {
            // Some plugins hand the error they were given back from the call itself.
            Err(Error::Pjrt { code: c, .. }) if c == code => Ok(()),
            r => r,
        }
    }
}

impl AliasFulfiller {
    /// Whether `target` can complete this alias (same client, element type, shape, device
    /// and memory, not deleted): the error [`AliasFulfiller::fulfill`] would give, without
    /// giving up the fulfiller.
    pub fn check(&self, target: &Buffer) -> Result<()> {
        target.check()?;
        // Deleting the alias failed it (`client::alias::deleted`): nothing can complete it
        // now. An alias donated to an execution is not: that execution waits for its
        // contents.
        if self.slot.is_taken() {
            return Err(Error::Deleted(
                "the alias buffer was deleted, which failed it: fulfilling it would consume \
                 the target for nothing"
                    .into(),
            ));
        }
        let at = target.raw().handle_id();
        if at == self.alias {
            return Err(Error::invalid(
                "an alias buffer cannot be fulfilled with itself",
            ));
        }
        if crate::client::alias::is_pending(at) {
            return Err(Error::invalid(
                "the target is an alias buffer that is not fulfilled yet: the two would wait \
                 for each other (fulfill the target first)",
            ));
        }
        if !Arc::ptr_eq(target.core(), self.client.core()) {
            return Err(Error::invalid(
                "the target buffer belongs to another client",
            ));
        }
        if target.element_type() != self.element_type || target.dims() != self.dims.as_slice() {
            return Err(Error::invalid(format!(
                "the alias is {}{:?}, but the target buffer is {}{:?}",
                self.element_type,
                self.dims,
                target.element_type(),
                target.dims()
            )));
        }
        let d = target.device()?;
        if d != self.device {
            return Err(Error::invalid(format!(
                "the alias is on {}, but the target buffer is on {d}",
                self.device
            )));
        }
        if let Some(want) = &self.memory {
            let got = target.memory()?;
            if *want != got {
                return Err(Error::invalid(format!(
                    "the alias is in memory {:?} of {}, but the target buffer is in {:?} (copy \
                     it there first, with copy_to_memory)",
                    want.kind(),
                    self.device,
                    got.kind()
                )));
            }
        }
        if target.raw().meta().non_default_layout() {
            return Err(Error::invalid(
                "the target buffer has a non-default device layout (put with one, or a copy \
                 of such a buffer): programs would read the alias as row-major bytes",
            ));
        }
        if target.raw().borrows_callers_memory() {
            // The alias would take over the caller's memory, which the plugin reads in
            // place: it would go on reading the caller's array after the target is gone,
            // and the target's release, which waits until the plugin is done with that
            // memory, would wait for as long as the alias lives.
            return Err(Error::invalid(
                "the target buffer reads its caller's memory in place (a put without a copy, \
                 or a DLPack import), which an alias cannot take over: fulfill it with a copy \
                 of the target on its device",
            ));
        }
        Ok(())
    }
}

impl Drop for AliasFulfiller {
    fn drop(&mut self) {
        crate::client::alias::settled(self.alias);
        if let Some(cb) = self.slot.take() {
            // Also after `Client::close`, which only marks the client: the plugin's client
            // lives on while this alias does, and a thread may be waiting on it.
            let _ = crate::raw::transfer::fulfill_alias_buffer::<BufferMeta>(
                self.client.core().raw(),
                cb,
                None,
                1,
                "the alias buffer's fulfiller was dropped unfulfilled",
            );
        }
    }
}

impl Client {
    /// A buffer of `element_type[dims]` whose contents are given later: by another buffer
    /// through [`AliasFulfiller::fulfill`], or an error through [`AliasFulfiller::fail`]
    /// (`PJRT_Client_CreateAliasBuffer` / `PJRT_Client_FulfillAliasBuffer`).
    pub fn create_alias_buffer(
        &self,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<(Buffer, AliasFulfiller)> {
        self.check_put_target(element_type, dims, device, memory)?;
        // The CPU plugins give an alias of a packed type a layout no buffer of that type
        // matches ("expected s4[2], got s4[2]"): refused here instead of made unfillable.
        if element_type.byte_width().is_none() {
            return Err(Error::invalid(format!(
                "an alias buffer of {element_type} (packed below a byte) cannot be created: \
                 no buffer could fulfill it; alias a whole-byte type, or fill a {element_type} \
                 buffer directly"
            )));
        }
        let mem = target_memory(device, memory)?;
        // Its contents or error are the program's: a failed alias is never an allocation.
        let mut meta = BufferMeta::new(self.core(), element_type, dims);
        meta.set_chosen();
        let (raw, cb) = crate::raw::transfer::create_alias_buffer(
            self.core().raw(),
            mem.raw_ref(),
            element_type.code(),
            dims,
            meta,
        )?;
        let alias = raw.handle_id();
        let slot = crate::client::alias::register(alias, cb, self.core());
        let buffer = Buffer::from_raw(raw);
        let memory = buffer.memory().ok();
        Ok((
            buffer.clone(),
            AliasFulfiller {
                client: self.clone(),
                slot,
                element_type,
                dims: dims.to_vec(),
                device: device.clone(),
                alias,
                _alias_buffer: buffer,
                memory,
            },
        ))
    }
}
