//! The CUDA driver API (`libcuda.so.1`), opened at run time (`rpjrt_raw::cuda::open_driver`).
//!
//! Nothing links against CUDA: this module looks the driver's entry points up when
//! [`Driver::open`] runs and keeps them as plain function pointers. Every call returns the
//! driver's `CUresult`; [`Driver::check`] turns a non-zero one into an error that carries
//! the driver's own name and description of it. Handles (contexts, streams, events,
//! modules, functions) cross this boundary as `usize`, device pointers as `u64`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::Path;

use rpjrt::{Code, Error, Result};

type CuResult = c_int;
type Handle = *mut c_void;

macro_rules! driver_fns {
    ($( $field:ident = $sym:literal : fn($($arg:ident : $ty:ty),*); )*) => {
        /// The driver entry points this crate uses.
        #[allow(non_snake_case)]
        struct Fns {
            $( $field: unsafe extern "C" fn($($ty),*) -> CuResult, )*
        }

        impl Fns {
            fn resolve(lib: &libloading::Library, name: &str) -> Result<Fns> {
                Ok(Fns {
                    $( $field: {
                        // SAFETY: the symbol is the CUDA driver entry point of that name,
                        // whose C signature is the one declared here (CUDA driver API).
                        let s = unsafe {
                            lib.get::<unsafe extern "C" fn($($ty),*) -> CuResult>(
                                concat!($sym, "\0").as_bytes(),
                            )
                        };
                        *s.map_err(|e| unavailable("dlsym", format!(
                            "{name} is not a usable CUDA driver: missing symbol {}: {e}", $sym
                        )))?
                    }, )*
                })
            }
        }

        /// Each entry point called with the thread marked as inside the driver `library`
        /// (`rpjrt_raw::guard::watch_exit_as`): a driver that calls `exit()` there ends
        /// the process with a report and a non-zero status, not as if the program had
        /// finished.
        #[allow(clippy::too_many_arguments)]
        impl Fns {
            $(
                /// The driver's entry point of that name, watched.
                ///
                /// # Safety
                /// As calling the entry point directly: the arguments are valid for it.
                #[inline]
                unsafe fn $field(&self, library: &'static str, $($arg: $ty),*) -> CuResult {
                    let _watch = rpjrt_raw::guard::watch_exit_as(
                        rpjrt_raw::cuda::CUDA_DRIVER,
                        library,
                        $sym,
                    );
                    // SAFETY: the caller vouches for the arguments (see above).
                    unsafe { (self.$field)($($arg),*) }
                }
            )*
        }
    };
}

driver_fns! {
    init = "cuInit": fn(a0: c_uint);
    driver_get_version = "cuDriverGetVersion": fn(a0: *mut c_int);
    get_error_name = "cuGetErrorName": fn(a0: CuResult, a1: *mut *const c_char);
    get_error_string = "cuGetErrorString": fn(a0: CuResult, a1: *mut *const c_char);
    device_get_count = "cuDeviceGetCount": fn(a0: *mut c_int);
    device_get = "cuDeviceGet": fn(a0: *mut c_int, a1: c_int);
    device_get_name = "cuDeviceGetName": fn(a0: *mut c_char, a1: c_int, a2: c_int);
    primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(a0: *mut Handle, a1: c_int);
    primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(a0: c_int);
    ctx_set_current = "cuCtxSetCurrent": fn(a0: Handle);
    ctx_synchronize = "cuCtxSynchronize": fn();
    mem_get_info = "cuMemGetInfo_v2": fn(a0: *mut usize, a1: *mut usize);
    mem_alloc = "cuMemAlloc_v2": fn(a0: *mut u64, a1: usize);
    mem_free = "cuMemFree_v2": fn(a0: u64);
    mem_alloc_host = "cuMemAllocHost_v2": fn(a0: *mut *mut c_void, a1: usize);
    mem_free_host = "cuMemFreeHost": fn(a0: *mut c_void);
    memcpy_htod = "cuMemcpyHtoD_v2": fn(a0: u64, a1: *const c_void, a2: usize);
    memcpy_dtoh = "cuMemcpyDtoH_v2": fn(a0: *mut c_void, a1: u64, a2: usize);
    memcpy_dtod = "cuMemcpyDtoD_v2": fn(a0: u64, a1: u64, a2: usize);
    memcpy_htod_async = "cuMemcpyHtoDAsync_v2": fn(
        a0: u64, a1: *const c_void, a2: usize, a3: Handle
    );
    memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2": fn(
        a0: *mut c_void, a1: u64, a2: usize, a3: Handle
    );
    memcpy_dtod_async = "cuMemcpyDtoDAsync_v2": fn(a0: u64, a1: u64, a2: usize, a3: Handle);
    memset_d8 = "cuMemsetD8_v2": fn(a0: u64, a1: u8, a2: usize);
    memset_d8_async = "cuMemsetD8Async": fn(a0: u64, a1: u8, a2: usize, a3: Handle);
    module_load_data = "cuModuleLoadData": fn(a0: *mut Handle, a1: *const c_void);
    module_unload = "cuModuleUnload": fn(a0: Handle);
    module_get_function = "cuModuleGetFunction": fn(a0: *mut Handle, a1: Handle, a2: *const c_char);
    launch_kernel = "cuLaunchKernel": fn(
        a0: Handle, a1: c_uint, a2: c_uint, a3: c_uint, a4: c_uint, a5: c_uint, a6: c_uint,
        a7: c_uint, a8: Handle, a9: *mut *mut c_void, a10: *mut *mut c_void
    );
    stream_create = "cuStreamCreate": fn(a0: *mut Handle, a1: c_uint);
    stream_destroy = "cuStreamDestroy_v2": fn(a0: Handle);
    stream_synchronize = "cuStreamSynchronize": fn(a0: Handle);
    stream_wait_event = "cuStreamWaitEvent": fn(a0: Handle, a1: Handle, a2: c_uint);
    event_create = "cuEventCreate": fn(a0: *mut Handle, a1: c_uint);
    event_destroy = "cuEventDestroy_v2": fn(a0: Handle);
    event_record = "cuEventRecord": fn(a0: Handle, a1: Handle);
    event_synchronize = "cuEventSynchronize": fn(a0: Handle);
    event_elapsed_time = "cuEventElapsedTime": fn(a0: *mut f32, a1: Handle, a2: Handle);
}

/// The opened driver library and its entry points.
pub(crate) struct Driver {
    fns: Fns,
    name: String,
    /// The file opened, as the exit report of a call into the driver names it.
    label: &'static str,
    // Keeps the library mapped while the function pointers above are in use (never
    // unloaded).
    _lib: std::mem::ManuallyDrop<libloading::Library>,
}

/// A driver that cannot be used: FAILED_PRECONDITION, like the plugins without a GPU.
fn unavailable(entry: &'static str, message: String) -> Error {
    Error::Pjrt {
        entry,
        code: Code::FailedPrecondition,
        message,
    }
}

/// The status code closest to a `CUresult`.
fn code_of(code: CuResult) -> Code {
    match code {
        1 | 101 | 400 => Code::InvalidArgument, // invalid value / device / handle
        2 => Code::ResourceExhausted,           // out of memory
        3 | 4 | 100 | 201 => Code::FailedPrecondition, // not initialized, deinit, no device, bad context
        500 => Code::NotFound,                         // named symbol not found
        218 | 200 | 209 | 300 | 301 => Code::InvalidArgument, // bad PTX / image / source
        _ => Code::Internal,
    }
}

fn h(handle: usize) -> Handle {
    handle as Handle
}

/// A driver that answered a call with success and nothing usable: INTERNAL, naming the call
/// and what was missing, instead of a handle or pointer that would be used later.
fn lying_driver(call: &'static str, what: &str) -> Error {
    Error::Pjrt {
        entry: call,
        code: Code::Internal,
        message: format!(
            "{call} reported success but returned {what}; the CUDA driver is broken or is \
             not the NVIDIA driver"
        ),
    }
}

/// `handle` as an address, or an error when the driver returned NULL with its success.
fn non_null(call: &'static str, what: &str, handle: Handle) -> Result<usize> {
    if handle.is_null() {
        return Err(lying_driver(call, &format!("a NULL {what}")));
    }
    Ok(handle as usize)
}

impl Driver {
    /// Opens the driver library at `path` (a file name like `libcuda.so.1` is searched the
    /// way the dynamic loader does), resolves the entry points and calls `cuInit(0)`.
    pub(crate) fn open(path: &Path) -> Result<Driver> {
        let name = path.display().to_string();
        // The file is checked before the loader sees it (a truncated copy would crash the
        // loader, a FIFO would block it for good), and an exit() in its initialisers is
        // reported: the one path rpjrt loads every foreign library by.
        let opened = rpjrt_raw::cuda::open_driver(path)?;
        let label = opened.label;
        // SAFETY: a handle the loader just returned, owned from here by `lib`. Never
        // unloaded (ManuallyDrop): `cuInit` starts the driver's threads, and a library that
        // is no driver may have started its own while it loaded; unloading would pull
        // their code from under them.
        let lib = std::mem::ManuallyDrop::new(libloading::Library::from(unsafe {
            libloading::os::unix::Library::from_raw(opened.handle)
        }));
        let fns = Fns::resolve(&lib, &name)?;
        let d = Driver {
            fns,
            name,
            label,
            _lib: lib,
        };
        // SAFETY: cuInit takes a flags word (must be 0) and nothing else.
        let rc = unsafe { d.fns.init(d.label, 0) };
        // Whatever cuInit's code, the driver cannot be used: FAILED_PRECONDITION, the code
        // rpjrt's own driver probe (`rpjrt_cuda::driver_summary`) gives the same failure.
        d.check("cuInit", rc).map_err(|e| match e {
            Error::Pjrt { entry, message, .. } => unavailable(
                entry,
                format!("{} loaded, but cuInit failed: {message}", d.name),
            ),
            other => other,
        })?;
        Ok(d)
    }

    /// The library name or path this driver was opened from.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Turns a `CUresult` into `Ok` or an error naming the call and the driver's message.
    pub(crate) fn check(&self, call: &'static str, code: CuResult) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        let text = |name: bool| {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: the out-pointer is valid; the driver stores a pointer to a static
            // string, or returns an error for unknown codes (then `p` stays null).
            let rc = unsafe {
                match name {
                    true => self.fns.get_error_name(self.label, code, &mut p),
                    false => self.fns.get_error_string(self.label, code, &mut p),
                }
            };
            if rc != 0 || p.is_null() {
                None
            } else {
                // SAFETY: a non-null result is a static NUL-terminated string.
                Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            }
        };
        let name = text(true).unwrap_or_else(|| "CUDA_ERROR_UNKNOWN".into());
        let desc = text(false).unwrap_or_else(|| "unknown error".into());
        Err(Error::Pjrt {
            entry: call,
            code: code_of(code),
            message: format!("{name} ({code}): {desc}"),
        })
    }

    pub(crate) fn driver_version(&self) -> Result<i32> {
        let mut v: c_int = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDriverGetVersion", unsafe {
            self.fns.driver_get_version(self.label, &mut v)
        })?;
        if v < 0 {
            return Err(lying_driver(
                "cuDriverGetVersion",
                &format!("an invalid (negative) driver version {v}"),
            ));
        }
        Ok(v)
    }

    pub(crate) fn device_count(&self) -> Result<i32> {
        let mut n: c_int = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDeviceGetCount", unsafe {
            self.fns.device_get_count(self.label, &mut n)
        })?;
        if n < 0 {
            return Err(lying_driver(
                "cuDeviceGetCount",
                &format!("an invalid (negative) device count {n}"),
            ));
        }
        Ok(n)
    }

    pub(crate) fn device_name(&self, ordinal: i32) -> Result<String> {
        let mut dev: c_int = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDeviceGet", unsafe {
            self.fns.device_get(self.label, &mut dev, ordinal)
        })?;
        let mut buf = [0u8; 256];
        // SAFETY: the buffer holds 256 bytes and its length is passed; the driver writes at
        // most that many.
        self.check("cuDeviceGetName", unsafe {
            self.fns.device_get_name(
                self.label,
                buf.as_mut_ptr().cast::<c_char>(),
                buf.len() as c_int,
                dev,
            )
        })?;
        Ok(fixed_c_string(&buf))
    }

    /// Retains device `ordinal`'s primary context and makes it current on this thread.
    pub(crate) fn primary_context(&self, ordinal: i32) -> Result<(i32, usize)> {
        let mut dev: c_int = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDeviceGet", unsafe {
            self.fns.device_get(self.label, &mut dev, ordinal)
        })?;
        let mut ctx: Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `dev` came from cuDeviceGet.
        self.check("cuDevicePrimaryCtxRetain", unsafe {
            self.fns.primary_ctx_retain(self.label, &mut ctx, dev)
        })?;
        let ctx = match non_null("cuDevicePrimaryCtxRetain", "context", ctx) {
            Ok(c) => c,
            Err(e) => {
                // The retain itself succeeded: balance it.
                self.release_primary_context(dev);
                return Err(e);
            }
        };
        if let Err(e) = self.set_current(ctx) {
            self.release_primary_context(dev);
            return Err(e);
        }
        Ok((dev, ctx))
    }

    pub(crate) fn release_primary_context(&self, dev: i32) {
        // SAFETY: `dev` had its primary context retained once by `primary_context`.
        let _ = unsafe { self.fns.primary_ctx_release(self.label, dev) };
    }

    pub(crate) fn set_current(&self, ctx: usize) -> Result<()> {
        // SAFETY: `ctx` is a context handle from the driver.
        self.check("cuCtxSetCurrent", unsafe {
            self.fns.ctx_set_current(self.label, h(ctx))
        })
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check("cuCtxSynchronize", unsafe {
            self.fns.ctx_synchronize(self.label)
        })
    }

    pub(crate) fn mem_info(&self) -> Result<(usize, usize)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        self.check("cuMemGetInfo", unsafe {
            self.fns.mem_get_info(self.label, &mut free, &mut total)
        })?;
        Ok((free, total))
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut p: u64 = 0;
        // SAFETY: valid out-pointer.
        self.check("cuMemAlloc", unsafe {
            self.fns.mem_alloc(self.label, &mut p, bytes)
        })?;
        if p == 0 && bytes != 0 {
            return Err(lying_driver(
                "cuMemAlloc",
                &format!("device address 0 for {bytes} bytes"),
            ));
        }
        Ok(p)
    }

    pub(crate) fn free(&self, ptr: u64) -> Result<()> {
        // SAFETY: device pointers are checked by the driver; a bad one is an error code.
        self.check("cuMemFree", unsafe { self.fns.mem_free(self.label, ptr) })
    }

    /// Page-locked host memory of `bytes` bytes, as an address.
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<usize> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        self.check("cuMemAllocHost", unsafe {
            self.fns.mem_alloc_host(self.label, &mut p, bytes)
        })?;
        non_null("cuMemAllocHost", &format!("pointer for {bytes} bytes"), p)
    }

    pub(crate) fn free_host(&self, addr: usize) -> Result<()> {
        // SAFETY: `addr` came from `alloc_host` and is freed once (the owner's Drop).
        self.check("cuMemFreeHost", unsafe {
            self.fns.mem_free_host(self.label, addr as *mut c_void)
        })
    }

    /// Copies `src` to device address `dst` (synchronously).
    pub(crate) fn memcpy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        // SAFETY: `src` is valid for its length for the whole (synchronous) call.
        self.check("cuMemcpyHtoD", unsafe {
            self.fns
                .memcpy_htod(self.label, dst, src.as_ptr().cast(), src.len())
        })
    }

    /// Copies device address `src` into `dst` (synchronously).
    pub(crate) fn memcpy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        // SAFETY: `dst` is valid for writes of its length for the whole call.
        self.check("cuMemcpyDtoH", unsafe {
            self.fns
                .memcpy_dtoh(self.label, dst.as_mut_ptr().cast(), src, dst.len())
        })
    }

    pub(crate) fn memcpy_dtod(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: only device addresses, which the driver checks.
        self.check("cuMemcpyDtoD", unsafe {
            self.fns.memcpy_dtod(self.label, dst, src, bytes)
        })
    }

    /// Queues a copy from host address `src` (page-locked memory owned by the caller, kept
    /// alive until the stream passes this copy) to device address `dst`.
    pub(crate) fn memcpy_htod_async(
        &self,
        dst: u64,
        src: usize,
        bytes: usize,
        stream: usize,
    ) -> Result<()> {
        // SAFETY: the caller keeps `src..src+bytes` alive and unwritten until the copy is
        // done (the pinned buffer's event is synchronised before it is touched or freed).
        self.check("cuMemcpyHtoDAsync", unsafe {
            self.fns
                .memcpy_htod_async(self.label, dst, src as *const c_void, bytes, h(stream))
        })
    }

    /// Queues a copy from device address `src` to host address `dst` (see above).
    pub(crate) fn memcpy_dtoh_async(
        &self,
        dst: usize,
        src: u64,
        bytes: usize,
        stream: usize,
    ) -> Result<()> {
        // SAFETY: as for `memcpy_htod_async`, the caller owns and guards `dst`.
        self.check("cuMemcpyDtoHAsync", unsafe {
            self.fns
                .memcpy_dtoh_async(self.label, dst as *mut c_void, src, bytes, h(stream))
        })
    }

    pub(crate) fn memcpy_dtod_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: usize,
    ) -> Result<()> {
        // SAFETY: only device addresses and a stream handle, which the driver checks.
        self.check("cuMemcpyDtoDAsync", unsafe {
            self.fns
                .memcpy_dtod_async(self.label, dst, src, bytes, h(stream))
        })
    }

    pub(crate) fn memset(&self, dst: u64, value: u8, bytes: usize) -> Result<()> {
        // SAFETY: only a device address, which the driver checks.
        self.check("cuMemsetD8", unsafe {
            self.fns.memset_d8(self.label, dst, value, bytes)
        })
    }

    pub(crate) fn memset_async(
        &self,
        dst: u64,
        value: u8,
        bytes: usize,
        stream: usize,
    ) -> Result<()> {
        // SAFETY: only a device address and a stream handle, which the driver checks.
        self.check("cuMemsetD8Async", unsafe {
            self.fns
                .memset_d8_async(self.label, dst, value, bytes, h(stream))
        })
    }

    /// Loads a module from PTX text or a cubin/fatbin image. PTX must end with a NUL byte;
    /// the caller (the safe layer) guarantees that.
    pub(crate) fn module_load(&self, image: &[u8]) -> Result<usize> {
        let mut m: Handle = std::ptr::null_mut();
        // SAFETY: `image` is a complete image (PTX NUL-terminated) valid for the call.
        self.check("cuModuleLoadData", unsafe {
            self.fns
                .module_load_data(self.label, &mut m, image.as_ptr().cast())
        })?;
        non_null("cuModuleLoadData", "module handle", m)
    }

    pub(crate) fn module_unload(&self, module: usize) -> Result<()> {
        // SAFETY: `module` came from `module_load` and is unloaded once (owner's Drop).
        self.check("cuModuleUnload", unsafe {
            self.fns.module_unload(self.label, h(module))
        })
    }

    pub(crate) fn module_function(&self, module: usize, name: &str) -> Result<usize> {
        let cname = CString::new(name).map_err(|_| {
            Error::InvalidArgument(format!("kernel name {name:?} contains a NUL byte"))
        })?;
        let mut f: Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer, a live module and a NUL-terminated name.
        self.check("cuModuleGetFunction", unsafe {
            self.fns
                .module_get_function(self.label, &mut f, h(module), cname.as_ptr())
        })?;
        non_null(
            "cuModuleGetFunction",
            &format!("function handle for {name:?}"),
            f,
        )
    }

    /// Launches `function` with `params`, the kernel's arguments packed one after another,
    /// each at its offset in `offsets`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch(
        &self,
        function: usize,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: u32,
        stream: usize,
        params: &mut [u8],
        offsets: &[usize],
    ) -> Result<()> {
        let base = params.as_mut_ptr();
        let mut ptrs: Vec<*mut c_void> = offsets
            .iter()
            // `wrapping_add` needs no unsafe; each offset is inside `params` (the safe layer
            // packed it), so the pointers stay in bounds.
            .map(|&o| base.wrapping_add(o).cast::<c_void>())
            .collect();
        let kernel_params = if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        };
        // SAFETY: every parameter pointer points at a value of the size the caller declared,
        // alive for the call (the driver copies parameters before cuLaunchKernel returns).
        self.check("cuLaunchKernel", unsafe {
            self.fns.launch_kernel(
                self.label,
                h(function),
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_mem,
                h(stream),
                kernel_params,
                std::ptr::null_mut(),
            )
        })
    }

    pub(crate) fn stream_create(&self, non_blocking: bool) -> Result<usize> {
        let mut s: Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer; flag 1 is CU_STREAM_NON_BLOCKING.
        self.check("cuStreamCreate", unsafe {
            self.fns
                .stream_create(self.label, &mut s, non_blocking as c_uint)
        })?;
        // NULL is the legacy default stream, not a new one.
        non_null("cuStreamCreate", "stream handle", s)
    }

    pub(crate) fn stream_destroy(&self, stream: usize) -> Result<()> {
        // SAFETY: `stream` came from `stream_create` and is destroyed once.
        self.check("cuStreamDestroy", unsafe {
            self.fns.stream_destroy(self.label, h(stream))
        })
    }

    pub(crate) fn stream_synchronize(&self, stream: usize) -> Result<()> {
        // SAFETY: a stream handle (0 is the legacy default stream).
        self.check("cuStreamSynchronize", unsafe {
            self.fns.stream_synchronize(self.label, h(stream))
        })
    }

    pub(crate) fn stream_wait_event(&self, stream: usize, event: usize) -> Result<()> {
        // SAFETY: stream and event handles from the driver.
        self.check("cuStreamWaitEvent", unsafe {
            self.fns
                .stream_wait_event(self.label, h(stream), h(event), 0)
        })
    }

    pub(crate) fn event_create(&self, timing: bool) -> Result<usize> {
        let mut e: Handle = std::ptr::null_mut();
        // CU_EVENT_DISABLE_TIMING is 2.
        let flags: c_uint = if timing { 0 } else { 2 };
        // SAFETY: valid out-pointer.
        self.check("cuEventCreate", unsafe {
            self.fns.event_create(self.label, &mut e, flags)
        })?;
        non_null("cuEventCreate", "event handle", e)
    }

    pub(crate) fn event_destroy(&self, event: usize) -> Result<()> {
        // SAFETY: `event` came from `event_create` and is destroyed once.
        self.check("cuEventDestroy", unsafe {
            self.fns.event_destroy(self.label, h(event))
        })
    }

    pub(crate) fn event_record(&self, event: usize, stream: usize) -> Result<()> {
        // SAFETY: event and stream handles from the driver.
        self.check("cuEventRecord", unsafe {
            self.fns.event_record(self.label, h(event), h(stream))
        })
    }

    pub(crate) fn event_synchronize(&self, event: usize) -> Result<()> {
        // SAFETY: an event handle from the driver.
        self.check("cuEventSynchronize", unsafe {
            self.fns.event_synchronize(self.label, h(event))
        })
    }

    pub(crate) fn event_elapsed_ms(&self, start: usize, end: usize) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: valid out-pointer and two event handles.
        self.check("cuEventElapsedTime", unsafe {
            self.fns
                .event_elapsed_time(self.label, &mut ms, h(start), h(end))
        })?;
        Ok(ms)
    }
}

/// Page-locked host memory from `cuMemAllocHost`, freed on drop.
///
/// The slices it hands out are only sound while no asynchronous copy into or out of it is
/// in flight; its one user, `PinnedBuffer`, waits for its last copy's event before
/// calling them and before dropping it.
pub(crate) struct HostAlloc {
    driver: std::sync::Arc<Driver>,
    addr: usize,
    len: usize,
}

impl HostAlloc {
    /// `len` bytes of page-locked memory, zeroed (`cuMemAllocHost` leaves whatever the
    /// memory held before).
    pub(crate) fn new(driver: std::sync::Arc<Driver>, len: usize) -> Result<HostAlloc> {
        let addr = if len == 0 { 0 } else { driver.alloc_host(len)? };
        let mut a = HostAlloc { driver, addr, len };
        a.as_mut_slice().fill(0);
        Ok(a)
    }

    pub(crate) fn addr(&self) -> usize {
        self.addr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `addr..addr+len` is this object's live allocation; the owner has waited
        // for every copy into it (see the type's docs), and `&self` excludes writers.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as `as_slice`, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        if self.len != 0 {
            let _ = self.driver.free_host(self.addr);
        }
    }
}

/// The text in a fixed buffer the driver filled: up to its first NUL, or the whole buffer
/// when the driver wrote none (never read past it).
pub(crate) fn fixed_c_string(buf: &[u8]) -> String {
    let text = match CStr::from_bytes_until_nul(buf) {
        Ok(c) => c.to_bytes(),
        Err(_) => buf,
    };
    String::from_utf8_lossy(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_buffer_is_read_within_its_bounds() {
        assert_eq!(fixed_c_string(b"Fake GPU\0junk"), "Fake GPU");
        assert_eq!(fixed_c_string(&[b'A'; 8]), "AAAAAAAA");
        assert_eq!(fixed_c_string(b"\0"), "");
        assert_eq!(fixed_c_string(b""), "");
    }
}
