//! Safe wrappers over the CUDA driver calls in `raw`.
//!
//! Device memory is addressed by [`DevicePtr`] (a plain device address, as XLA's FFI and
//! DLPack hand them out); a bad address or a kernel fault is reported by the driver as an
//! error, never as host memory corruption. Host memory given to asynchronous copies is a
//! [`PinnedBuffer`], which waits for its last copy before it is read, written or freed.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::raw::{Driver, HostAlloc};
use rpjrt::{Error, Result};

/// An argument rpjrt-cuda refuses before the driver sees it.
fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// A zeroed host vector of `len` bytes for `what`, made fallibly: a size no allocation can
/// have (above `isize::MAX`) is `InvalidArgument`, one the system cannot give is
/// `ResourceExhausted`; both name the size. Never an abort.
pub(crate) fn host_bytes(len: usize, what: &str) -> Result<Vec<u8>> {
    if isize::try_from(len).is_err() {
        return Err(invalid(format!(
            "{what}: {len} bytes is more than any host allocation can hold (at most {} bytes)",
            isize::MAX
        )));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::ResourceExhausted(format!(
            "{what} needs a host allocation of {len} bytes, which cannot be made"
        ))
    })?;
    v.resize(len, 0);
    Ok(v)
}

/// CUDA's limits on launch shapes (every compute capability since 3.0): threads per block
/// in total and per dimension, and blocks per grid per dimension.
const MAX_THREADS_PER_BLOCK: u64 = 1024;
const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];
const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// A device address (`CUdeviceptr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The address `bytes` further on.
    pub fn offset(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }
}

/// A CUDA stream by handle, owned elsewhere (by a [`Stream`], or by XLA when an FFI
/// handler receives its stream). `StreamRef::DEFAULT` is the legacy default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct StreamRef(pub usize);

impl StreamRef {
    /// The legacy default stream (handle 0).
    pub const DEFAULT: StreamRef = StreamRef(0);
}

/// The CUDA driver library, opened at run time. Cheap to clone.
#[derive(Clone)]
pub struct Cuda {
    driver: Arc<Driver>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuda")
            .field("library", &self.driver.name())
            .finish()
    }
}

impl Cuda {
    /// The driver library's name, as the dynamic loader searches for it.
    pub const LIBRARY: &'static str = "libcuda.so.1";

    /// Opens [`Cuda::LIBRARY`] and initialises the driver.
    ///
    /// Without an NVIDIA driver this fails with `FAILED_PRECONDITION` and a message that
    /// names `libcuda.so.1` and quotes the loader's error.
    pub fn load() -> Result<Cuda> {
        Cuda::load_from(Cuda::LIBRARY)
    }

    /// Opens the driver library at `path` (for drivers outside the loader's search path).
    pub fn load_from(path: impl AsRef<Path>) -> Result<Cuda> {
        Ok(Cuda {
            driver: Arc::new(Driver::open(path.as_ref())?),
        })
    }

    /// The library this driver was opened from.
    pub fn library(&self) -> &str {
        self.driver.name()
    }

    /// The driver's CUDA version, e.g. `13000` for 13.0.
    pub fn driver_version(&self) -> Result<i32> {
        self.driver.driver_version()
    }

    /// How many CUDA devices the driver sees.
    pub fn device_count(&self) -> Result<i32> {
        self.driver.device_count()
    }

    /// The marketing name of device `ordinal`.
    pub fn device_name(&self, ordinal: i32) -> Result<String> {
        self.check_ordinal(ordinal)?;
        self.driver.device_name(ordinal)
    }

    /// Device `ordinal`'s primary context (the one XLA and the CUDA runtime use), made
    /// current on this thread.
    pub fn context(&self, ordinal: i32) -> Result<Context> {
        self.check_ordinal(ordinal)?;
        let (dev, ctx) = self.driver.primary_context(ordinal)?;
        Ok(Context {
            inner: Arc::new(CtxInner {
                driver: self.driver.clone(),
                dev,
                ctx,
                ordinal,
            }),
        })
    }

    fn check_ordinal(&self, ordinal: i32) -> Result<()> {
        let n = self.device_count()?;
        if ordinal < 0 || ordinal >= n {
            return Err(invalid(format!(
                "CUDA device {ordinal} does not exist: the driver sees {n} device(s)"
            )));
        }
        Ok(())
    }
}

struct CtxInner {
    driver: Arc<Driver>,
    dev: i32,
    ctx: usize,
    ordinal: i32,
}

impl CtxInner {
    fn enter(&self) -> Result<&Driver> {
        self.driver.set_current(self.ctx)?;
        Ok(&self.driver)
    }
}

impl Drop for CtxInner {
    fn drop(&mut self) {
        self.driver.release_primary_context(self.dev);
    }
}

/// A device's primary context. Every call makes it current on the calling thread first.
#[derive(Clone)]
pub struct Context {
    inner: Arc<CtxInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.ordinal)
            .finish()
    }
}

/// How to launch a kernel: grid and block sizes and dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid, x/y/z.
    pub grid: [u32; 3],
    /// Threads per block, x/y/z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// Enough blocks of `threads_per_block` threads to cover `n` elements (one dimension).
    pub fn linear(n: u32, threads_per_block: u32) -> LaunchConfig {
        let t = threads_per_block.max(1);
        LaunchConfig {
            grid: [n.div_ceil(t).max(1), 1, 1],
            block: [t, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    fn check(&self) -> Result<()> {
        if self.grid.contains(&0) || self.block.contains(&0) {
            return Err(invalid(format!(
                "kernel launch with a zero dimension: grid {:?}, block {:?}",
                self.grid, self.block
            )));
        }
        // Checked arithmetic: a product that wraps must not pass for a small one.
        let threads = self
            .block
            .iter()
            .try_fold(1u64, |acc, &b| acc.checked_mul(u64::from(b)));
        match threads {
            Some(t) if t <= MAX_THREADS_PER_BLOCK => {}
            Some(t) => {
                return Err(invalid(format!(
                    "kernel launch block {:?} has {t} threads; CUDA allows at most \
                     {MAX_THREADS_PER_BLOCK}",
                    self.block
                )))
            }
            None => {
                return Err(invalid(format!(
                    "kernel launch block {:?} has 2**64 or more threads; CUDA allows at \
                     most {MAX_THREADS_PER_BLOCK}",
                    self.block
                )))
            }
        }
        for (i, axis) in ["x", "y", "z"].iter().enumerate() {
            if self.block[i] > MAX_BLOCK[i] {
                return Err(invalid(format!(
                    "kernel launch block {:?}: block {axis} is {}, CUDA allows at most {}",
                    self.block, self.block[i], MAX_BLOCK[i]
                )));
            }
            if self.grid[i] > MAX_GRID[i] {
                return Err(invalid(format!(
                    "kernel launch grid {:?}: grid {axis} is {}, CUDA allows at most {}",
                    self.grid, self.grid[i], MAX_GRID[i]
                )));
            }
        }
        Ok(())
    }
}

/// One kernel argument, passed by value as the kernel's parameter list declares it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelArg {
    /// A device pointer (`.u64` / `T*`).
    Ptr(DevicePtr),
    /// A 32-bit signed integer.
    I32(i32),
    /// A 32-bit unsigned integer.
    U32(u32),
    /// A 64-bit signed integer.
    I64(i64),
    /// A 64-bit unsigned integer.
    U64(u64),
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
}

impl KernelArg {
    fn bytes(&self) -> Vec<u8> {
        match *self {
            KernelArg::Ptr(p) => p.0.to_ne_bytes().to_vec(),
            KernelArg::I32(v) => v.to_ne_bytes().to_vec(),
            KernelArg::U32(v) => v.to_ne_bytes().to_vec(),
            KernelArg::I64(v) => v.to_ne_bytes().to_vec(),
            KernelArg::U64(v) => v.to_ne_bytes().to_vec(),
            KernelArg::F32(v) => v.to_ne_bytes().to_vec(),
            KernelArg::F64(v) => v.to_ne_bytes().to_vec(),
        }
    }
}

/// Packs arguments 8-byte aligned into one buffer; returns it and each argument's offset.
fn pack_args(args: &[KernelArg]) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::with_capacity(args.len() * 8);
    let mut offsets = Vec::with_capacity(args.len());
    for a in args {
        offsets.push(buf.len());
        let b = a.bytes();
        buf.extend_from_slice(&b);
        buf.resize(buf.len().next_multiple_of(8), 0);
    }
    (buf, offsets)
}

/// PTX text as the driver wants it: NUL-terminated, with no NUL inside.
fn ptx_image(ptx: &str) -> Result<Vec<u8>> {
    let body = ptx.strip_suffix('\0').unwrap_or(ptx);
    if body.contains('\0') {
        return Err(invalid("PTX text contains a NUL byte before its end"));
    }
    if !body.contains(".entry") && !body.contains(".func") {
        return Err(invalid(
            "this is not PTX: it declares no .entry or .func (pass a cubin with load_cubin)",
        ));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(body.len() + 1).map_err(|_| {
        Error::ResourceExhausted(format!(
            "copying {} bytes of PTX text needs a host allocation that cannot be made",
            body.len() + 1
        ))
    })?;
    v.extend_from_slice(body.as_bytes());
    v.push(0);
    Ok(v)
}

impl Context {
    /// The device ordinal.
    pub fn ordinal(&self) -> i32 {
        self.inner.ordinal
    }

    /// The driver this context belongs to.
    pub fn cuda(&self) -> Cuda {
        Cuda {
            driver: self.inner.driver.clone(),
        }
    }

    /// Makes this context current on the calling thread.
    pub fn make_current(&self) -> Result<()> {
        self.inner.enter().map(|_| ())
    }

    /// Waits for all work in this context.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.enter()?.synchronize()
    }

    /// `(free, total)` device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.inner.enter()?.mem_info()
    }

    /// Allocates `bytes` of device memory, freed when the buffer drops.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        let ptr = if bytes == 0 {
            0
        } else {
            self.inner.enter()?.alloc(bytes)?
        };
        Ok(DeviceBuffer {
            ctx: self.clone(),
            ptr,
            len: bytes,
        })
    }

    /// Allocates `bytes` of page-locked host memory for asynchronous copies.
    pub fn alloc_pinned(&self, bytes: usize) -> Result<PinnedBuffer> {
        self.inner.enter()?;
        Ok(PinnedBuffer {
            ctx: self.clone(),
            alloc: HostAlloc::new(self.inner.driver.clone(), bytes)?,
            pending: Mutex::new(Pending::None),
        })
    }

    /// A new non-blocking stream.
    pub fn stream(&self) -> Result<Stream> {
        let handle = self.inner.enter()?.stream_create(true)?;
        Ok(Stream {
            ctx: self.clone(),
            handle,
        })
    }

    /// A new event; `timing` lets [`Event::elapsed_ms`] measure with it.
    pub fn event(&self, timing: bool) -> Result<Event> {
        let handle = self.inner.enter()?.event_create(timing)?;
        Ok(Event {
            ctx: self.clone(),
            handle,
        })
    }

    /// Loads a module from PTX text (JIT-compiled by the driver for this device).
    pub fn load_ptx(&self, ptx: &str) -> Result<Module> {
        let image = ptx_image(ptx)?;
        self.load_image(&image)
    }

    /// Loads a module from a cubin or fatbin image.
    pub fn load_cubin(&self, image: &[u8]) -> Result<Module> {
        if !image.starts_with(b"\x7fELF") && !image.starts_with(&[0x50, 0xed, 0x55, 0xba]) {
            return Err(invalid(
                "not a cubin or fatbin image (no ELF or fatbin magic); PTX text goes to load_ptx",
            ));
        }
        self.load_image(image)
    }

    fn load_image(&self, image: &[u8]) -> Result<Module> {
        let handle = self.inner.enter()?.module_load(image)?;
        Ok(Module {
            inner: Arc::new(ModInner {
                ctx: self.clone(),
                handle,
            }),
        })
    }

    /// Copies `src` to device address `dst`, synchronously.
    pub fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.inner.enter()?.memcpy_htod(dst.0, src)
    }

    /// Copies `dst.len()` bytes from device address `src` into `dst`, synchronously.
    pub fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.inner.enter()?.memcpy_dtoh(dst, src.0)
    }

    /// Copies `bytes` between device addresses, synchronously.
    pub fn memcpy_dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<()> {
        self.inner.enter()?.memcpy_dtod(dst.0, src.0, bytes)
    }

    /// Sets `bytes` bytes at `dst` to `value`, synchronously.
    pub fn memset(&self, dst: DevicePtr, value: u8, bytes: usize) -> Result<()> {
        self.inner.enter()?.memset(dst.0, value, bytes)
    }

    /// Queues a copy of all of `src` to `dst` on `stream`. `src` waits for it before it
    /// can be written or freed.
    pub fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: &PinnedBuffer,
        stream: StreamRef,
    ) -> Result<()> {
        src.wait()?;
        // The event that will track the copy exists before the copy is queued: a copy in
        // flight is never left untracked because an event could not be made.
        let ev = self.event(false)?;
        let d = self.inner.enter()?;
        d.memcpy_htod_async(dst.0, src.alloc.addr(), src.alloc.len(), stream.0)?;
        src.mark_pending(ev, stream)
    }

    /// Queues a copy from `src` filling all of `dst` on `stream`. `dst` waits for it before
    /// it can be read or freed.
    pub fn memcpy_dtoh_async(
        &self,
        dst: &mut PinnedBuffer,
        src: DevicePtr,
        stream: StreamRef,
    ) -> Result<()> {
        dst.wait()?;
        let ev = self.event(false)?;
        let d = self.inner.enter()?;
        d.memcpy_dtoh_async(dst.alloc.addr(), src.0, dst.alloc.len(), stream.0)?;
        dst.mark_pending(ev, stream)
    }

    /// Queues a device-to-device copy of `bytes` on `stream`.
    pub fn memcpy_dtod_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamRef,
    ) -> Result<()> {
        self.inner
            .enter()?
            .memcpy_dtod_async(dst.0, src.0, bytes, stream.0)
    }

    /// Queues a memset of `bytes` bytes at `dst` on `stream`.
    pub fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamRef,
    ) -> Result<()> {
        self.inner
            .enter()?
            .memset_async(dst.0, value, bytes, stream.0)
    }

    /// Launches `function` on `stream` with `args` (in the kernel's parameter order).
    pub fn launch(
        &self,
        function: &Function,
        config: LaunchConfig,
        args: &[KernelArg],
        stream: StreamRef,
    ) -> Result<()> {
        config.check()?;
        let (mut params, offsets) = pack_args(args);
        self.inner.enter()?.launch(
            function.handle,
            config.grid,
            config.block,
            config.shared_mem_bytes,
            stream.0,
            &mut params,
            &offsets,
        )
    }
}

/// Device memory allocated through this crate, freed on drop.
pub struct DeviceBuffer {
    ctx: Context,
    ptr: u64,
    len: usize,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.ptr, self.len)
    }
}

impl DeviceBuffer {
    /// Its device address.
    pub fn ptr(&self) -> DevicePtr {
        DevicePtr(self.ptr)
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` (exactly this buffer's size) into it.
    pub fn copy_from_host(&self, src: &[u8]) -> Result<()> {
        same_len("copy_from_host", src.len(), self.len)?;
        self.ctx.memcpy_htod(self.ptr(), src)
    }

    /// Copies it into `dst` (exactly this buffer's size).
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<()> {
        same_len("copy_to_host", dst.len(), self.len)?;
        self.ctx.memcpy_dtoh(dst, self.ptr())
    }

    /// Its contents as a new vector. A host allocation of its size that cannot be made is
    /// `ResourceExhausted` naming the size, not an abort.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = host_bytes(self.len, "copying a device buffer to the host")?;
        self.copy_to_host(&mut v)?;
        Ok(v)
    }
}

fn same_len(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(invalid(format!(
            "{what}: host side has {got} bytes, the device buffer {want}"
        )));
    }
    Ok(())
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.len != 0 {
            if let Ok(d) = self.ctx.inner.enter() {
                let _ = d.free(self.ptr);
            }
        }
    }
}

/// What a pinned buffer must wait for before it is touched.
enum Pending {
    /// No copy in flight.
    None,
    /// The last copy, tracked by an event recorded after it.
    Event(Arc<Event>),
    /// A copy was queued (in this context) but its event could not be recorded: only a
    /// whole-context synchronize makes it safe to touch the memory.
    Unknown(Context),
}

/// Page-locked host memory for asynchronous copies (and the fastest synchronous ones).
///
/// New pinned memory is zeroed. It remembers its last asynchronous copy and waits for it
/// before it is read, written or freed; a wait that fails is kept, so the next read, write
/// or the free waits again (and the free falls back to synchronizing the context).
pub struct PinnedBuffer {
    ctx: Context,
    alloc: HostAlloc,
    pending: Mutex<Pending>,
}

impl PinnedBuffer {
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.alloc.len()
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.alloc.len() == 0
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the last asynchronous copy into or out of it. When the wait fails, the
    /// copy stays pending: the next call waits again. No lock is held during the wait.
    pub fn wait(&self) -> Result<()> {
        let ev = match &*self.pending() {
            Pending::None => return Ok(()),
            Pending::Event(e) => Ok(e.clone()),
            Pending::Unknown(ctx) => Err(ctx.clone()),
        };
        match &ev {
            Ok(e) => e.synchronize()?,
            Err(ctx) => ctx.synchronize()?,
        }
        // Done: forget it, unless another copy was queued meanwhile.
        let mut p = self.pending();
        let same = match (&*p, &ev) {
            (Pending::Event(now), Ok(waited)) => Arc::ptr_eq(now, waited),
            (Pending::Unknown(_), Err(_)) => true,
            _ => false,
        };
        if same {
            *p = Pending::None;
        }
        Ok(())
    }

    /// Records `ev` after the copy just queued on `stream`; when that fails, the copy is
    /// still remembered (as needing a whole-context synchronize).
    fn mark_pending(&self, ev: Event, stream: StreamRef) -> Result<()> {
        let ctx = ev.ctx.clone();
        match ev.record(stream) {
            Ok(()) => {
                *self.pending() = Pending::Event(Arc::new(ev));
                Ok(())
            }
            Err(e) => {
                *self.pending() = Pending::Unknown(ctx);
                Err(e)
            }
        }
    }

    /// Its bytes, after waiting for any copy in flight.
    pub fn as_slice(&self) -> Result<&[u8]> {
        self.wait()?;
        Ok(self.alloc.as_slice())
    }

    /// Its bytes for writing, after waiting for any copy in flight.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        self.wait()?;
        Ok(self.alloc.as_mut_slice())
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.wait().is_err() {
            // The copy's fate is unknown: wait for the whole context rather than free
            // memory the device may still be writing.
            let _ = self.ctx.synchronize();
        }
    }
}

/// A stream created through this crate, destroyed on drop.
pub struct Stream {
    ctx: Context,
    handle: usize,
}

impl Stream {
    /// Its handle, for the async calls and launches.
    pub fn handle(&self) -> StreamRef {
        StreamRef(self.handle)
    }

    /// Waits for all work queued on it.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.inner.enter()?.stream_synchronize(self.handle)
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.ctx
            .inner
            .enter()?
            .stream_wait_event(self.handle, event.handle)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(d) = self.ctx.inner.enter() {
            let _ = d.stream_destroy(self.handle);
        }
    }
}

/// A CUDA event, destroyed on drop.
pub struct Event {
    ctx: Context,
    handle: usize,
}

impl Event {
    /// Records it on `stream`.
    pub fn record(&self, stream: StreamRef) -> Result<()> {
        self.ctx.inner.enter()?.event_record(self.handle, stream.0)
    }

    /// Waits until the work before its last record is done.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.inner.enter()?.event_synchronize(self.handle)
    }

    /// Milliseconds between `start`'s record and this event's (both made with timing).
    pub fn elapsed_ms(&self, start: &Event) -> Result<f32> {
        self.ctx
            .inner
            .enter()?
            .event_elapsed_ms(start.handle, self.handle)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Ok(d) = self.ctx.inner.enter() {
            let _ = d.event_destroy(self.handle);
        }
    }
}

struct ModInner {
    ctx: Context,
    handle: usize,
}

impl Drop for ModInner {
    fn drop(&mut self) {
        if let Ok(d) = self.ctx.inner.enter() {
            let _ = d.module_unload(self.handle);
        }
    }
}

/// A loaded module (PTX or cubin), unloaded when it and its functions are dropped.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModInner>,
}

impl Module {
    /// The kernel named `name` (its mangled name for C++ kernels).
    pub fn function(&self, name: &str) -> Result<Function> {
        let handle = self
            .inner
            .ctx
            .inner
            .enter()?
            .module_function(self.inner.handle, name)?;
        Ok(Function {
            _module: self.inner.clone(),
            handle,
            name: name.to_string(),
        })
    }
}

/// A kernel in a loaded module.
#[derive(Clone)]
pub struct Function {
    _module: Arc<ModInner>,
    handle: usize,
    name: String,
}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_pack_aligned() {
        let (buf, off) = pack_args(&[
            KernelArg::I32(-1),
            KernelArg::Ptr(DevicePtr(0x1000)),
            KernelArg::F32(1.5),
            KernelArg::F64(2.0),
        ]);
        assert_eq!(off, vec![0, 8, 16, 24]);
        assert_eq!(buf.len(), 32);
        assert_eq!(&buf[0..4], &(-1i32).to_ne_bytes());
        assert_eq!(&buf[8..16], &0x1000u64.to_ne_bytes());
        assert_eq!(&buf[16..20], &1.5f32.to_ne_bytes());
        assert_eq!(&buf[24..32], &2.0f64.to_ne_bytes());
        assert_eq!(pack_args(&[]), (vec![], vec![]));
    }

    #[test]
    fn launch_config_checked() {
        let c = LaunchConfig::linear(1000, 256);
        assert_eq!(c.grid, [4, 1, 1]);
        c.check().unwrap();
        assert_eq!(LaunchConfig::linear(0, 128).grid, [1, 1, 1]);
        let mut z = c;
        z.block = [0, 1, 1];
        assert!(z
            .check()
            .unwrap_err()
            .to_string()
            .contains("zero dimension"));
        let mut big = c;
        big.block = [32, 32, 2];
        let e = big.check().unwrap_err().to_string();
        assert!(e.contains("2048 threads") && e.contains("1024"), "{e}");
        // Products that wrap a u64 (or a u32) are refused, not passed as small ones.
        for block in [
            [1 << 22, 1 << 21, 1 << 21],
            [u32::MAX, u32::MAX, u32::MAX],
            [1 << 31, 1 << 31, 1 << 31],
            [1 << 16, 1 << 16, 1],
        ] {
            let mut w = c;
            w.block = block;
            let e = w.check().unwrap_err().to_string();
            assert!(e.contains("CUDA allows at most 1024"), "{block:?}: {e}");
        }
        // Per-dimension limits of blocks and grids.
        let mut z65 = c;
        z65.block = [1, 1, 65];
        let e = z65.check().unwrap_err().to_string();
        assert!(e.contains("block z is 65, CUDA allows at most 64"), "{e}");
        let mut gy = c;
        gy.grid = [1, 65536, 1];
        let e = gy.check().unwrap_err().to_string();
        assert!(
            e.contains("grid y is 65536, CUDA allows at most 65535"),
            "{e}"
        );
        let mut gx = c;
        gx.grid = [u32::MAX, 1, 1];
        let e = gx.check().unwrap_err().to_string();
        assert!(e.contains("grid x is 4294967295"), "{e}");
        let mut ok = c;
        ok.grid = [i32::MAX as u32, 65535, 65535];
        ok.block = [1024, 1, 1];
        ok.check().unwrap();
    }

    #[test]
    fn host_vectors_are_made_fallibly() {
        let e = host_bytes(usize::MAX, "copying x").unwrap_err();
        assert_eq!(e.code(), rpjrt::Code::InvalidArgument);
        let msg = e.to_string();
        assert!(msg.contains(&usize::MAX.to_string()), "{msg}");
        let e = host_bytes(isize::MAX as usize, "copying x").unwrap_err();
        assert_eq!(e.code(), rpjrt::Code::ResourceExhausted, "{e}");
        assert!(
            e.to_string().contains(&(isize::MAX as usize).to_string()),
            "{e}"
        );
        assert_eq!(host_bytes(3, "x").unwrap(), vec![0, 0, 0]);
    }

    #[test]
    fn ptx_text_checked() {
        let ok = ptx_image(".version 8.0\n.target sm_90\n.visible .entry k() { ret; }").unwrap();
        assert_eq!(ok.last(), Some(&0));
        assert_eq!(ok.iter().filter(|&&b| b == 0).count(), 1);
        let already = ptx_image(".entry k() { ret; }\0").unwrap();
        assert_eq!(already.iter().filter(|&&b| b == 0).count(), 1);
        assert!(ptx_image(".entry a\0b")
            .unwrap_err()
            .to_string()
            .contains("NUL"));
        assert!(ptx_image("hello")
            .unwrap_err()
            .to_string()
            .contains("not PTX"));
    }
}
