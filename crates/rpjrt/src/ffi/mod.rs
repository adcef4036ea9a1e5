//! Custom calls: XLA FFI handlers written in Rust (and, through the Python package, in
//! Python), or compiled handlers from elsewhere.
//!
//! A program calls a handler with a typed custom call:
//!
//! ```text
//! %y = stablehlo.custom_call @my_target(%x) {api_version = 4 : i32,
//!        backend_config = {offset = 1.5 : f32}} : (tensor<8xf32>) -> tensor<8xf32>
//! ```
//!
//! and the target name is bound to a closure with [`register`] before compiling:
//!
//! ```no_run
//! use rpjrt::ffi::{self, CallFrame, FfiError};
//! # fn main() -> rpjrt::Result<()> {
//! # let client = rpjrt::Client::from_path("plugin.so")?;
//! ffi::register(&client, "my_target", |call: &mut CallFrame<'_>| {
//!     let offset: f32 = call.attrs()?.get_as("offset")?;
//!     let x = call.arg(0)?.as_slice::<f32>()?.to_vec();
//!     let y = call.ret(0)?.as_mut_slice::<f32>()?;
//!     for (y, x) in y.iter_mut().zip(x) {
//!         *y = 2.0 * x + offset;
//!     }
//!     Ok::<(), FfiError>(())
//! })?;
//! # Ok(()) }
//! ```
//!
//! # Versions
//! When a handler is registered, the plugin's FFI runtime calls it once to ask which FFI
//! version it speaks, and drops it *silently* when that version is newer than its own.
//! rpjrt answers with the older of its own version and the runtime's, so the same handler
//! registers on old (0.2) and new (0.4) runtimes; and it checks after every registration
//! that the question was asked and the answer accepted, so a refused or dropped
//! registration is an error at [`register`] time (naming target, platform and both
//! versions), never a compile error later.
//!
//! # Stages and limits
//! Through the PJRT FFI extension a target gets one handler, which XLA calls at the execute
//! stage only. [`register_with_state`] registers a bundle (instantiate + execute) directly
//! with the runtime's FFI table instead, so that a handler can build per-instance state once
//! per compiled custom call (FFI runtimes 0.3 and newer). Arguments and results must be
//! buffers.
//! Buffer bytes are offered as slices only on the host platform; elsewhere use
//! [`Arg::data_ptr`] with the [`CallFrame::stream`]. Slices are row-major: a compiled
//! program whose custom call to a closure's target lays out an operand or result otherwise
//! in memory (`operand_layouts`, `result_layouts`; size-1 dimensions may go anywhere) is
//! refused, naming target, operand and layout. A call whose results share memory (two
//! results aliasing one operand) is refused before the handler runs.
//! The check sees the closures registered when the program is compiled or loaded:
//! register first (a later registration does not re-check programs compiled before it).

mod attrs;
mod dtype;

use std::any::Any;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

pub use attrs::{AttrArray, AttrValue, Attrs, FromAttr, FromAttrs};
pub use dtype::{ffi_code, ffi_element_type};

use crate::client::Client;
use crate::dtype::{ElementType, NativeType};
use crate::error::{Code, Error, Result};
use crate::plugin::Plugin;
use crate::raw::ffi as raw;

/// The error a handler returns: a status code and a message. It becomes the execute
/// call's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FfiError {
    /// Status code.
    pub code: Code,
    /// Message.
    pub message: String,
}

impl FfiError {
    /// An error with this code and message.
    pub fn new(code: Code, message: impl Into<String>) -> FfiError {
        FfiError {
            code,
            message: message.into(),
        }
    }

    /// An `INVALID_ARGUMENT` error.
    pub fn invalid(message: impl Into<String>) -> FfiError {
        FfiError::new(Code::InvalidArgument, message)
    }

    /// An `INTERNAL` error.
    pub fn internal(message: impl Into<String>) -> FfiError {
        FfiError::new(Code::Internal, message)
    }
}

impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for FfiError {}

impl From<Error> for FfiError {
    fn from(e: Error) -> FfiError {
        FfiError::new(e.code(), e.to_string())
    }
}

impl From<String> for FfiError {
    fn from(m: String) -> FfiError {
        FfiError::new(Code::Unknown, m)
    }
}

impl From<&str> for FfiError {
    fn from(m: &str) -> FfiError {
        FfiError::new(Code::Unknown, m)
    }
}

/// The stage a handler is called for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Once per compiled instance of the custom call.
    Instantiate,
    /// Before execution, to request resources.
    Prepare,
    /// Before execution, to initialise resources.
    Initialize,
    /// The call itself.
    Execute,
}

impl Stage {
    fn from_raw(v: i32) -> Stage {
        match v {
            0 => Stage::Instantiate,
            1 => Stage::Prepare,
            2 => Stage::Initialize,
            _ => Stage::Execute,
        }
    }
}

/// An id of a user type registered with a plugin's FFI runtime ([`register_type`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeId(pub i64);

/// One buffer argument of a call.
pub struct Arg<'a> {
    ffi_dtype: i32,
    dims: &'a [i64],
    data: usize,
    bytes: Option<&'a [u8]>,
    /// The result whose memory this argument's shares (`output_operand_aliases`): its
    /// bytes are then read through that result, never as a second, shared slice of memory
    /// the handler holds mutably.
    aliased_with: Option<usize>,
}

/// One buffer result of a call.
pub struct Ret<'a> {
    ffi_dtype: i32,
    dims: &'a [i64],
    data: usize,
    bytes: Option<&'a mut [u8]>,
    /// Whether the handler asked for a way to write it (its bytes, typed slice or
    /// address): a host result it never asked for is zeroed after the handler returns
    /// ([`CallFrame::zero_unwritten`]).
    touched: std::cell::Cell<bool>,
    /// Whether an argument shares its memory (it then starts with that argument's values,
    /// which are kept).
    in_place: bool,
}

fn typed<T: NativeType>(
    bytes: usize,
    ty: Option<ElementType>,
    what: &str,
) -> std::result::Result<(), FfiError> {
    if ty != Some(T::ELEMENT_TYPE) {
        return Err(FfiError::invalid(format!(
            "{what} holds {}, not {}",
            ty.map_or("an unknown type".to_string(), |t| t.to_string()),
            T::ELEMENT_TYPE
        )));
    }
    let _ = bytes;
    Ok(())
}

macro_rules! buffer_common {
    () => {
        /// Element type (`None` for an FFI type rpjrt does not know).
        pub fn element_type(&self) -> Option<ElementType> {
            ffi_element_type(self.ffi_dtype)
        }

        /// The XLA FFI data type code.
        pub fn ffi_dtype(&self) -> i32 {
            self.ffi_dtype
        }

        /// Dimensions.
        pub fn dims(&self) -> &'a [i64] {
            self.dims
        }

        /// Size of the data in bytes (dense layout); 0 for unknown types.
        pub fn nbytes(&self) -> usize {
            self.element_type()
                .and_then(|t| {
                    let n = crate::dtype::element_count(self.dims).ok()?;
                    t.dense_byte_size(n).ok()
                })
                .unwrap_or(0)
        }

        /// Whether the data is host memory the handler may read as a slice.
        pub fn is_host(&self) -> bool {
            self.bytes.is_some() || self.aliased_result().is_some()
        }
    };
}

impl<'a> Arg<'a> {
    buffer_common!();

    /// Address of the data (device memory on accelerators).
    pub fn data_ptr(&self) -> usize {
        self.data
    }

    /// The bytes, when the buffer is in host memory and shares no memory with a result
    /// ([`Arg::aliased_result`]).
    pub fn host_bytes(&self) -> Option<&'a [u8]> {
        self.bytes
    }

    /// The result this argument shares its memory with (a custom call with
    /// `output_operand_aliases`): the handler reads and writes it through that result,
    /// which holds the argument's values when the handler starts.
    pub fn aliased_result(&self) -> Option<usize> {
        self.aliased_with
    }

    /// The elements as a typed slice (host memory, matching type and alignment).
    pub fn as_slice<T: NativeType>(&self) -> std::result::Result<&'a [T], FfiError> {
        typed::<T>(self.nbytes(), self.element_type(), "the argument")?;
        if let Some(j) = self.aliased_with {
            return Err(FfiError::invalid(format!(
                "the argument shares its memory with result {j} (output_operand_aliases): \
                 read it through that result, which holds its values"
            )));
        }
        let bytes = self.bytes.ok_or_else(|| {
            FfiError::invalid("the argument is in device memory; use data_ptr() and the stream")
        })?;
        cast_slice(bytes)
    }
}

impl<'a> Ret<'a> {
    buffer_common!();

    /// Address of the data (device memory on accelerators), to write through. Asking
    /// for it counts as writing the result (see [`Ret::host_bytes_mut`]).
    pub fn data_ptr(&self) -> usize {
        self.touched.set(true);
        self.data
    }

    /// The same address, only to describe the result (a log line, a view made for later):
    /// asking for it does not count as writing, so a result the handler goes on to leave
    /// alone is still zeroed.
    pub fn address(&self) -> usize {
        self.data
    }

    /// Whether an argument shares this result's memory (`output_operand_aliases`): it then
    /// starts with that argument's values.
    pub fn is_in_place(&self) -> bool {
        self.in_place
    }

    /// Results share no memory with other results here (only an argument can alias one): a
    /// call whose results would share memory is refused before the handler runs.
    fn aliased_result(&self) -> Option<usize> {
        None
    }

    /// The bytes to fill, when the result is in host memory. A host result the handler
    /// never asks for (here, [`Ret::as_mut_slice`] or [`Ret::data_ptr`]) is zeros once it
    /// returns, unless it shares an argument's memory, whose values it then keeps: the
    /// runtime's memory would otherwise hold whatever was there before.
    pub fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.touched.set(true);
        self.bytes.as_deref_mut()
    }

    /// The elements to fill as a typed slice (host memory, matching type and alignment).
    pub fn as_mut_slice<T: NativeType>(&mut self) -> std::result::Result<&mut [T], FfiError> {
        self.touched.set(true);
        typed::<T>(self.nbytes(), self.element_type(), "the result")?;
        let bytes = self.bytes.as_deref_mut().ok_or_else(|| {
            FfiError::invalid("the result is in device memory; use data_ptr() and the stream")
        })?;
        cast_slice_mut(bytes)
    }
}

fn cast_slice<T: NativeType>(bytes: &[u8]) -> std::result::Result<&[T], FfiError> {
    crate::raw::util::cast_elements(bytes).ok_or_else(|| {
        FfiError::invalid("the buffer is not aligned for its element type, or holds invalid bools")
    })
}

fn cast_slice_mut<T: NativeType>(bytes: &mut [u8]) -> std::result::Result<&mut [T], FfiError> {
    crate::raw::util::cast_elements_mut(bytes)
        .ok_or_else(|| FfiError::invalid("the buffer is not aligned for its element type"))
}

/// The view of one call a handler receives.
pub struct CallFrame<'a> {
    frame: &'a raw::Frame<'a>,
    args: Vec<Arg<'a>>,
    rets: Vec<Ret<'a>>,
    attrs: OnceCell<std::result::Result<Attrs, FfiError>>,
    user_type: Option<i64>,
    state_type: Option<i64>,
}

impl<'a> CallFrame<'a> {
    fn new(
        frame: &'a raw::Frame<'a>,
        user_type: Option<i64>,
        state_type: Option<i64>,
    ) -> std::result::Result<CallFrame<'a>, FfiError> {
        let conv = |(c, m): (Code, String)| FfiError::new(c, m);
        let (raw_args, raw_rets) = (frame.args().map_err(conv)?, frame.rets().map_err(conv)?);
        // Where a result's memory is an argument's (`output_operand_aliases`), handing out
        // both a shared slice of the argument and a mutable slice of the result would alias
        // them: the argument gets no slice, and names the result instead. Results sharing
        // memory are refused there.
        let shared = frame.shared_memory(&raw_args, &raw_rets).map_err(conv)?;
        let mut rets: Vec<Ret<'a>> = raw_rets
            .iter()
            .map(|b| Ret {
                ffi_dtype: b.dtype,
                dims: b.dims,
                data: b.data,
                bytes: frame.host_bytes_mut(b),
                touched: std::cell::Cell::new(false),
                in_place: false,
            })
            .collect();
        for &j in shared.iter().flatten() {
            rets[j].in_place = true;
        }
        let args: Vec<Arg<'a>> = raw_args
            .iter()
            .zip(shared)
            .map(|(b, aliased_with)| Arg {
                ffi_dtype: b.dtype,
                dims: b.dims,
                data: b.data,
                bytes: aliased_with.map_or_else(|| frame.host_bytes(b), |_| None),
                aliased_with,
            })
            .collect();
        Ok(CallFrame {
            frame,
            args,
            rets,
            attrs: OnceCell::new(),
            user_type,
            state_type,
        })
    }

    /// Zeroes every host result the handler never asked to write and that shares no
    /// argument's memory (see [`Ret::host_bytes_mut`]); run after a handler succeeds.
    fn zero_unwritten(&mut self) {
        for r in &mut self.rets {
            if !r.touched.get() && !r.in_place {
                if let Some(b) = r.bytes.as_deref_mut() {
                    b.fill(0);
                }
            }
        }
    }

    /// The custom call's target name.
    pub fn target(&self) -> &str {
        self.frame.target_name()
    }

    /// The stage of this call.
    pub fn stage(&self) -> Stage {
        Stage::from_raw(self.frame.stage())
    }

    /// The plugin's FFI runtime version `(major, minor)`.
    pub fn runtime_version(&self) -> (i32, i32) {
        self.frame.runtime_version()
    }

    /// The buffer arguments.
    pub fn args(&self) -> &[Arg<'a>] {
        &self.args
    }

    /// Argument `i`, or an error naming how many there are.
    pub fn arg(&self, i: usize) -> std::result::Result<&Arg<'a>, FfiError> {
        let n = self.args.len();
        self.args.get(i).ok_or_else(|| {
            FfiError::invalid(format!(
                "the custom call has {n} argument(s); there is no argument {i}"
            ))
        })
    }

    /// The buffer results, to fill.
    pub fn rets(&mut self) -> &mut [Ret<'a>] {
        &mut self.rets
    }

    /// Result `i`, or an error naming how many there are.
    pub fn ret(&mut self, i: usize) -> std::result::Result<&mut Ret<'a>, FfiError> {
        let n = self.rets.len();
        self.rets.get_mut(i).ok_or_else(|| {
            FfiError::invalid(format!(
                "the custom call has {n} result(s); there is no result {i}"
            ))
        })
    }

    /// Arguments and results at once (to read one while writing another).
    pub fn split(&mut self) -> (&[Arg<'a>], &mut [Ret<'a>]) {
        (&self.args, &mut self.rets)
    }

    /// The attributes (`backend_config = {...}`), decoded on first use.
    pub fn attrs(&self) -> std::result::Result<&Attrs, FfiError> {
        self.attrs
            .get_or_init(|| {
                self.frame
                    .attrs()
                    .and_then(Attrs::from_raw)
                    .map_err(|(c, m)| FfiError::new(c, m))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The attributes decoded into a user type.
    pub fn parse_attrs<T: FromAttrs>(&self) -> std::result::Result<T, FfiError> {
        T::from_attrs(self.attrs()?)
    }

    /// The platform stream (a `cudaStream_t` on GPUs); 0 on the host.
    pub fn stream(&self) -> usize {
        self.frame.stream()
    }

    /// The ordinal of the device this call runs on (`None` where the runtime does not say,
    /// and at the instantiate stage, which runs at compile, outside any execution).
    pub fn device_ordinal(&self) -> Option<i32> {
        self.frame.device_ordinal()
    }

    /// The id of this execution (`None` where the runtime does not say, and at the
    /// instantiate stage).
    pub fn run_id(&self) -> Option<i64> {
        self.frame.run_id()
    }

    /// The execution context's address, for native code that uses the FFI C API itself.
    pub fn context_address(&self) -> usize {
        self.frame.context_address()
    }

    /// The user data the execute call attached with [`ExecuteContext::set_user_data`].
    pub fn user_data_any(&self) -> Option<&'a (dyn Any + Send + Sync)> {
        self.frame.user_data_any(self.user_type?)
    }

    /// The user data, if it is a `T`.
    pub fn user_data<T: Any>(&self) -> Option<&'a T> {
        self.user_data_any()?.downcast_ref::<T>()
    }

    /// This instance's state, made by the instantiate stage of a handler registered with
    /// [`register_with_state`] (`None` for other handlers).
    pub fn state_any(&self) -> Option<&'a (dyn Any + Send + Sync)> {
        let s = self.frame.state(self.state_type?)?;
        Some(match s.downcast_ref::<Stamped>() {
            Some(st) => &*st.state,
            None => s,
        })
    }

    /// Which registration's instantiate function made this instance's state.
    fn state_registration(&self) -> Option<u64> {
        let s = self.frame.state(self.state_type?)?;
        s.downcast_ref::<Stamped>().map(|st| st.registration)
    }

    /// The address attached under a user type id ([`ExecuteContext::add_raw`]).
    pub fn user_data_raw(&self, type_id: TypeId) -> Option<usize> {
        self.frame.user_data(type_id.0)
    }
}

/// An instance's state with the registration ([`register_with_state_on`]) whose
/// instantiate function made it.
struct Stamped {
    registration: u64,
    state: Box<dyn Any + Send + Sync>,
}

/// The stamp of the next stateful registration.
static NEXT_REGISTRATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The signature of a Rust handler.
pub type HandlerFn = dyn Fn(&mut CallFrame<'_>) -> std::result::Result<(), FfiError> + Send + Sync;

/// Options of [`register_with`].
#[derive(Clone, Debug, Default)]
pub struct RegisterOptions {
    /// The platform to register for; default: the client's (`cpu`, which the runtime calls
    /// `host`).
    pub platform: Option<String>,
    /// Re-bind a name that already has a handler instead of failing.
    pub replace: bool,
}

/// What a successful registration found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// Target name.
    pub target: String,
    /// Canonical platform name it was registered for.
    pub platform: String,
    /// The plugin's FFI runtime version.
    pub runtime_version: (i32, i32),
    /// The FFI version the handler reported.
    pub handler_version: (i32, i32),
}

/// Runs `f` with IEEE subnormals on the calling thread (flush-to-zero and
/// denormals-are-zero off), putting the thread's mode back afterwards.
///
/// XLA's CPU runtime runs programs, and so custom-call handlers, with subnormals flushed
/// to zero. Rust handlers keep that mode (their arithmetic is part of the program's); a
/// handler written for a language whose floats are IEEE (Python: `1e-310 * 1.0` is not
/// 0 there) runs its code inside this.
pub fn with_ieee_subnormals<R>(f: impl FnOnce() -> R) -> R {
    let _mode = crate::raw::fpmode::FlushDenormals::enter_ieee();
    f()
}

/// rpjrt's own FFI version (what its handlers are written against).
pub fn rpjrt_ffi_version() -> (i32, i32) {
    raw::OUR_FFI_VERSION
}

/// The platform a handler is registered for when none is named without a client: `cpu`
/// (the host platform, `host` in XLA's FFI registry).
pub const PLUGIN_DEFAULT_PLATFORM: &str = "cpu";

/// The platform to register for: `platform` when given; otherwise the client's platform,
/// or [`PLUGIN_DEFAULT_PLATFORM`] when registering on a plugin without a client. Fails only
/// for a closed client.
///
/// A platform named with a client must be the client's, by one of its names (`cpu` and
/// `host` alike; `gpu` for a CUDA or ROCm client; any letter case): a registration for a
/// platform the client does not have is refused here, naming the one it has, rather than
/// failing at compile with "No FFI handler registered".
pub fn platform_or_default(platform: Option<&str>, client: Option<&Client>) -> Result<String> {
    match (platform, client) {
        (Some(p), Some(c)) => {
            let has = c.platform_name()?;
            if same_platform(p, &has) {
                Ok(p.to_string())
            } else {
                Err(fail(
                    Code::InvalidArgument,
                    format!(
                        "the FFI platform {p:?} is not this client's: its plugin runs the \
                         platform {has:?} (named {:?} in XLA's FFI registry{}); register for \
                         that platform, or leave the platform out to get it",
                        canonical_platform(&has),
                        match canonical_platform(&has).as_str() {
                            "cuda" | "rocm" => ", or \"gpu\"",
                            "host" => ", or \"cpu\"",
                            _ => "",
                        }
                    ),
                ))
            }
        }
        (Some(p), None) => Ok(p.to_string()),
        (None, Some(c)) => c.platform_name(),
        (None, None) => Ok(PLUGIN_DEFAULT_PLATFORM.to_string()),
    }
}

/// Whether `named` (as a registration gives it) is the platform `has` (a client's platform
/// name): the same in XLA's FFI registry, or `gpu` for a CUDA or ROCm platform.
fn same_platform(named: &str, has: &str) -> bool {
    let (n, h) = (canonical_platform(named), canonical_platform(has));
    n == h || (n == "gpu" && matches!(h.as_str(), "cuda" | "rocm"))
}

/// The platform name XLA's FFI registry uses (`cpu` is `host` there).
pub fn canonical_platform(platform: &str) -> String {
    let p = platform.to_ascii_lowercase();
    match p.as_str() {
        "cpu" => "host".to_string(),
        _ => p,
    }
}

type Key = (usize, String, String);

static REGISTRY: Mutex<Option<HashMap<Key, &'static raw::Target>>> = Mutex::new(None);
static USER_TYPES: Mutex<Option<HashMap<usize, Option<i64>>>> = Mutex::new(None);

/// Set once any handler is registered in this process: from then on every execution gets
/// an execute context (an empty shared one when the caller gives none), because the FFI
/// 0.2 runtime crashes when a handler looks up user data in an execution without one.
static ANY_HANDLER: AtomicBool = AtomicBool::new(false);

/// The execute context to pass when the caller gave none: none until a handler was
/// registered, then the plugin's shared empty context (never destroyed).
pub(crate) fn default_context(
    api: &'static crate::raw::Api,
) -> Option<&'static crate::raw::execute::ExecuteContext> {
    if !ANY_HANDLER.load(AtomicOrdering::Acquire) {
        return None;
    }
    api.default_execute_context()
}

const USER_TYPE_NAME: &str = "rpjrt.ffi.UserData";
const PROBE_TARGET: &str = "__rpjrt_ffi_version_probe";

fn extension(plugin: &Plugin) -> Result<raw::FfiExtension> {
    raw::extension(plugin.inner.api).ok_or_else(|| Error::Unsupported {
        what: "custom calls (the PJRT FFI extension)".into(),
        needs: plugin.version(),
        plugin: plugin.version(),
        missing_slot: true,
    })
}

fn fail(code: Code, message: String) -> Error {
    Error::Pjrt {
        entry: "PJRT_FFI_Register_Handler",
        code,
        message,
    }
}

fn v(v: (i32, i32)) -> String {
    format!("{}.{}", v.0, v.1)
}

fn user_type(plugin: &Plugin, ext: &raw::FfiExtension) -> Option<i64> {
    let mut g = USER_TYPES.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&ext.key()) {
        return id;
    }
    let id = type_id_for(plugin, ext, USER_TYPE_NAME).ok();
    map.insert(ext.key(), id);
    id
}

/// How a target is registered with the runtime.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Through the PJRT FFI extension (execute stage only).
    Extension,
    /// Directly with the runtime's FFI table, for the instantiate and execute stages.
    Bundle(raw::RuntimeApi),
}

fn bind(
    plugin: &Plugin,
    platform: &str,
    name: &str,
    bound: raw::Bound,
    replace: bool,
) -> Result<Registration> {
    bind_via(plugin, platform, name, bound, replace, Via::Extension)
}

fn bind_via(
    plugin: &Plugin,
    platform: &str,
    name: &str,
    bound: raw::Bound,
    replace: bool,
    via: Via,
) -> Result<Registration> {
    if name.is_empty() {
        return Err(Error::invalid("an FFI target name must not be empty"));
    }
    if name.contains('\0') {
        return Err(Error::invalid(format!(
            "the FFI target name {name:?} contains a NUL character"
        )));
    }
    if crate::screen::xla_own_target(name) {
        return Err(Error::invalid(format!(
            "the FFI target name {name:?} is one XLA interprets itself: its compiler treats \
             custom calls to {name:?} as its own operation, so a handler registered under it \
             would never run (or the compile would crash); choose another target name"
        )));
    }
    if platform.is_empty() || platform.contains('\0') {
        return Err(Error::invalid(format!(
            "the FFI platform name {platform:?} for target {name:?} is empty or contains a NUL \
             character"
        )));
    }
    let api = plugin.inner.api;
    let ext = extension(plugin)?;
    let platform = canonical_platform(platform);
    let key = (ext.key(), platform.clone(), name.to_string());
    // Held across the plugin's register call so that registrations of one name never
    // interleave. The only callback that call makes is the metadata request, which the
    // dispatcher answers from the target itself without this lock (or any lock of ours
    // held elsewhere across a plugin call), so it cannot wait for this one.
    let mut g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    let target = match map.get(&key) {
        Some(t) => {
            if t.is_bound() && !replace {
                return Err(fail(
                    Code::AlreadyExists,
                    format!(
                        "an FFI handler for target {name:?} on platform {platform:?} is already \
                         registered with this plugin; remove it first or register with replace"
                    ),
                ));
            }
            if matches!(via, Via::Bundle(_))
                && t.metadata().is_some_and(|m| m.accepted())
                && !t.has_instantiate_stage()
            {
                // The runtime knows the name with its execute stage only and cannot register
                // it again: the instantiate function would never run, and every execution
                // would find no state.
                return Err(fail(
                    Code::FailedPrecondition,
                    format!(
                        "target {name:?} on platform {platform:?} was first registered without \
                         per-instance state, so the runtime never runs its instantiate stage \
                         and cannot be told to (XLA cannot register a name again): register the \
                         handler with state under a new target name"
                    ),
                ));
            }
            if matches!(bound, raw::Bound::Native(_)) && t.has_instantiate_stage() {
                // The runtime calls the target at its instantiate stage too (at every
                // compile), which native code written for the execute stage refuses.
                return Err(fail(
                    Code::FailedPrecondition,
                    format!(
                        "target {name:?} on platform {platform:?} was first registered with \
                         per-instance state, so the runtime calls it at its instantiate stage \
                         too (at every compile), which native handler code does not expect, and \
                         XLA cannot register a name again: register the native handler under a \
                         new target name"
                    ),
                ));
            }
            if let Some(m) = t.metadata().filter(raw::MetaSeen::accepted) {
                // Already known to the runtime: swap what it runs.
                t.bind(Some(bound));
                return Ok(Registration {
                    target: name.to_string(),
                    platform,
                    runtime_version: m.runtime,
                    handler_version: m.reported,
                });
            }
            *t
        }
        None => {
            let t = raw::Target::new(name, &platform, platform == "host", ext.key())?;
            map.insert(key, t);
            t
        }
    };
    let native = matches!(bound, raw::Bound::Native(_));
    ANY_HANDLER.store(true, AtomicOrdering::Release);
    target.reset_metadata();
    target.bind(Some(bound));
    let ours = if native {
        "the handler's own"
    } else {
        "rpjrt's"
    };
    let registered = match via {
        Via::Extension => target.register_with(api, &ext),
        Via::Bundle(xla_api) => target.register_bundle(xla_api),
    };
    if let Err(e) = registered {
        target.bind(None);
        return Err(fail(
            e.code(),
            format!(
                "the plugin refused the FFI handler for target {name:?} on platform \
                 {platform:?} (rpjrt speaks XLA FFI {}; the runtime's version is unknown \
                 because it never asked the handler): {e}",
                v(raw::OUR_FFI_VERSION)
            ),
        ));
    }
    let Some(m) = target.metadata() else {
        target.bind(None);
        return Err(fail(
            Code::FailedPrecondition,
            format!(
                "the plugin accepted the FFI handler for target {name:?} on platform \
                 {platform:?} but its runtime never asked the handler for its metadata, so the \
                 registration was dropped ({ours} FFI version: {}; runtime FFI version: unknown). \
                 Programs calling it would fail to compile with \"No FFI handler registered\"",
                if native {
                    "unknown".to_string()
                } else {
                    v(raw::OUR_FFI_VERSION)
                }
            ),
        ));
    };
    if !m.accepted() {
        target.bind(None);
        return Err(fail(
            Code::FailedPrecondition,
            m.refusal(name, &platform, native),
        ));
    }
    Ok(Registration {
        target: name.to_string(),
        platform,
        runtime_version: m.runtime,
        handler_version: m.reported,
    })
}

fn rust_callback(user_type: Option<i64>, handler: Arc<HandlerFn>) -> raw::Bound {
    raw::Bound::Rust(Arc::new(move |frame: &raw::Frame<'_>| {
        let mut call = CallFrame::new(frame, user_type, None).map_err(|e| (e.code, e.message))?;
        // A handler without state replacing one with state on the same target: the runtime
        // still runs the instantiate stage, which has nothing to do here (no buffers, and
        // no state to make); only the execute stage is the handler's.
        if call.stage() != Stage::Execute {
            return Ok(());
        }
        let _span = crate::trace::span(crate::trace::Category::CustomCall, "custom_call")
            .text("target", call.target());
        handler(&mut call).map_err(|e| (e.code, e.message))?;
        call.zero_unwritten();
        Ok(())
    }))
}

/// Registers `handler` for custom calls to `name` on the client's platform.
///
/// Fails at once, naming target, platform and both FFI versions, when the plugin refuses
/// or silently drops the registration; fails with `AlreadyExists` when the name has a
/// handler (see [`register_with`] to replace it).
pub fn register<F>(client: &Client, name: &str, handler: F) -> Result<Registration>
where
    F: Fn(&mut CallFrame<'_>) -> std::result::Result<(), FfiError> + Send + Sync + 'static,
{
    register_with(client, name, &RegisterOptions::default(), handler)
}

/// [`register`] with options (platform, replace).
pub fn register_with<F>(
    client: &Client,
    name: &str,
    options: &RegisterOptions,
    handler: F,
) -> Result<Registration>
where
    F: Fn(&mut CallFrame<'_>) -> std::result::Result<(), FfiError> + Send + Sync + 'static,
{
    let platform = platform_or_default(options.platform.as_deref(), Some(client))?;
    register_on(
        client.plugin(),
        &platform,
        name,
        options.replace,
        Arc::new(handler),
    )
}

/// Registers a shared handler for `name` on `platform` of a plugin (no client needed).
pub fn register_on(
    plugin: &Plugin,
    platform: &str,
    name: &str,
    replace: bool,
    handler: Arc<HandlerFn>,
) -> Result<Registration> {
    let ext = extension(plugin)?;
    let ut = user_type(plugin, &ext);
    bind(plugin, platform, name, rust_callback(ut, handler), replace)
}

/// Registers a handler with per-instance state: `instantiate` runs once for each compiled
/// instance of the custom call (at compile time) and returns the instance's state; every
/// execution then gets that state with the call. The runtime frees the state with the
/// executable (a panic in its `Drop` there is caught and printed, never unwinding into it).
///
/// Needs an FFI runtime of version 0.3 or newer (the 0.115 CPU plugin's is 0.4); on older
/// ones (the 0.81 plugin's 0.2) this fails with `Unimplemented`, naming the versions.
pub fn register_with_state<S, I, E>(
    client: &Client,
    name: &str,
    options: &RegisterOptions,
    instantiate: I,
    execute: E,
) -> Result<Registration>
where
    S: Any + Send + Sync,
    I: Fn(&mut CallFrame<'_>) -> std::result::Result<S, FfiError> + Send + Sync + 'static,
    E: Fn(&mut CallFrame<'_>, &S) -> std::result::Result<(), FfiError> + Send + Sync + 'static,
{
    let platform = platform_or_default(options.platform.as_deref(), Some(client))?;
    register_with_state_on(
        client.plugin(),
        &platform,
        name,
        options.replace,
        instantiate,
        execute,
    )
}

/// [`register_with_state`] for a plugin and platform (no client needed), optionally
/// replacing an existing handler; the Python binding registers through it.
pub fn register_with_state_on<S, I, E>(
    plugin: &Plugin,
    platform: &str,
    name: &str,
    replace: bool,
    instantiate: I,
    execute: E,
) -> Result<Registration>
where
    S: Any + Send + Sync,
    I: Fn(&mut CallFrame<'_>) -> std::result::Result<S, FfiError> + Send + Sync + 'static,
    E: Fn(&mut CallFrame<'_>, &S) -> std::result::Result<(), FfiError> + Send + Sync + 'static,
{
    let probe = probe(plugin)?;
    let runtime = probe.metadata().map(|m| m.runtime).unwrap_or((0, 0));
    if runtime < (0, 3) {
        return Err(Error::Pjrt {
            entry: "XLA_FFI_Handler_Register",
            code: Code::Unimplemented,
            message: format!(
                "per-instance state (the instantiate stage) for target {name:?} needs an XLA FFI \
                 runtime of version 0.3 or newer; this plugin's is {}",
                v(runtime)
            ),
        });
    }
    let xla_api = probe.runtime_api();
    let state_type = raw::state_type_id(xla_api)?;
    let ext = extension(plugin)?;
    let user_type = user_type(plugin, &ext);
    // This registration's stamp on the states its instantiate function makes: a handler
    // that replaced it never gets them (whatever their type).
    let registration = NEXT_REGISTRATION.fetch_add(1, AtomicOrdering::Relaxed);
    let cb: Arc<raw::Callback> = Arc::new(move |frame: &raw::Frame<'_>| {
        let mut call =
            CallFrame::new(frame, user_type, Some(state_type)).map_err(|e| (e.code, e.message))?;
        let _span = crate::trace::span(crate::trace::Category::CustomCall, "custom_call")
            .text("target", call.target());
        let fail = |e: FfiError| (e.code, e.message);
        match call.stage() {
            Stage::Instantiate => {
                let s = instantiate(&mut call).map_err(fail)?;
                let stamped = Stamped {
                    registration,
                    state: Box::new(s),
                };
                frame.set_state(state_type, Box::new(stamped))
            }
            Stage::Execute => {
                let stamp = call.state_registration();
                let state = call.state_any();
                let s = state
                    .filter(|_| stamp == Some(registration))
                    .and_then(|s| s.downcast_ref::<S>())
                    .ok_or_else(|| {
                        let why = match state {
                            // Made by the instantiate function of the handler this one
                            // replaced (whatever its type): never handed to this one.
                            Some(_) => {
                                "holds the state made by the instantiate function of the \
                                 handler this one replaced: compile the program again to \
                                 instantiate it for this handler"
                            }
                            // The instantiate stage ran while a handler without state
                            // was bound (a stateless replacement): it made none.
                            None => {
                                "has no instance state: the program was compiled while a \
                                 handler without state was registered for this target, so \
                                 none was made; compile the program again to instantiate it \
                                 for this handler"
                            }
                        };
                        (
                            Code::FailedPrecondition,
                            format!("the handler for {:?} {why}", call.target()),
                        )
                    })?;
                execute(&mut call, s).map_err(fail)?;
                call.zero_unwritten();
                Ok(())
            }
            _ => Ok(()),
        }
    });
    bind_via(
        plugin,
        platform,
        name,
        raw::Bound::Rust(cb),
        replace,
        Via::Bundle(xla_api),
    )
}

/// Removes the handler of `name`: the runtime keeps the registration (it has no way to
/// forget one), but calls fail with a message saying the handler was removed, and the name
/// can be registered again. Returns whether a handler was bound.
pub fn unregister(plugin: &Plugin, platform: &str, name: &str) -> Result<bool> {
    let ext = extension(plugin)?;
    let key = (ext.key(), canonical_platform(platform), name.to_string());
    let g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    match g.as_ref().and_then(|m| m.get(&key)) {
        Some(t) => {
            let was = t.is_bound();
            t.bind(None);
            Ok(was)
        }
        None => Ok(false),
    }
}

/// The targets on this plugin and platform that rpjrt's own handlers (Rust closures,
/// Python functions) serve; empty without the FFI extension.
pub(crate) fn rust_served(api: &crate::raw::Api, platform: &str) -> Vec<String> {
    let Some(ext) = raw::extension(api) else {
        return Vec::new();
    };
    let platform = canonical_platform(platform);
    let g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    g.iter()
        .flatten()
        .filter(|((k, p, _), t)| *k == ext.key() && *p == platform && t.serves_rust())
        .map(|((_, _, name), _)| name.clone())
        .collect()
}

/// Refuses a compiled module in which a custom call served by one of rpjrt's handlers
/// (`served`) takes or gives a buffer in a layout other than row-major: the handler's
/// slices and views are row-major, so it would read and write the elements in the wrong
/// order. A module rpjrt cannot read passes.
pub(crate) fn check_layouts(served: &[String], module: &[u8], format: &str) -> Result<()> {
    let odd = crate::hlo::custom_call_layouts(module, format).unwrap_or_default();
    match odd
        .into_iter()
        .find(|(target, _, _)| served.contains(target))
    {
        None => Ok(()),
        Some((target, what, m2m)) => Err(Error::invalid(format!(
            "the custom call to {target:?} lays out its {what} as {m2m:?} (minor to major), \
             but rpjrt's handlers (Rust closures and Python functions) see every buffer in \
             row-major order, so the handler would read or write its elements in the wrong \
             order; drop operand_layouts/result_layouts from the custom call (or give the \
             row-major layout), or serve the target with native handler code"
        ))),
    }
}

/// Whether `name` has a handler bound on this plugin and platform.
pub fn is_registered(plugin: &Plugin, platform: &str, name: &str) -> bool {
    let Ok(ext) = extension(plugin) else {
        return false;
    };
    let key = (ext.key(), canonical_platform(platform), name.to_string());
    let g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    g.as_ref()
        .and_then(|m| m.get(&key))
        .is_some_and(|t| t.is_bound())
}

/// The plugin's FFI runtime version, learned by registering a private probe target once.
pub fn runtime_version(plugin: &Plugin) -> Result<(i32, i32)> {
    let t = probe(plugin)?;
    t.metadata().map(|m| m.runtime).ok_or_else(|| {
        fail(
            Code::FailedPrecondition,
            "the FFI version probe was not asked for metadata".into(),
        )
    })
}

fn probe(plugin: &Plugin) -> Result<&'static raw::Target> {
    let ext = extension(plugin)?;
    let key = (ext.key(), "host".to_string(), PROBE_TARGET.to_string());
    let existing = REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&key).copied());
    if let Some(t) = existing.filter(|t| t.metadata().is_some()) {
        return Ok(t);
    }
    let h: Arc<HandlerFn> = Arc::new(|_: &mut CallFrame<'_>| {
        Err(FfiError::new(
            Code::Internal,
            "rpjrt's FFI version probe is not callable",
        ))
    });
    bind(plugin, "host", PROBE_TARGET, rust_callback(None, h), true)?;
    let g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    Ok(g.as_ref()
        .and_then(|m| m.get(&key).copied())
        .expect("just registered"))
}

pub use crate::raw::ffi::{NativeHandler, UserAddress};

/// Checks that `address` lies in executable memory of this process (a mapping with execute
/// permission in `/proc/self/maps`), as an `XLA_FFI_Handler` function must. Bindings that
/// receive a handler as a bare address or a capsule call it before
/// [`NativeHandler::from_address`], so a stray integer or a capsule of data is an error
/// instead of a jump into it. Where the process's mappings cannot be read (not Linux) it
/// checks nothing.
pub fn check_code_address(address: usize) -> Result<()> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Ok(());
    };
    let mapped = maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (range, perms) = (fields.next()?, fields.next()?);
        let (lo, hi) = range.split_once('-')?;
        let lo = usize::from_str_radix(lo, 16).ok()?;
        let hi = usize::from_str_radix(hi, 16).ok()?;
        (lo <= address && address < hi).then(|| perms.contains('x'))
    });
    match mapped {
        Some(true) => Ok(()),
        Some(false) => Err(Error::invalid(format!(
            "the handler address {address:#x} is in memory that holds no code (a data \
             mapping); an XLA_FFI_Handler is a function"
        ))),
        None => Err(Error::invalid(format!(
            "the handler address {address:#x} is not mapped in this process; an \
             XLA_FFI_Handler is the address of a loaded function"
        ))),
    }
}

/// Registers compiled handler code ([`NativeHandler`]) for `name` on the client's platform
/// (or `platform`).
///
/// Before registering, the handler is asked which FFI version it was built for (the same
/// metadata question XLA asks); a handler newer than the plugin's FFI runtime, which the
/// runtime would drop silently, is refused with both versions named. The registration
/// itself is then checked as for Rust handlers.
pub fn register_raw(
    client: &Client,
    name: &str,
    handler: NativeHandler,
    platform: Option<&str>,
) -> Result<Registration> {
    let platform = match platform {
        Some(p) => p.to_string(),
        None => client.platform_name()?,
    };
    register_raw_on(client.plugin(), &platform, name, handler, false)
}

/// [`register_raw`] for a plugin and platform, optionally replacing an existing handler.
pub fn register_raw_on(
    plugin: &Plugin,
    platform: &str,
    name: &str,
    handler: NativeHandler,
    replace: bool,
) -> Result<Registration> {
    let probe = probe(plugin)?;
    let runtime = probe.metadata().map(|m| m.runtime);
    let built = raw::native_version(handler, probe);
    check_native_version(name, platform, runtime, built)?;
    bind(plugin, platform, name, raw::Bound::Native(handler), replace)
}

/// Refuses a native handler built for a newer FFI than the runtime's.
fn check_native_version(
    name: &str,
    platform: &str,
    runtime: Option<(i32, i32)>,
    built: Option<(i32, i32)>,
) -> Result<()> {
    if let (Some(rt), Some(b)) = (runtime, built) {
        if !(b.0 == rt.0 && b.1 <= rt.1) {
            return Err(fail(
                Code::FailedPrecondition,
                format!(
                    "cannot register the handler for target {name:?} on platform {:?}: it was \
                     built for XLA FFI {}, newer than this plugin's FFI runtime ({}), which \
                     would drop it. Use a plugin built from a newer XLA",
                    canonical_platform(platform),
                    v(b),
                    v(rt)
                ),
            ));
        }
    }
    Ok(())
}

static TYPE_IDS: Mutex<Option<HashMap<(usize, String), i64>>> = Mutex::new(None);

/// Registers a user type name with the plugin's FFI runtime; the same name gives the same
/// id. Use the id with [`ExecuteContext::add_raw`] and [`CallFrame::user_data_raw`].
pub fn register_type(plugin: &Plugin, name: &str) -> Result<TypeId> {
    let ext = extension(plugin)?;
    type_id_for(plugin, &ext, name).map(TypeId)
}

fn type_id_for(plugin: &Plugin, ext: &raw::FfiExtension, name: &str) -> Result<i64> {
    let mut g = TYPE_IDS.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    let key = (ext.key(), name.to_string());
    if let Some(&id) = map.get(&key) {
        return Ok(id);
    }
    let id = match ext.type_register(plugin.inner.api, name) {
        Ok(id) => id,
        // Registered earlier by someone else in this process: the runtime names the id.
        Err(e) => match e
            .to_string()
            .rsplit_once("already registered with type id ")
        {
            Some((_, rest)) => rest
                .trim()
                .trim_end_matches('.')
                .parse::<i64>()
                .map_err(|_| e.clone())?,
            None => return Err(e),
        },
    };
    map.insert(key, id);
    Ok(id)
}

/// Per-execute data for handlers: pass it in
/// [`ExecuteOptions::ffi_context`](crate::ExecuteOptions::ffi_context).
///
/// Keep it alive until the execution's outputs are ready (rpjrt's execute waits for them
/// when a context is given, so dropping it after `execute_with` returns is fine).
pub struct ExecuteContext {
    ptr: raw::ExecuteContextPtr,
    plugin: Plugin,
    user: Option<Box<Arc<dyn Any + Send + Sync>>>,
}

impl fmt::Debug for ExecuteContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecuteContext")
            .field("has_user_data", &self.user.is_some())
            .finish()
    }
}

impl ExecuteContext {
    /// An empty context for executions on this client.
    pub fn new(client: &Client) -> Result<ExecuteContext> {
        Ok(ExecuteContext {
            ptr: raw::ExecuteContextPtr::create(client.plugin().inner.api)?,
            plugin: client.plugin().clone(),
            user: None,
        })
    }

    /// A context carrying `value` as user data ([`CallFrame::user_data`]).
    pub fn with_user_data<T: Any + Send + Sync>(
        client: &Client,
        value: T,
    ) -> Result<ExecuteContext> {
        let mut c = ExecuteContext::new(client)?;
        c.set_user_data(Arc::new(value))?;
        Ok(c)
    }

    /// Attaches `value` as the user data (once per context).
    pub fn set_user_data(&mut self, value: Arc<dyn Any + Send + Sync>) -> Result<()> {
        if self.user.is_some() {
            return Err(Error::invalid("this execute context already has user data"));
        }
        let ext = extension(&self.plugin)?;
        let ty = user_type(&self.plugin, &ext).ok_or_else(|| Error::Unsupported {
            what: "FFI user data (type registration)".into(),
            needs: self.plugin.version(),
            plugin: self.plugin.version(),
            missing_slot: true,
        })?;
        let boxed = Box::new(value);
        let addr = &*boxed as *const Arc<dyn Any + Send + Sync> as usize;
        ext.user_data_add(self.plugin.inner.api, &self.ptr, ty, addr)?;
        self.user = Some(boxed);
        Ok(())
    }

    /// Attaches an address under a user type id ([`register_type`]), for native handlers
    /// that read it with `XLA_FFI_ExecutionContext_Get` ([`CallFrame::user_data_raw`] in
    /// Rust handlers). Making the [`UserAddress`] is where its validity is promised.
    pub fn add_raw(&mut self, type_id: TypeId, data: UserAddress) -> Result<()> {
        let ext = extension(&self.plugin)?;
        ext.user_data_add(self.plugin.inner.api, &self.ptr, type_id.0, data.address())
    }

    /// Whether this context was made by the plugin with this function table.
    pub(crate) fn is_for(&self, api: &'static crate::raw::Api) -> bool {
        std::ptr::eq(self.plugin.inner.api, api)
    }

    pub(crate) fn raw_context(&self) -> &crate::raw::execute::ExecuteContext {
        self.ptr.context()
    }
}
