//! XLA FFI: the C side of custom-call handlers.
//!
//! # How a call finds its Rust closure
//!
//! XLA calls a handler as a bare C function pointer, `XLA_FFI_Error* (*)(XLA_FFI_CallFrame*)`.
//! The call frame carries arguments, results, attributes and an execution context, but not
//! the target name, and the runtime offers no per-registration user pointer. Per-instance
//! state only exists after the instantiate stage has run (which itself does not know the
//! target), user data in the execution context is per execute call (not per target), and
//! asking users to add a hidden attribute would break programs lowered elsewhere (JAX). So
//! every registered target gets its *own* function pointer: a small machine-code thunk,
//! written at run time into an executable page, that loads the address of that target's
//! slot into the second argument register and jumps to one shared Rust function,
//! `dispatch`. This is the technique libffi closures use, reduced to the one signature we
//! need. Thunks are made a page at a time (128 per page) and handed out as needed, so there
//! is no fixed limit; a page is written once, then made read+execute and never written
//! again (no page is ever writable and executable at once). The runtime keeps handler
//! pointers forever, so thunks and their targets are never freed; re-binding or removing a
//! name swaps the closure inside the target.
//!
//! Supported on Linux x86-64 and aarch64; elsewhere registration reports `Unsupported`.

use std::any::Any;
use std::ffi::{c_int, c_void, CString};
use std::mem::{offset_of, size_of};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rpjrt_sys as sys;

use super::util::{ffi_dense_bytes, ffi_storage_bits};
use super::{args_types, pjrt, Api, Args};
use crate::error::{Code, Error, Result};

args_types! {
    PJRT_ExecuteContext_Create_Args => PJRT_ExecuteContext_Create_Args_STRUCT_SIZE,
    PJRT_ExecuteContext_Destroy_Args => PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE,
    PJRT_FFI_Register_Handler_Args => PJRT_FFI_Register_Handler_Args_STRUCT_SIZE,
    PJRT_FFI_Type_Register_Args => PJRT_FFI_Type_Register_Args_STRUCT_SIZE,
    PJRT_FFI_UserData_Add_Args => PJRT_FFI_UserData_Add_Args_STRUCT_SIZE,
}

/// An FFI version pair `(major, minor)`.
pub type Version = (i32, i32);

/// The FFI version rpjrt's handlers are written against.
pub const OUR_FFI_VERSION: Version = (sys::XLA_FFI_API_MAJOR, sys::XLA_FFI_API_MINOR);

// ------------------------------------------------------------------------ PJRT extension

/// The plugin's PJRT FFI extension (lives as long as the never-unloaded library).
#[derive(Clone, Copy)]
pub struct FfiExtension {
    ptr: *const sys::PJRT_FFI_Extension,
    size: usize,
}

// SAFETY: the extension struct is immutable and lives as long as the library (never unloaded).
unsafe impl Send for FfiExtension {}
// SAFETY: see `Send`.
unsafe impl Sync for FfiExtension {}

/// Finds the FFI extension on the plugin's chain.
pub fn extension(api: &Api) -> Option<FfiExtension> {
    // SAFETY: the table covers its header (checked at load).
    let mut cur = unsafe { std::ptr::addr_of!((*api.ptr).extension_start).read() };
    let mut hops = 0;
    while !cur.is_null() && hops < 64 {
        // SAFETY: each chain entry starts with a PJRT_Extension_Base; the chain is immutable.
        let base = unsafe { cur.read() };
        if base.r#type == sys::PJRT_Extension_Type_FFI {
            return Some(FfiExtension {
                ptr: cur.cast(),
                size: base.struct_size,
            });
        }
        cur = base.next;
        hops += 1;
    }
    None
}

impl FfiExtension {
    /// Address used as the registry key for this plugin.
    pub fn key(&self) -> usize {
        self.ptr as usize
    }

    fn entry<F: Copy>(
        &self,
        offset: usize,
        read: impl FnOnce(&sys::PJRT_FFI_Extension) -> Option<F>,
        what: &str,
    ) -> Result<F> {
        if offset + size_of::<usize>() > self.size {
            return Err(Error::invalid(format!(
                "the plugin's FFI extension is too old to offer {what}"
            )));
        }
        // SAFETY: the slot lies inside the plugin's extension struct (checked above).
        read(unsafe { &*self.ptr }).ok_or_else(|| {
            Error::invalid(format!("the plugin's FFI extension leaves {what} empty"))
        })
    }

    /// `register_handler`: registers `handler` (an `XLA_FFI_Handler` address) for a target.
    ///
    /// # Safety
    /// `handler` must be a function with the `XLA_FFI_Handler` signature that stays valid
    /// for the life of the process.
    pub unsafe fn register_handler(
        &self,
        api: &Api,
        name: &str,
        platform: &str,
        handler: usize,
    ) -> Result<()> {
        let f = self.entry(
            offset_of!(sys::PJRT_FFI_Extension, register_handler),
            |e| e.register_handler,
            "register_handler",
        )?;
        let mut a = sys::PJRT_FFI_Register_Handler_Args::new();
        a.target_name = name.as_ptr().cast();
        a.target_name_size = name.len();
        a.handler = handler as *mut c_void;
        a.platform_name = platform.as_ptr().cast();
        a.platform_name_size = platform.len();
        // SAFETY: the strings outlive the call; the handler is valid per the caller.
        let err = unsafe { super::call_guarded("PJRT_FFI_Register_Handler", f, &mut a) }?;
        if err.is_null() {
            Ok(())
        } else {
            Err(api.take_error(err, "PJRT_FFI_Register_Handler"))
        }
    }

    /// `type_register`: a type id for `name` (the same name gives the same id).
    pub fn type_register(&self, api: &Api, name: &str) -> Result<i64> {
        let f = self.entry(
            offset_of!(sys::PJRT_FFI_Extension, type_register),
            |e| e.type_register,
            "type_register",
        )?;
        let mut info = sys::PJRT_FFI_Type_Info {
            deleter: None,
            serialize: None,
            deserialize: None,
        };
        let mut a = sys::PJRT_FFI_Type_Register_Args::new();
        a.type_name = name.as_ptr().cast();
        a.type_name_size = name.len();
        a.type_info = &mut info;
        // SAFETY: name and info outlive the call.
        let err = unsafe { super::call_guarded("PJRT_FFI_Type_Register", f, &mut a) }?;
        if err.is_null() {
            Ok(a.type_id)
        } else {
            Err(api.take_error(err, "PJRT_FFI_Type_Register"))
        }
    }

    /// `user_data_add`: attaches `data` under `type_id` to a context.
    pub fn user_data_add(
        &self,
        api: &Api,
        ctx: &ExecuteContextPtr,
        type_id: i64,
        data: usize,
    ) -> Result<()> {
        let f = self.entry(
            offset_of!(sys::PJRT_FFI_Extension, user_data_add),
            |e| e.user_data_add,
            "user_data_add",
        )?;
        let mut a = sys::PJRT_FFI_UserData_Add_Args::new();
        a.context = ctx.raw();
        a.user_data = sys::PJRT_FFI_UserData {
            type_id,
            data: data as *mut c_void,
        };
        // SAFETY: the context is live (owned by `ctx`); the data pointer is opaque to the
        // runtime, which only hands it back to handlers.
        let err = unsafe { super::call_guarded("PJRT_FFI_UserData_Add", f, &mut a) }?;
        if err.is_null() {
            Ok(())
        } else {
            Err(api.take_error(err, "PJRT_FFI_UserData_Add"))
        }
    }
}

/// An owned `PJRT_ExecuteContext`.
pub struct ExecuteContextPtr {
    ctx: super::execute::ExecuteContext,
    api: &'static Api,
}

// SAFETY: a context is a plain heap object of the plugin; it is only read by the plugin during
// an execute call, and destroyed once by its owner.
unsafe impl Send for ExecuteContextPtr {}
// SAFETY: see `Send`; rpjrt never mutates it through a shared reference.
unsafe impl Sync for ExecuteContextPtr {}

impl ExecuteContextPtr {
    /// `PJRT_ExecuteContext_Create`.
    pub fn create(api: &'static Api) -> Result<ExecuteContextPtr> {
        let mut a = sys::PJRT_ExecuteContext_Create_Args::new();
        // SAFETY: plain out-parameter call.
        unsafe { pjrt!(api, PJRT_ExecuteContext_Create, &mut a) }?;
        let ptr = std::ptr::NonNull::new(a.context)
            .ok_or_else(|| Error::invalid("PJRT_ExecuteContext_Create returned no context"))?;
        Ok(ExecuteContextPtr {
            ctx: super::execute::ExecuteContext { ptr },
            api,
        })
    }

    /// The context as the execute marshaller takes it.
    pub fn context(&self) -> &super::execute::ExecuteContext {
        &self.ctx
    }

    fn raw(&self) -> *mut sys::PJRT_ExecuteContext {
        self.ctx.ptr.as_ptr()
    }
}

impl Api {
    /// The plugin's shared empty execute context, made on first use and kept for the life
    /// of the process (`None` if the plugin cannot make one). Lock-free after the first call.
    pub fn default_execute_context(
        &'static self,
    ) -> Option<&'static super::execute::ExecuteContext> {
        self.default_context
            .get_or_init(|| ExecuteContextPtr::create(self).ok())
            .as_ref()
            .map(ExecuteContextPtr::context)
    }
}

impl Drop for ExecuteContextPtr {
    fn drop(&mut self) {
        let mut a = sys::PJRT_ExecuteContext_Destroy_Args::new();
        a.context = self.raw();
        // SAFETY: owned context, destroyed once.
        let _ = unsafe { pjrt!(self.api, PJRT_ExecuteContext_Destroy, &mut a) };
    }
}

// ------------------------------------------------------------------------------- targets

/// What a Rust-served target runs: gets the frame, returns `Err((code, message))` to fail.
pub type Callback = dyn Fn(&Frame<'_>) -> std::result::Result<(), (Code, String)> + Send + Sync;

/// What a target is bound to.
#[derive(Clone)]
pub enum Bound {
    /// A Rust closure.
    Rust(Arc<Callback>),
    /// Compiled handler code from elsewhere; the frame is forwarded untouched.
    Native(NativeHandler),
}

/// Compiled XLA FFI handler code (an `XLA_FFI_Handler` function) that its maker vouched
/// for; register it with `rpjrt::ffi::register_raw`.
#[derive(Clone, Copy)]
pub struct NativeHandler(sys::XLA_FFI_Handler);

impl NativeHandler {
    /// The handler function at `address`; `None` for a null address.
    ///
    /// # Safety
    /// `address` must be the address of a function with the C signature
    /// `XLA_FFI_Error* handler(XLA_FFI_CallFrame*)` that stays loaded for the life of the
    /// process and behaves as an XLA FFI handler (fills in metadata when asked, reads only
    /// what the call frame offers).
    pub unsafe fn from_address(address: usize) -> Option<NativeHandler> {
        // SAFETY: forwarded contract.
        unsafe { native_handler(address) }.map(NativeHandler)
    }

    /// The function's address.
    pub fn address(&self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Debug for NativeHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NativeHandler({:#x})", self.address())
    }
}

/// An address to attach to an execute context under a user type id, for native handlers
/// that read it with `XLA_FFI_ExecutionContext_Get`; attach it with
/// `rpjrt::ffi::ExecuteContext::add_raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserAddress(usize);

impl UserAddress {
    /// Wraps `address`.
    ///
    /// # Safety
    /// Whatever `address` points to must stay valid while any execution using a context it
    /// is attached to runs, and be what the handlers reading its type id expect.
    pub unsafe fn new(address: usize) -> UserAddress {
        UserAddress(address)
    }

    /// The address.
    pub fn address(&self) -> usize {
        self.0
    }
}

/// What the metadata call at registration told us.
#[derive(Clone, Copy, Debug)]
pub struct MetaSeen {
    /// The runtime's FFI version (from the frame's api).
    pub runtime: Version,
    /// The version the handler reported.
    pub reported: Version,
}

impl MetaSeen {
    /// Whether a handler may run on this runtime: a valid runtime version (no negative
    /// part), the same major version, and a minor version no newer than the runtime's.
    pub fn accepted(&self) -> bool {
        let (rt, h) = (self.runtime, self.reported);
        rt.0.min(rt.1) >= 0 && h.0 == rt.0 && h.1 <= rt.1
    }

    /// Why [`MetaSeen::accepted`] is false, for target `name` on `platform`; `native`: the
    /// handler is the caller's own code (else rpjrt's, which speaks what the runtime does).
    pub fn refusal(&self, name: &str, platform: &str, native: bool) -> String {
        let (rt, h) = (self.runtime, self.reported);
        let v = |v: Version| format!("{}.{}", v.0, v.1);
        let ours = if native {
            "the handler's own"
        } else {
            "rpjrt's"
        };
        let why = if rt.0.min(rt.1) < 0 {
            "which is not a valid version: use another plugin".to_string()
        } else if h.0 != rt.0 {
            let other = match native {
                true => format!("a handler built for FFI {}.x", rt.0),
                false => format!("an rpjrt that speaks FFI {}.x", rt.0),
            };
            format!(
                "and the handler speaks XLA FFI {} ({ours} version): their major versions \
                 differ ({} vs {}), and a handler runs only on a runtime of its own major \
                 version. Use a plugin whose FFI runtime is {}.x, or {other}",
                v(h),
                h.0,
                rt.0,
                h.0
            )
        } else {
            format!(
                "and the handler speaks XLA FFI {} ({ours} version), a newer minor version. \
                 Use a plugin with a newer XLA, or a handler built for FFI {} or older",
                v(h),
                v(rt)
            )
        };
        format!(
            "rpjrt refused the FFI handler for target {name:?} on platform {platform:?} (its \
             own version check, not the runtime's): the plugin's FFI runtime is XLA FFI {}, \
             {why}",
            v(rt)
        )
    }
}

/// One registered (plugin, platform, name): what its thunk dispatches to. Never freed.
pub struct Target {
    /// The handler's target name.
    pub name: String,
    /// The platform it is registered for.
    pub platform: String,
    host_memory: bool,
    bound: RwLock<Option<Bound>>,
    meta: Mutex<Option<MetaSeen>>,
    /// The runtime's FFI api, learned at the metadata call (0 until then).
    api: AtomicPtr<sys::XLA_FFI_Api>,
    thunk: usize,
    /// The plugin the target is registered with ([`FfiExtension::key`]).
    plugin: usize,
    /// Whether the runtime knows this target with its instantiate stage
    /// ([`Target::register_bundle`]); a target registered through the PJRT extension has
    /// the execute stage only, for good (the runtime cannot re-register a name).
    instantiate_stage: std::sync::atomic::AtomicBool,
}

impl Target {
    /// A new target of the plugin whose FFI extension has key `plugin`
    /// ([`FfiExtension::key`]), with its own thunk; `host_memory` says buffers are
    /// host-addressable.
    pub fn new(
        name: &str,
        platform: &str,
        host_memory: bool,
        plugin: usize,
    ) -> Result<&'static Target> {
        let (code, slot) = thunks::take()?;
        let t: &'static Target = Box::leak(Box::new(Target {
            name: name.to_string(),
            platform: platform.to_string(),
            host_memory,
            bound: RwLock::new(None),
            meta: Mutex::new(None),
            api: AtomicPtr::new(null_mut()),
            thunk: code,
            plugin,
            instantiate_stage: std::sync::atomic::AtomicBool::new(false),
        }));
        slot.store((t as *const Target).cast_mut(), Ordering::Release);
        Ok(t)
    }

    /// Replaces what this target runs (`None`: calls fail with "removed").
    pub fn bind(&self, b: Option<Bound>) {
        if matches!(b, Some(Bound::Rust(_))) {
            HANDLERS_BOUND.store(true, Ordering::Relaxed);
        }
        *self.bound.write().unwrap_or_else(|e| e.into_inner()) = b;
    }

    /// Whether something is bound.
    pub fn is_bound(&self) -> bool {
        self.bound
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Whether a Rust closure is bound (rpjrt's own handlers, Python's included), which
    /// sees every buffer as row-major; native code reads layouts itself.
    pub fn serves_rust(&self) -> bool {
        matches!(
            *self.bound.read().unwrap_or_else(|e| e.into_inner()),
            Some(Bound::Rust(_))
        )
    }

    /// What the last metadata call reported, if one happened.
    pub fn metadata(&self) -> Option<MetaSeen> {
        *self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets any earlier metadata call (before registering).
    pub fn reset_metadata(&self) {
        *self.meta.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Registers this target's thunk for the instantiate and execute stages directly with
    /// the runtime's FFI table `xla_api` (learned from an earlier metadata call), which,
    /// unlike the PJRT extension, takes a bundle of stage handlers.
    pub fn register_bundle(&self, xla_api: RuntimeApi) -> Result<()> {
        let xla_api = xla_api.0;
        let reg = api_entry(
            xla_api,
            offset_of!(sys::XLA_FFI_Api, XLA_FFI_Handler_Register),
            |a| a.XLA_FFI_Handler_Register,
        )
        .ok_or_else(|| Error::invalid("the FFI runtime offers no XLA_FFI_Handler_Register"))?;
        // SAFETY: thunks have the handler signature and are never freed.
        let h = unsafe { native_handler(self.thunk) };
        let mut a = sys::XLA_FFI_Handler_Register_Args {
            struct_size: sys::XLA_FFI_Handler_Register_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            name: sys::XLA_FFI_ByteSpan {
                ptr: self.name.as_ptr().cast(),
                len: self.name.len(),
            },
            platform: sys::XLA_FFI_ByteSpan {
                ptr: self.platform.as_ptr().cast(),
                len: self.platform.len(),
            },
            bundle: sys::XLA_FFI_Handler_Bundle {
                instantiate: h,
                prepare: None,
                initialize: None,
                execute: h,
            },
            traits: 0,
        };
        // SAFETY: the runtime's own registration entry; the strings outlive the call.
        let err = unsafe { reg(&mut a) };
        if err.is_null() {
            self.instantiate_stage.store(true, Ordering::Release);
            return Ok(());
        }
        // SAFETY: `err` is an error the runtime just returned; read once, destroyed once.
        let msg = unsafe { take_ffi_error(xla_api, err) };
        Err(Error::Pjrt {
            entry: "XLA_FFI_Handler_Register",
            code: Code::Internal,
            message: msg,
        })
    }

    /// Registers this target's thunk with the plugin.
    pub fn register_with(&self, api: &Api, ext: &FfiExtension) -> Result<()> {
        // SAFETY: the thunk has the handler signature and lives forever (never freed).
        unsafe { ext.register_handler(api, &self.name, &self.platform, self.thunk) }
    }

    /// Whether the runtime runs this target's instantiate stage (it was registered with
    /// [`Target::register_bundle`]).
    pub fn has_instantiate_stage(&self) -> bool {
        self.instantiate_stage.load(Ordering::Acquire)
    }

    /// The runtime's FFI api table seen at the metadata call, if any.
    pub fn runtime_api(&self) -> RuntimeApi {
        RuntimeApi(self.api.load(Ordering::Acquire))
    }
}

/// The FFI api table of a plugin's runtime, as a metadata call saw it (possibly none).
/// Opaque: only this crate reads the table, and only this crate makes one, from a pointer
/// the runtime handed over, so a safe caller cannot pass an arbitrary address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeApi(*const sys::XLA_FFI_Api);

// SAFETY: the table is the runtime's immutable, never-freed function table; only its
// address moves between threads.
unsafe impl Send for RuntimeApi {}
// SAFETY: see `Send`; nothing is written through it.
unsafe impl Sync for RuntimeApi {}

impl RuntimeApi {
    /// Whether no runtime table has been seen.
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

/// A function slot of an FFI api table, when the table is long enough and the slot is set.
fn api_entry<F: Copy>(
    api: *const sys::XLA_FFI_Api,
    offset: usize,
    read: impl FnOnce(&sys::XLA_FFI_Api) -> Option<F>,
) -> Option<F> {
    if api.is_null() {
        return None;
    }
    // SAFETY: `api` is a runtime's live FFI table (learned from a metadata call or a
    // frame); its first field is its size, checked before the slot is read.
    let a = unsafe { &*api };
    if a.struct_size < offset + size_of::<usize>() {
        return None;
    }
    read(a)
}

/// The message of an FFI error, then destroys it.
///
/// # Safety
/// `err` must be a live error created by `api`'s runtime.
unsafe fn take_ffi_error(api: *const sys::XLA_FFI_Api, err: *mut sys::XLA_FFI_Error) -> String {
    let mut msg = String::from("(no message)");
    if let Some(get) = api_entry(
        api,
        offset_of!(sys::XLA_FFI_Api, XLA_FFI_Error_GetMessage),
        |a| a.XLA_FFI_Error_GetMessage,
    ) {
        let mut g = sys::XLA_FFI_Error_GetMessage_Args {
            struct_size: sys::XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            error: err,
            message: std::ptr::null(),
        };
        // SAFETY: live error per the contract.
        unsafe { get(&mut g) };
        if !g.message.is_null() {
            // SAFETY: a NUL-terminated message owned by the error, read before destroying it.
            msg = unsafe { std::ffi::CStr::from_ptr(g.message) }
                .to_string_lossy()
                .into_owned();
        }
    }
    if let Some(d) = api_entry(
        api,
        offset_of!(sys::XLA_FFI_Api, XLA_FFI_Error_Destroy),
        |a| a.XLA_FFI_Error_Destroy,
    ) {
        let mut a = sys::XLA_FFI_Error_Destroy_Args {
            struct_size: sys::XLA_FFI_Error_Destroy_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            error: err,
        };
        // SAFETY: destroyed once, here.
        unsafe { d(&mut a) };
    }
    msg
}

/// What rpjrt stores as per-instance state: a boxed `Box<dyn Any + Send + Sync>`.
type StateBox = Box<dyn Any + Send + Sync>;

/// Deleter the runtime calls for a per-instance state. The state's `Drop` is user code: a
/// panic in it is caught (the panic hook has printed it; what its fields did not free is
/// leaked), never unwinding into the runtime, which would abort the process.
unsafe extern "C" fn drop_state(p: *mut c_void) {
    if !p.is_null() {
        // SAFETY: only `Frame::set_state` stores states under rpjrt's type, always as
        // `Box::into_raw(Box<StateBox>)`; the runtime calls the deleter once.
        let state = unsafe { Box::from_raw(p.cast::<StateBox>()) };
        super::callback::guard(move || drop(state));
    }
}

static STATE_TYPES: Mutex<Vec<(usize, i64)>> = Mutex::new(Vec::new());

/// rpjrt's per-instance state type id in the runtime with FFI table `xla_api`.
pub fn state_type_id(xla_api: RuntimeApi) -> Result<i64> {
    let xla_api = xla_api.0;
    let mut g = STATE_TYPES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, id)) = g.iter().find(|(k, _)| *k == xla_api as usize) {
        return Ok(id);
    }
    let reg = api_entry(
        xla_api,
        offset_of!(sys::XLA_FFI_Api, XLA_FFI_Type_Register),
        |a| a.XLA_FFI_Type_Register,
    )
    .ok_or_else(|| Error::invalid("the FFI runtime offers no XLA_FFI_Type_Register"))?;
    let name = "rpjrt.ffi.InstanceState";
    let mut id = sys::XLA_FFI_TypeId { type_id: 0 };
    let info = sys::XLA_FFI_TypeInfo {
        struct_size: sys::XLA_FFI_TypeInfo_STRUCT_SIZE,
        extension_start: null_mut(),
        deleter: Some(drop_state),
    };
    let mut a = sys::XLA_FFI_Type_Register_Args {
        struct_size: sys::XLA_FFI_Type_Register_Args_STRUCT_SIZE,
        extension_start: null_mut(),
        name: sys::XLA_FFI_ByteSpan {
            ptr: name.as_ptr().cast(),
            len: name.len(),
        },
        type_id: &mut id,
        type_info: &info,
    };
    // SAFETY: the runtime's own entry; every pointer outlives the call.
    let err = unsafe { reg(&mut a) };
    if !err.is_null() {
        // SAFETY: an error the runtime just returned.
        let msg = unsafe { take_ffi_error(xla_api, err) };
        return Err(Error::Pjrt {
            entry: "XLA_FFI_Type_Register",
            code: Code::Internal,
            message: msg,
        });
    }
    g.push((xla_api as usize, id.type_id));
    Ok(id.type_id)
}

// ------------------------------------------------------------------------------ dispatch

/// Reads the runtime's version from an FFI api table.
///
/// # Safety
/// `api` must be null or point at a live `XLA_FFI_Api`.
unsafe fn api_version(api: *const sys::XLA_FFI_Api) -> Option<Version> {
    if api.is_null() {
        return None;
    }
    // SAFETY: per the contract; the version is the third field, present in every version.
    let v = unsafe { std::ptr::addr_of!((*api).api_version).read() };
    Some((v.major_version, v.minor_version))
}

/// The metadata struct a frame asks to be filled in, if this is a metadata call.
///
/// # Safety
/// `frame` must be a live call frame.
unsafe fn metadata_request(
    frame: *mut sys::XLA_FFI_CallFrame,
) -> Option<*mut sys::XLA_FFI_Metadata> {
    // SAFETY: live frame per the contract; `extension_start` is its second field.
    let mut cur = unsafe { (*frame).extension_start };
    let mut hops = 0;
    while !cur.is_null() && hops < 16 {
        // SAFETY: chain entries start with an XLA_FFI_Extension_Base.
        let base = unsafe { cur.read() };
        if base.r#type == sys::XLA_FFI_Extension_Metadata
            && base.struct_size >= sys::XLA_FFI_Metadata_Extension_STRUCT_SIZE
        {
            // SAFETY: the type tag and size say this is a metadata extension.
            let md = unsafe { (*cur.cast::<sys::XLA_FFI_Metadata_Extension>()).metadata };
            return (!md.is_null()).then_some(md);
        }
        cur = base.next;
        hops += 1;
    }
    None
}

/// Creates an FFI error through the runtime's api.
///
/// # Safety
/// `api` must be null or a live `XLA_FFI_Api`.
unsafe fn make_error(
    api: *const sys::XLA_FFI_Api,
    code: Code,
    message: &str,
) -> *mut sys::XLA_FFI_Error {
    if api.is_null() {
        // Nothing to create an error with; a null return would mean success, so there is
        // no honest answer. This cannot happen with a real runtime.
        return null_mut();
    }
    // SAFETY: live api per the contract; `struct_size` is its first field.
    let size = unsafe { (*api).struct_size };
    if size < offset_of!(sys::XLA_FFI_Api, XLA_FFI_Error_Create) + size_of::<usize>() {
        return null_mut();
    }
    // SAFETY: the slot is inside the runtime's table (checked above).
    let Some(create) = (unsafe { (*api).XLA_FFI_Error_Create }) else {
        return null_mut();
    };
    let msg = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let mut a = sys::XLA_FFI_Error_Create_Args {
        struct_size: sys::XLA_FFI_Error_Create_Args_STRUCT_SIZE,
        extension_start: null_mut(),
        message: msg.as_ptr(),
        errc: code_number(code),
    };
    // SAFETY: the runtime copies the message; `a` lives for the call.
    unsafe { create(&mut a) }
}

fn code_number(code: Code) -> sys::XLA_FFI_Error_Code {
    code.number() as sys::XLA_FFI_Error_Code
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// How deeply rpjrt's handlers may nest on one thread (a handler that executes a program
/// whose custom call runs on the same thread): each level holds one of the plugin's
/// executions in flight, which the CPU plugins bound at 32 per device, and an execute past
/// that bound waits for the enclosing ones, which wait for it.
pub const MAX_NESTED_HANDLERS: u32 = 16;

/// The words both refusals of runaway custom-call nesting carry (an execution started
/// from inside a handler, and a handler not run past [`MAX_NESTED_HANDLERS`] deep). The
/// refusals are `RESOURCE_EXHAUSTED` (a limit was reached, as a quota is), but no memory
/// ran out: [`is_nesting_refusal`] tells them apart from an allocation failure, so no
/// out-of-memory report is added to them. The words stay in the message of every handler
/// level the refusal passes up through.
pub const NESTING_LIMIT: &str = "rpjrt's custom-call nesting limit";

/// Whether an error message is (or carries, from a nested handler) rpjrt's refusal of
/// runaway custom-call nesting: a limit, not an allocation failure.
pub fn is_nesting_refusal(message: &str) -> bool {
    message.contains(NESTING_LIMIT)
}

/// The start of the messages of the last handler failures with code `RESOURCE_EXHAUSTED`
/// that are not memory running out (a handler's own quota or queue limit), newest last, at most
/// [`HANDLER_EXHAUSTED_KEPT`] of [`HANDLER_EXHAUSTED_BYTES`] bytes each.
static HANDLER_EXHAUSTED: std::sync::Mutex<std::collections::VecDeque<String>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
const HANDLER_EXHAUSTED_KEPT: usize = 64;
const HANDLER_EXHAUSTED_BYTES: usize = 160;

/// Remembers that a handler failed with `RESOURCE_EXHAUSTED` and `message` (see
/// [`is_handler_exhaustion`]).
fn note_handler_exhausted(message: &str) {
    let mut end = message.len().min(HANDLER_EXHAUSTED_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let head = message[..end].to_string();
    let mut kept = HANDLER_EXHAUSTED.lock().unwrap_or_else(|p| p.into_inner());
    if kept.iter().any(|k| *k == head) {
        return;
    }
    if kept.len() == HANDLER_EXHAUSTED_KEPT {
        kept.pop_front();
    }
    kept.push_back(head);
}

/// Whether an execution's `RESOURCE_EXHAUSTED` error carries the failure of one of rpjrt's
/// custom-call handlers that is a limit of its own (a quota, a full queue; a Python
/// handler's `MemoryError` is not one) rather than memory running out: no device memory report belongs to it. The runtime passes
/// a handler's message on inside its own, so the recent handler failures are looked for in
/// it.
pub fn is_handler_exhaustion(message: &str) -> bool {
    let kept = HANDLER_EXHAUSTED.lock().unwrap_or_else(|p| p.into_inner());
    kept.iter().any(|k| message.contains(k.as_str()))
}

/// rpjrt handlers running now, on every thread.
static ACTIVE_HANDLERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Counts one running handler for as long as it lives.
struct ActiveHandler;

impl ActiveHandler {
    fn enter() -> ActiveHandler {
        ACTIVE_HANDLERS.fetch_add(1, Ordering::AcqRel);
        ActiveHandler
    }
}

impl Drop for ActiveHandler {
    fn drop(&mut self) {
        ACTIVE_HANDLERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Refuses an execution started from inside a plugin callback (a custom-call handler
/// running a program) while [`MAX_NESTED_HANDLERS`] or more rpjrt handlers run in the
/// process. Each of them holds an execution in flight, waiting for it; the CPU plugins
/// bound the executions in flight (32 per device), and once every slot is held by one that
/// waits for a nested execution, nothing finishes. Refusing nested executions past half of
/// that bound leaves slots for the ones already running.
///
/// Also refuses, from a handler that runs on a plugin worker thread (its program was
/// dispatched asynchronously), an execution on a device of that handler's execution (see
/// [`worker_thread_refusal`]): the plugin runs a device's executions in order, so it would
/// wait behind the execution that waits for the handler, for ever.
///
/// `loaded` is the executable about to run and `device` the device a portable one runs on.
/// Outside callbacks it checks nothing (one thread-local read). Once a Rust handler has been
/// bound in the process, the returned mark records, until dropped, that this thread is
/// inside rpjrt's execute call: a handler the plugin then runs inline on this thread knows
/// it is not on a worker thread. The caller keeps it until the plugin's call returned.
pub(crate) fn check_nested_execute(
    loaded: &super::executable::Loaded,
    device: Option<super::device::DeviceRef>,
) -> Result<Option<LaunchMark>> {
    if !super::callback::in_callback() {
        return Ok(LaunchMark::enter());
    }
    let active = ACTIVE_HANDLERS.load(Ordering::Acquire);
    if active >= MAX_NESTED_HANDLERS {
        return Err(crate::error::Error::Pjrt {
            entry: "PJRT_LoadedExecutable_Execute",
            code: Code::ResourceExhausted,
            message: format!(
                "not started: it was called from inside a custom-call handler while {active} \
                 handlers run (nested, or on other threads), at {NESTING_LIMIT} of \
                 {MAX_NESTED_HANDLERS}: each holds an execution in flight, and a nested \
                 execution past the limit could wait for ever for the plugin's bound on \
                 executions in flight (32 on the CPU plugins)"
            ),
        });
    }
    if WORKER_HANDLERS.load(Ordering::Acquire) > 0 {
        let client = loaded.client();
        let plugin = extension(client.api()).map(|e| e.key());
        let devices = match device {
            Some(d) => vec![d],
            None => loaded.devices()?,
        };
        let ids = device_ids(client, &devices);
        if let Some((w, shown)) = blocked_worker(plugin, &ids) {
            return Err(worker_thread_refusal(&w, shown));
        }
    }
    Ok(LaunchMark::enter())
}

/// Set once a Rust closure (an rpjrt handler, Python's included) is bound to a target:
/// from then on rpjrt's execute calls mark their thread ([`LaunchMark`]).
static HANDLERS_BOUND: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// rpjrt handlers of the execute stage running now on plugin worker threads (not inline
/// inside an rpjrt execute call on their thread), on every thread.
static WORKER_HANDLERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// How long a wait from a worker-thread handler for a buffer of its own device is polled
/// before it is refused ([`check_worker_wait`]): a host transfer finishes within it (a
/// gigabyte, at memory speed), an execution queued behind the handler's never does.
const WORKER_WAIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    /// rpjrt execute calls in progress on this thread (counted once a handler is bound).
    static LAUNCHING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// The rpjrt handlers running on this thread, outermost first.
    static HANDLER_FRAMES: std::cell::RefCell<Vec<HandlerMark>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// Calls of targets rpjrt dispatches that failed on this thread, ever.
    static HANDLER_FAILURES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many calls of targets that rpjrt dispatches (a handler, native or Rust, an
/// instantiate function, a target whose handler was removed) failed on this thread so
/// far. A plugin call during which it grows failed (at least partly) because of a
/// handler, which is the registrant's code or registration, not the program's or the
/// plugin's: a compile cache keeps an entry whose load failed that way.
pub fn handler_failures() -> u64 {
    HANDLER_FAILURES.with(|c| c.get())
}

/// A handler running on a plugin worker thread, for an execution on device `ordinal`
/// (`None` where the runtime does not say) of the plugin `plugin`.
#[derive(Clone, Copy)]
struct WorkerHandler {
    plugin: usize,
    ordinal: Option<i32>,
    target: &'static str,
}

/// One rpjrt handler on this thread's stack: how many execute calls were in progress on
/// the thread when it started, and whether it runs on a worker thread.
struct HandlerMark {
    launches: u32,
    worker: Option<WorkerHandler>,
}

/// Records that this thread is inside an rpjrt execute call, until dropped.
pub(crate) struct LaunchMark(());

impl LaunchMark {
    /// A mark, once a Rust handler was ever bound (before, no handler can run inline).
    fn enter() -> Option<LaunchMark> {
        if !HANDLERS_BOUND.load(Ordering::Relaxed) {
            return None;
        }
        LAUNCHING.with(|c| c.set(c.get().saturating_add(1)));
        Some(LaunchMark(()))
    }
}

impl Drop for LaunchMark {
    fn drop(&mut self) {
        LAUNCHING.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// One handler on this thread's stack, popped on drop.
struct HandlerOnStack {
    worker: bool,
}

impl HandlerOnStack {
    /// Pushes the handler of `frame`. It runs inline when an rpjrt execute call started on
    /// this thread since the enclosing handler started (or, for the outermost one, at all);
    /// otherwise the plugin runs it on one of its own threads. Only the execute stage counts
    /// as a worker: the instantiate stage runs at compile or load, outside any execution.
    fn enter(frame: &Frame<'_>) -> HandlerOnStack {
        let launches = LAUNCHING.with(|c| c.get());
        let enclosing = HANDLER_FRAMES.with(|f| f.borrow().last().map(|m| m.launches));
        let inline = launches > enclosing.unwrap_or(0);
        let worker = (!inline && frame.stage() == sys::XLA_FFI_ExecutionStage_EXECUTE).then(|| {
            WorkerHandler {
                plugin: frame.target.plugin,
                ordinal: frame.device_ordinal(),
                target: &frame.target.name,
            }
        });
        if worker.is_some() {
            WORKER_HANDLERS.fetch_add(1, Ordering::AcqRel);
        }
        HANDLER_FRAMES.with(|f| f.borrow_mut().push(HandlerMark { launches, worker }));
        HandlerOnStack {
            worker: worker.is_some(),
        }
    }
}

impl Drop for HandlerOnStack {
    fn drop(&mut self) {
        HANDLER_FRAMES.with(|f| f.borrow_mut().pop());
        if self.worker {
            WORKER_HANDLERS.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The ids a device may go by in a handler's device ordinal: its id and its local hardware
/// id (the CPU plugins give the id, GPU plugins the local ordinal); `None` when unknown.
fn device_ids(
    client: &super::client::Client,
    devices: &[super::device::DeviceRef],
) -> Vec<(Option<i32>, Option<i32>)> {
    devices
        .iter()
        .map(|d| match d.facts(client) {
            Ok(f) => (
                Some(f.id),
                (f.local_hardware_id >= 0).then_some(f.local_hardware_id),
            ),
            Err(_) => (None, None),
        })
        .collect()
}

/// The innermost worker-thread handler on this thread whose execution is on one of
/// `devices` (as [`device_ids`] gives them) of the plugin `plugin`, and the device id to
/// name. A handler whose device is unknown, or a device whose ids are unknown, matches.
fn blocked_worker(
    plugin: Option<usize>,
    devices: &[(Option<i32>, Option<i32>)],
) -> Option<(WorkerHandler, Option<i32>)> {
    let workers: Vec<WorkerHandler> =
        HANDLER_FRAMES.with(|f| f.borrow().iter().rev().filter_map(|m| m.worker).collect());
    for w in workers {
        if plugin.is_some_and(|p| p != w.plugin) {
            continue;
        }
        for &(id, hw) in devices {
            let same = match (w.ordinal, id, hw) {
                (None, ..) | (_, None, None) => true,
                (Some(o), id, hw) => id == Some(o) || hw == Some(o),
            };
            if same {
                return Some((w, id.or(w.ordinal)));
            }
        }
    }
    None
}

fn device_words(w: &WorkerHandler, device: Option<i32>) -> String {
    match (device, w.ordinal) {
        (Some(d), _) => format!("device {d}"),
        (None, Some(o)) => format!("device {o}"),
        (None, None) => "a device the runtime does not name (so every device of the plugin \
                         counts)"
            .to_string(),
    }
}

/// The refusal of an execution on `device` from the worker-thread handler `w`.
fn worker_thread_refusal(w: &WorkerHandler, device: Option<i32>) -> Error {
    let on = device_words(w, device);
    Error::Pjrt {
        entry: "PJRT_LoadedExecutable_Execute",
        code: Code::FailedPrecondition,
        message: format!(
            "not started: it was called from the custom-call handler for {:?}, which runs on a \
             plugin worker thread for an execution on {on} (the plugin dispatched that program \
             asynchronously), and this execution would run on {on} too. The plugin runs a \
             device's executions in order, so this one would wait behind the execution that \
             waits for this handler, for ever. From such a handler, execute on another device, \
             or execute only from handlers of programs the plugin runs inline on the calling \
             thread; rpjrt cannot tell a plugin's clients apart inside a handler, so this \
             holds for that device of every client of the plugin",
            w.target
        ),
    }
}

/// Whether a handler is running on a plugin worker thread anywhere in the process (one
/// atomic load): only then can a wait be one that rpjrt refuses.
#[inline]
pub fn worker_handlers_running() -> bool {
    WORKER_HANDLERS.load(Ordering::Relaxed) > 0
}

/// For an event that completes when a buffer of `client` is ready (a buffer's ready
/// event; `devices` are the buffer's [`Buffer::wait_devices`](super::buffer::Buffer::wait_devices)):
/// refuses the wait from a handler on a plugin worker thread whose own execution runs on
/// one of `devices` while the event is pending, as a wait for the buffer itself is refused.
/// One atomic load while no such handler runs anywhere.
pub fn refuse_event_wait_in_worker_handler(
    client: &super::client::Client,
    devices: &[super::device::DeviceRef],
    ready: impl FnMut() -> bool,
) -> Result<WorkerWait> {
    if !worker_handlers_running() || devices.is_empty() {
        return Ok(WorkerWait::none());
    }
    check_worker_wait(client, || devices.to_vec(), ready)
}

/// Refuses a wait, from a handler on a plugin worker thread, for a buffer of `client` that
/// is not ready (`ready` polls it) when the handler's execution runs on a device whose
/// queue produces it (`devices`: the buffer's own, and for a copy its sources'): the
/// buffer's producer runs after that execution, which waits for the handler, so the wait
/// would never end. Polls for a short grace first, which a host transfer finishes within.
/// Checks nothing when this thread runs no worker-thread handler.
pub(crate) fn check_worker_wait(
    client: &super::client::Client,
    devices: impl FnOnce() -> Vec<super::device::DeviceRef>,
    mut ready: impl FnMut() -> bool,
) -> Result<WorkerWait> {
    let innermost = HANDLER_FRAMES.with(|f| f.borrow().iter().rev().find_map(|m| m.worker));
    let Some(me) = innermost else {
        return Ok(WorkerWait::none());
    };
    let plugin = extension(client.api()).map(|e| e.key());
    let devices = devices();
    if devices.is_empty() {
        return Ok(WorkerWait::none());
    }
    let ids = device_ids(client, &devices);
    if let Some((w, shown)) = blocked_worker(plugin, &ids) {
        if super::event::spin_for(WORKER_WAIT_GRACE, &mut ready) {
            return Ok(WorkerWait::none());
        }
        let on = device_words(&w, shown);
        return Err(Error::Pjrt {
            entry: "PJRT_Event_Await",
            code: Code::FailedPrecondition,
            message: format!(
                "not waited for: the custom-call handler for {:?} runs on a plugin worker \
                 thread for an execution on {on} (the plugin dispatched that program \
                 asynchronously), and it waited for a buffer on {on} (or a copy of one) that \
                 is not ready. Its producer runs after the execution that waits for this \
                 handler (a program launched later on that device, or the running program \
                 itself: an output of the Session step that runs the handler), so the wait \
                 would never end. Read such a buffer after the execution completes; from the \
                 handler, read only buffers that are ready (its own arguments, the inputs of \
                 the step) or buffers on another device",
                w.target
            ),
        });
    }
    // A wait on another device's queue: fine unless a handler of that device is itself
    // waiting, directly or through others, for this handler's device.
    let (Some(plugin), Some(mine)) = (plugin, me.ordinal) else {
        return Ok(WorkerWait::none());
    };
    if ready() {
        return Ok(WorkerWait::none());
    }
    let edge = WaitEdge {
        id: NEXT_WAIT_EDGE.fetch_add(1, Ordering::Relaxed),
        plugin,
        from: mine,
        to: ids,
    };
    let cycle = {
        let mut graph = WORKER_WAITS.lock().unwrap_or_else(|p| p.into_inner());
        let cycle = waits_for(&graph, &edge);
        if cycle.is_none() {
            graph.push(edge.clone());
        }
        cycle
    };
    let Some(other) = cycle else {
        return Ok(WorkerWait(Some(edge.id)));
    };
    if super::event::spin_for(WORKER_WAIT_GRACE, &mut ready) {
        return Ok(WorkerWait::none());
    }
    Err(Error::Pjrt {
        entry: "PJRT_Event_Await",
        code: Code::FailedPrecondition,
        message: format!(
            "not waited for: the custom-call handler for {:?} runs on a plugin worker thread \
             for an execution on device {mine} and waited for a buffer produced on device \
             {other}, whose own running execution has a handler that waits (directly or \
             through other devices) for device {mine}: each device's queue waits for the \
             other's, so neither wait would ever end. Executing on another device from such \
             a handler works while that device's handlers do not wait back; break the \
             cycle (read results after the executions complete, or run these programs \
             inline)",
            me.target
        ),
    })
}

/// A handler on a plugin worker thread waiting for a buffer produced on other devices'
/// queues: the handler's device waits for those devices meanwhile.
#[derive(Clone)]
struct WaitEdge {
    id: u64,
    plugin: usize,
    from: i32,
    to: Vec<(Option<i32>, Option<i32>)>,
}

/// The waits of worker-thread handlers in progress, process-wide (a handful at most).
static WORKER_WAITS: std::sync::Mutex<Vec<WaitEdge>> = std::sync::Mutex::new(Vec::new());
static NEXT_WAIT_EDGE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether a device id pair (as [`device_ids`] gives it) names the device `ordinal`.
fn names(ordinal: i32, (id, hw): (Option<i32>, Option<i32>)) -> bool {
    id == Some(ordinal) || hw == Some(ordinal)
}

/// The device (as named in `edge.to`) through which the wait `edge` would close a cycle of
/// waits in `graph`: a device `edge` waits for has a waiting handler that waits, directly or
/// through others, for `edge.from`.
fn waits_for(graph: &[WaitEdge], edge: &WaitEdge) -> Option<i32> {
    let shown = |t: (Option<i32>, Option<i32>)| t.0.or(t.1).unwrap_or(-1);
    for &start in &edge.to {
        let mut frontier = vec![start];
        let mut seen: Vec<u64> = Vec::new();
        while let Some(t) = frontier.pop() {
            for e in graph
                .iter()
                .filter(|e| e.plugin == edge.plugin && names(e.from, t))
            {
                if seen.contains(&e.id) {
                    continue;
                }
                seen.push(e.id);
                if e.to.iter().any(|&u| names(edge.from, u)) {
                    return Some(shown(start));
                }
                frontier.extend(e.to.iter().copied());
            }
        }
    }
    None
}

/// A wait the worker-handler checks let through; while it lives, the waiting handler's device is
/// recorded as waiting for the buffer's (so that a wait back is refused). Drop it after the
/// wait.
#[must_use = "the wait is recorded only while this lives: keep it until the wait ends"]
pub struct WorkerWait(Option<u64>);

impl WorkerWait {
    /// A wait that records nothing.
    pub fn none() -> WorkerWait {
        WorkerWait(None)
    }
}

impl Drop for WorkerWait {
    fn drop(&mut self) {
        if let Some(id) = self.0 {
            let mut graph = WORKER_WAITS.lock().unwrap_or_else(|p| p.into_inner());
            graph.retain(|e| e.id != id);
        }
    }
}

/// The one function every thunk jumps to, with the thunk's slot as second argument.
///
/// # Safety
/// Called only by thunks: `frame` is the runtime's call frame, `slot` a thunk slot holding a
/// leaked [`Target`].
unsafe extern "C" fn dispatch(
    frame: *mut sys::XLA_FFI_CallFrame,
    slot: *const AtomicPtr<Target>,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: thunks pass the address of their slot, which is leaked and set before the
    // thunk is handed out.
    let target = unsafe { (*slot).load(Ordering::Acquire) };
    if frame.is_null() || target.is_null() {
        return null_mut();
    }
    // SAFETY: targets are leaked, so the reference is valid forever.
    let target: &'static Target = unsafe { &*target };
    // SAFETY: `frame` is the runtime's live call frame.
    let api = unsafe { (*frame).api };
    // The runtime may wait for this call: handles dropped inside it are destroyed elsewhere.
    let _inside = super::callback::Inside::enter();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: live frame, for the duration of this call.
        unsafe { dispatch_inner(frame, api, target) }
    }));
    if !matches!(result, Ok(Ok(err)) if err.is_null()) {
        HANDLER_FAILURES.with(|c| c.set(c.get().wrapping_add(1)));
    }
    match result {
        Ok(Ok(err)) => err,
        Ok(Err((code, msg))) => {
            // A Python handler's MemoryError is the process running out of memory, which
            // the out-of-memory report is about; anything else is the handler's own limit.
            if code == Code::ResourceExhausted && !msg.contains(" raised MemoryError") {
                note_handler_exhausted(&msg);
            }
            // SAFETY: `api` is the runtime's live api.
            unsafe { make_error(api, code, &msg) }
        }
        Err(p) => {
            let msg = format!(
                "FFI handler {:?} panicked: {}",
                target.name,
                panic_message(p.as_ref())
            );
            // The payload's `Drop` is user code too (`panic_any` of a value whose drop
            // panics): it must not unwind into the runtime either.
            super::callback::drop_payload(p);
            // SAFETY: as above.
            unsafe { make_error(api, Code::Internal, &msg) }
        }
    }
}

/// # Safety
/// `frame` is the runtime's live call frame and `api` its api pointer.
unsafe fn dispatch_inner(
    frame: *mut sys::XLA_FFI_CallFrame,
    api: *const sys::XLA_FFI_Api,
    target: &'static Target,
) -> std::result::Result<*mut sys::XLA_FFI_Error, (Code, String)> {
    let bound = target
        .bound
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    // SAFETY: live frame per the contract.
    if let Some(md) = unsafe { metadata_request(frame) } {
        // SAFETY: `api` is null or the runtime's api.
        let runtime = unsafe { api_version(api) }.unwrap_or((0, 0));
        target.api.store(api.cast_mut(), Ordering::Release);
        let reported = match bound {
            Some(Bound::Native(NativeHandler(h))) => {
                // SAFETY: forwarding the runtime's metadata frame to native handler code the
                // registrant vouched for; it fills in its own version.
                let err = unsafe { h(frame) };
                if !err.is_null() {
                    return Ok(err);
                }
                // SAFETY: `md` is the runtime's metadata struct, live for the call.
                let v = unsafe { (*md).api_version };
                (v.major_version, v.minor_version)
            }
            _ => {
                let ours = OUR_FFI_VERSION.min(runtime);
                // SAFETY: `md` is the runtime's metadata struct; we write only the version
                // fields, which every version has.
                unsafe {
                    (*md).api_version.major_version = ours.0;
                    (*md).api_version.minor_version = ours.1;
                }
                ours
            }
        };
        *target.meta.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(MetaSeen { runtime, reported });
        return Ok(null_mut());
    }
    match bound {
        // SAFETY: forwarding the live frame to native handler code the registrant vouched for.
        Some(Bound::Native(NativeHandler(h))) => Ok(unsafe { h(frame) }),
        Some(Bound::Rust(cb)) => {
            let depth = super::callback::depth();
            if depth > MAX_NESTED_HANDLERS {
                return Err((
                    Code::ResourceExhausted,
                    format!(
                        "the FFI handler for {:?} was not run: it would be nested {depth} deep \
                         on this thread (a handler ran a program whose custom call ran a \
                         handler, and so on), past {NESTING_LIMIT} of {MAX_NESTED_HANDLERS}; \
                         deeper nesting would wait for the plugin's bound on executions in \
                         flight (32 on the CPU plugins) and never return",
                        target.name
                    ),
                ));
            }
            // SAFETY: live frame; checked for size before any field past the header is read.
            let size = unsafe { (*frame).struct_size };
            if size < sys::XLA_FFI_CallFrame_STRUCT_SIZE {
                return Err((
                    Code::Internal,
                    format!("call frame of {size} bytes is smaller than rpjrt's layout"),
                ));
            }
            let f = Frame {
                ptr: frame,
                api,
                target,
                _life: std::marker::PhantomData,
            };
            let _active = ActiveHandler::enter();
            let _stack = HandlerOnStack::enter(&f);
            cb(&f).map(|()| null_mut())
        }
        None => Err((
            Code::FailedPrecondition,
            format!(
                "the FFI handler for {:?} was removed; register one again to run this program",
                target.name
            ),
        )),
    }
}

// --------------------------------------------------------------------------- frame view

/// A safe view of one live call frame; exists only inside a handler call.
pub struct Frame<'a> {
    ptr: *mut sys::XLA_FFI_CallFrame,
    api: *const sys::XLA_FFI_Api,
    target: &'static Target,
    _life: std::marker::PhantomData<&'a ()>,
}

/// One buffer argument or result as the frame gives it.
#[derive(Clone, Copy)]
pub struct RawBuffer<'a> {
    /// XLA FFI data type code.
    pub dtype: i32,
    /// Data address.
    pub data: usize,
    /// Dimensions.
    pub dims: &'a [i64],
}

impl<'a> Frame<'a> {
    fn frame(&self) -> &sys::XLA_FFI_CallFrame {
        // SAFETY: the frame is live while this view exists (only made inside `dispatch`).
        unsafe { &*self.ptr }
    }

    /// The target name.
    pub fn target_name(&self) -> &str {
        &self.target.name
    }

    /// The stage code.
    pub fn stage(&self) -> i32 {
        self.frame().stage
    }

    /// The runtime's FFI version.
    pub fn runtime_version(&self) -> Version {
        // SAFETY: `api` is the runtime's live api.
        unsafe { api_version(self.api) }.unwrap_or((0, 0))
    }

    fn buffers(
        &self,
        size: i64,
        types: *mut i32,
        ptrs: *mut *mut c_void,
        what: &str,
    ) -> std::result::Result<Vec<RawBuffer<'a>>, (Code, String)> {
        let n = usize::try_from(size).unwrap_or(0);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: the runtime gives `size` entries in both arrays.
            let (ty, p) = unsafe { (*types.add(i), *ptrs.add(i)) };
            if ty != sys::XLA_FFI_ArgType_BUFFER || p.is_null() {
                return Err((
                    Code::Unimplemented,
                    format!("{what} {i} is of FFI kind {ty}, and rpjrt handles buffers only"),
                ));
            }
            // SAFETY: a BUFFER entry points at an XLA_FFI_Buffer, live for the call.
            let b = unsafe { &*p.cast::<sys::XLA_FFI_Buffer>() };
            let rank = usize::try_from(b.rank).unwrap_or(0);
            let dims: &'a [i64] = if rank == 0 || b.dims.is_null() {
                &[]
            } else {
                // SAFETY: `rank` dims, live for the call.
                unsafe { std::slice::from_raw_parts(b.dims, rank) }
            };
            out.push(RawBuffer {
                dtype: b.dtype,
                data: b.data as usize,
                dims,
            });
        }
        Ok(out)
    }

    /// The buffer arguments.
    pub fn args(&self) -> std::result::Result<Vec<RawBuffer<'a>>, (Code, String)> {
        let a = self.frame().args;
        self.buffers(a.size, a.types, a.args, "argument")
    }

    /// The buffer results.
    pub fn rets(&self) -> std::result::Result<Vec<RawBuffer<'a>>, (Code, String)> {
        let r = self.frame().rets;
        self.buffers(r.size, r.types, r.rets, "result")
    }

    /// How the call's buffers share memory: for each argument, the result whose memory it
    /// is (`output_operand_aliases`: the argument is then read through that result, so that
    /// no shared slice covers bytes a mutable one does); `None` for the others, and for every
    /// argument off the host. Refused, naming target, results and operand: two results that
    /// share memory (a handler cannot give them different values, and two mutable slices
    /// would cover the same bytes), two arguments that are both one result's memory (one
    /// result aliased to two operands: the first operand's values are lost), and an argument
    /// that overlaps results without being exactly one result's memory. Sorts the results once: `O(n log n)` in the buffers.
    pub fn shared_memory(
        &self,
        args: &[RawBuffer<'a>],
        rets: &[RawBuffer<'a>],
    ) -> std::result::Result<Vec<Option<usize>>, (Code, String)> {
        let span = |b: &RawBuffer<'a>| {
            ffi_dense_bytes(b.dtype, b.dims)
                .filter(|&n| n > 0 && b.data != 0)
                .map(|n| (b.data, b.data.saturating_add(n)))
        };
        let mut spans: Vec<(usize, usize, usize)> = rets
            .iter()
            .enumerate()
            .filter_map(|(j, r)| span(r).map(|(lo, hi)| (lo, hi, j)))
            .collect();
        spans.sort_unstable();
        let target = &self.target.name;
        // Sorted by start, any two overlapping results include two adjacent ones.
        for w in spans.windows(2) {
            let ((lo, hi, a), (lo2, hi2, b)) = (w[0], w[1]);
            if lo2 < hi {
                let (a, b, hi) = (a.min(b), a.max(b), hi.max(hi2));
                let why = match args
                    .iter()
                    .position(|x| span(x).is_some_and(|(xlo, xhi)| xlo < hi && lo < xhi))
                {
                    Some(k) => format!(
                        "results {a} and {b} both alias operand {k} (output_operand_aliases)"
                    ),
                    None => format!("results {a} and {b} share memory"),
                };
                return Err((
                    Code::InvalidArgument,
                    format!(
                        "the custom call to {target:?} was refused: {why}, so the runtime \
                         gives them one memory, and no handler could give them different \
                         values; alias each operand to one result at most"
                    ),
                ));
            }
        }
        let mut out = Vec::with_capacity(args.len());
        // The operand already found to be each result's memory: a second one means one
        // result aliases two operands (or two tuple elements), and XLA copies both into
        // that one memory, the last over the first (copy insertion gives an operand passed
        // twice with one alias a memory of its own, so that form never meets here).
        let mut owner: Vec<Option<usize>> = vec![None; rets.len()];
        for (k, a) in args.iter().enumerate() {
            // The result whose memory this argument overlaps, if any (results are disjoint
            // now: the first one ending past the argument's start is the only candidate).
            let hit = span(a).and_then(|(lo, hi)| {
                let first = spans.partition_point(|s| s.1 <= lo);
                spans.get(first).filter(|s| s.0 < hi).map(|s| (s, (lo, hi)))
            });
            match hit {
                None => out.push(None),
                Some((&(rlo, rhi, j), arg)) if (rlo, rhi) == arg => {
                    if let Some(first) = owner.get_mut(j).and_then(|o| o.replace(k)) {
                        return Err((
                            Code::InvalidArgument,
                            format!(
                                "the custom call to {target:?} was refused: result {j} aliases \
                                 both operand {first} and operand {k} (output_operand_aliases \
                                 names one output for two operands or tuple elements), so the \
                                 runtime copies both into one memory and the handler would see \
                                 operand {k}'s values for operand {first}; alias each result \
                                 to one operand at most"
                            ),
                        ));
                    }
                    out.push(self.target.host_memory.then_some(j))
                }
                Some((&(_, _, j), _)) => {
                    return Err((
                        Code::InvalidArgument,
                        format!(
                            "the custom call to {target:?} was refused: operand {k} overlaps \
                             result {j} without being its memory, and the handler would get \
                             overlapping views of one memory"
                        ),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The attributes, copied out of the frame in order (the safe layer types them).
    pub fn attrs(&self) -> std::result::Result<Vec<(String, RawAttr)>, (Code, String)> {
        let a = self.frame().attrs;
        // SAFETY: the runtime's attribute table for this call.
        unsafe { decode_attrs(&a, 0) }
    }

    /// The bytes of a buffer's data when it is in host memory.
    ///
    /// Safe because the frame's buffers are valid for the call and host-addressable when
    /// the target's platform is the host; the length comes from dtype and dims.
    pub fn host_bytes(&self, b: &RawBuffer<'a>) -> Option<&'a [u8]> {
        let n = self.byte_len(b)?;
        if n == 0 {
            return Some(&[]);
        }
        // SAFETY: see above; `n` bytes of the runtime's buffer, live for the call.
        Some(unsafe { std::slice::from_raw_parts(b.data as *const u8, n) })
    }

    /// Mutable bytes of a result buffer in host memory.
    pub fn host_bytes_mut(&self, b: &RawBuffer<'a>) -> Option<&'a mut [u8]> {
        let n = self.byte_len(b)?;
        if n == 0 {
            return Some(&mut []);
        }
        // SAFETY: result buffers are written by the handler; valid and host-addressable as
        // in `host_bytes`. Each result is handed out once by the core view, which first
        // refuses a call whose results share memory (`shared_memory`).
        Some(unsafe { std::slice::from_raw_parts_mut(b.data as *mut u8, n) })
    }

    fn byte_len(&self, b: &RawBuffer<'a>) -> Option<usize> {
        if !self.target.host_memory {
            return None;
        }
        let n = ffi_dense_bytes(b.dtype, b.dims)?;
        // A zero-size buffer is host memory of no bytes: some runtimes (PJRT 0.81) give
        // it a null address, which must not read as "not host memory".
        if b.data == 0 && n != 0 {
            return None;
        }
        Some(n)
    }

    /// `XLA_FFI_Stream_Get`: the platform stream (0 where there is none).
    pub fn stream(&self) -> usize {
        let Some(get) = self.api_fn(offset_of!(sys::XLA_FFI_Api, XLA_FFI_Stream_Get), |a| {
            a.XLA_FFI_Stream_Get
        }) else {
            return 0;
        };
        let mut a = sys::XLA_FFI_Stream_Get_Args {
            struct_size: sys::XLA_FFI_Stream_Get_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            ctx: self.frame().ctx,
            stream: null_mut(),
        };
        // SAFETY: live context of this call.
        let err = unsafe { get(&mut a) };
        if !err.is_null() {
            self.drop_error(err);
            return 0;
        }
        a.stream as usize
    }

    /// `XLA_FFI_ExecutionContext_Get`: user data of this type id, if the execute call
    /// attached any. `None` at the instantiate stage: there is no execution then, and XLA's
    /// runtime dereferences the absent execution context (a crash) if asked.
    pub fn user_data(&self, type_id: i64) -> Option<usize> {
        if self.stage() == sys::XLA_FFI_ExecutionStage_INSTANTIATE {
            return None;
        }
        let get = self.api_fn(
            offset_of!(sys::XLA_FFI_Api, XLA_FFI_ExecutionContext_Get),
            |a| a.XLA_FFI_ExecutionContext_Get,
        )?;
        let mut id = sys::XLA_FFI_TypeId { type_id };
        let mut a = sys::XLA_FFI_ExecutionContext_Get_Args {
            struct_size: sys::XLA_FFI_ExecutionContext_Get_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            ctx: self.frame().ctx,
            type_id: &mut id,
            data: null_mut(),
        };
        // SAFETY: live context; `id` outlives the call.
        let err = unsafe { get(&mut a) };
        if !err.is_null() {
            self.drop_error(err);
            return None;
        }
        (!a.data.is_null()).then_some(a.data as usize)
    }

    /// Stores `state` as this instance's state (called at the instantiate stage); the
    /// runtime owns it from then on and frees it through rpjrt's deleter.
    pub fn set_state(
        &self,
        type_id: i64,
        state: StateBox,
    ) -> std::result::Result<(), (Code, String)> {
        let set = self
            .api_fn(offset_of!(sys::XLA_FFI_Api, XLA_FFI_State_Set), |a| {
                a.XLA_FFI_State_Set
            })
            .ok_or((
                Code::Unimplemented,
                "the FFI runtime offers no State_Set".to_string(),
            ))?;
        let raw = Box::into_raw(Box::new(state));
        let mut id = sys::XLA_FFI_TypeId { type_id };
        let mut a = sys::XLA_FFI_State_Set_Args {
            struct_size: sys::XLA_FFI_State_Set_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            ctx: self.frame().ctx,
            stage: sys::XLA_FFI_ExecutionStage_INSTANTIATE,
            type_id: &mut id,
            state: raw.cast(),
        };
        // SAFETY: live context of this call; `id` outlives the call.
        let err = unsafe { set(&mut a) };
        if err.is_null() {
            return Ok(());
        }
        // SAFETY: the runtime refused the state, so it is still ours to free.
        drop(unsafe { Box::from_raw(raw) });
        // SAFETY: an error the runtime just returned.
        let msg = unsafe { take_ffi_error(self.api, err) };
        Err((Code::Internal, format!("XLA_FFI_State_Set failed: {msg}")))
    }

    /// This instance's state, set at the instantiate stage.
    pub fn state(&self, type_id: i64) -> Option<&'a (dyn Any + Send + Sync)> {
        let get = self.api_fn(offset_of!(sys::XLA_FFI_Api, XLA_FFI_State_Get), |a| {
            a.XLA_FFI_State_Get
        })?;
        let mut id = sys::XLA_FFI_TypeId { type_id };
        let mut a = sys::XLA_FFI_State_Get_Args {
            struct_size: sys::XLA_FFI_State_Get_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            ctx: self.frame().ctx,
            stage: sys::XLA_FFI_ExecutionStage_INSTANTIATE,
            type_id: &mut id,
            state: null_mut(),
        };
        // SAFETY: live context; `id` outlives the call.
        let err = unsafe { get(&mut a) };
        if !err.is_null() {
            self.drop_error(err);
            return None;
        }
        if a.state.is_null() {
            return None;
        }
        // SAFETY: states under rpjrt's type are `Box<StateBox>` set by `set_state`, owned by
        // the runtime for the life of the instance, which outlives this call.
        let b = unsafe { &*(a.state as *const StateBox) };
        Some(&**b)
    }

    /// The rpjrt user data attached under rpjrt's own type id.
    pub fn user_data_any(&self, type_id: i64) -> Option<&'a (dyn Any + Send + Sync)> {
        let p = self.user_data(type_id)?;
        // SAFETY: only rpjrt's `ExecuteContext::set_user_data` stores data under rpjrt's type
        // id, always as the address of a boxed `Arc<dyn Any + Send + Sync>` that the context
        // keeps alive until the execution's outputs are ready.
        let arc = unsafe { &*(p as *const Arc<dyn Any + Send + Sync>) };
        Some(&**arc)
    }

    /// `XLA_FFI_DeviceOrdinal_Get`: the device this call runs on, where the runtime says
    /// (`None` at the instantiate stage, which runs at compile, outside any execution).
    pub fn device_ordinal(&self) -> Option<i32> {
        if self.stage() == sys::XLA_FFI_ExecutionStage_INSTANTIATE {
            return None;
        }
        let get = self.api_fn(
            offset_of!(sys::XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get),
            |a| a.XLA_FFI_DeviceOrdinal_Get,
        )?;
        let mut a = sys::XLA_FFI_DeviceOrdinal_Get_Args {
            struct_size: sys::XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            ctx: self.frame().ctx,
            device_ordinal: -1,
        };
        // SAFETY: live context of this call.
        let err = unsafe { get(&mut a) };
        if !err.is_null() {
            self.drop_error(err);
            return None;
        }
        // A negative ordinal is the runtime's "no device".
        (a.device_ordinal >= 0).then_some(a.device_ordinal)
    }

    /// `XLA_FFI_RunId_Get`: the id of this execution, where the runtime says (`None` at the
    /// instantiate stage: there is no execution then, and the runtime answers 0).
    pub fn run_id(&self) -> Option<i64> {
        if self.stage() == sys::XLA_FFI_ExecutionStage_INSTANTIATE {
            return None;
        }
        let get = self.api_fn(offset_of!(sys::XLA_FFI_Api, XLA_FFI_RunId_Get), |a| {
            a.XLA_FFI_RunId_Get
        })?;
        let mut a = sys::XLA_FFI_RunId_Get_Args {
            struct_size: sys::XLA_FFI_RunId_Get_Args_STRUCT_SIZE,
            extension_start: null_mut(),
            ctx: self.frame().ctx,
            run_id: 0,
        };
        // SAFETY: live context of this call.
        let err = unsafe { get(&mut a) };
        if !err.is_null() {
            self.drop_error(err);
            return None;
        }
        Some(a.run_id)
    }

    /// The execution context address (for native code that wants it).
    pub fn context_address(&self) -> usize {
        self.frame().ctx as usize
    }

    fn api_fn<F: Copy>(
        &self,
        offset: usize,
        read: impl FnOnce(&sys::XLA_FFI_Api) -> Option<F>,
    ) -> Option<F> {
        if self.api.is_null() {
            return None;
        }
        // SAFETY: live api; read only after checking the slot is inside its struct.
        let api = unsafe { &*self.api };
        if api.struct_size < offset + size_of::<usize>() {
            return None;
        }
        read(api)
    }

    fn drop_error(&self, err: *mut sys::XLA_FFI_Error) {
        if let Some(d) = self.api_fn(offset_of!(sys::XLA_FFI_Api, XLA_FFI_Error_Destroy), |a| {
            a.XLA_FFI_Error_Destroy
        }) {
            let mut a = sys::XLA_FFI_Error_Destroy_Args {
                struct_size: sys::XLA_FFI_Error_Destroy_Args_STRUCT_SIZE,
                extension_start: null_mut(),
                error: err,
            };
            // SAFETY: an error the runtime just gave us, destroyed once.
            unsafe { d(&mut a) };
        }
    }
}

/// One attribute as the frame gives it, copied out: scalars and arrays as their element
/// bytes (native order) with the XLA FFI data type code, so that the safe layer types them.
#[derive(Clone, Debug, PartialEq)]
pub enum RawAttr {
    /// One element; `bytes` is empty when rpjrt does not know the type's width.
    Scalar {
        /// XLA FFI data type code.
        dtype: i32,
        /// The element's bytes.
        bytes: Vec<u8>,
    },
    /// `len` elements; `bytes` is empty when rpjrt does not know the type's width.
    Array {
        /// XLA FFI data type code.
        dtype: i32,
        /// Number of elements.
        len: usize,
        /// The elements' bytes.
        bytes: Vec<u8>,
    },
    /// A string's bytes, as the runtime gave them (the safe layer checks the encoding).
    Str(Vec<u8>),
    /// A nested dictionary, in the runtime's order.
    Dict(Vec<(String, RawAttr)>),
    /// An attribute kind rpjrt does not read (its `XLA_FFI_AttrType`).
    Other(i32),
}

/// Bytes per element of an FFI type stored in whole bytes.
fn whole_bytes(dtype: i32) -> Option<usize> {
    ffi_storage_bits(dtype)
        .filter(|b| b % 8 == 0 && *b > 0)
        .map(|b| b / 8)
}

/// Copies an attribute table out (`depth` guards against runaway nesting).
///
/// # Safety
/// `a` must be the runtime's attribute table for a live call.
unsafe fn decode_attrs(
    a: &sys::XLA_FFI_Attrs,
    depth: usize,
) -> std::result::Result<Vec<(String, RawAttr)>, (Code, String)> {
    if depth > 32 {
        return Err((
            Code::InvalidArgument,
            "attributes nest deeper than 32".into(),
        ));
    }
    let n = usize::try_from(a.size).unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `size` entries in each array, per the runtime.
        let (ty, name, value) = unsafe { (*a.types.add(i), *a.names.add(i), *a.attrs.add(i)) };
        // SAFETY: the name is a byte span owned by the runtime for the call.
        let name = unsafe { span_bytes(name) };
        // A lossy decoding would merge names that differ only in their invalid bytes.
        let name = String::from_utf8(name).map_err(|e| {
            (
                Code::InvalidArgument,
                format!(
                    "an attribute name is not valid UTF-8 (its bytes are \"{}\"): rpjrt \
                     refuses it rather than decode it lossily, which could merge distinct \
                     attributes",
                    e.as_bytes().escape_ascii()
                ),
            )
        })?;
        let v = match ty {
            sys::XLA_FFI_AttrType_SCALAR => {
                // SAFETY: a SCALAR entry points at an XLA_FFI_Scalar.
                let s = unsafe { &*value.cast::<sys::XLA_FFI_Scalar>() };
                let width = whole_bytes(s.dtype).filter(|_| !s.value.is_null());
                // SAFETY: the scalar's value pointer holds one element of its dtype, whose
                // width the table gives.
                let bytes = width.map_or(Vec::new(), |w| unsafe { copy_bytes(s.value, w) });
                RawAttr::Scalar {
                    dtype: s.dtype,
                    bytes,
                }
            }
            sys::XLA_FFI_AttrType_ARRAY => {
                // SAFETY: an ARRAY entry points at an XLA_FFI_Array.
                let arr = unsafe { &*value.cast::<sys::XLA_FFI_Array>() };
                let len = arr.size;
                let total = whole_bytes(arr.dtype)
                    .and_then(|w| w.checked_mul(len))
                    .filter(|_| !arr.data.is_null() || len == 0);
                // SAFETY: `size` elements of `dtype` at `data`.
                let bytes = total.map_or(Vec::new(), |t| unsafe { copy_bytes(arr.data, t) });
                RawAttr::Array {
                    dtype: arr.dtype,
                    len,
                    bytes,
                }
            }
            sys::XLA_FFI_AttrType_STRING => {
                // SAFETY: a STRING entry points at a byte span.
                RawAttr::Str(unsafe { span_bytes(value.cast()) })
            }
            sys::XLA_FFI_AttrType_DICTIONARY => {
                // SAFETY: a DICTIONARY entry points at a nested attribute table.
                let inner = unsafe { &*value.cast::<sys::XLA_FFI_Attrs>() };
                // SAFETY: as for the outer table.
                RawAttr::Dict(unsafe { decode_attrs(inner, depth + 1) }?)
            }
            other => RawAttr::Other(other),
        };
        out.push((name, v));
    }
    Ok(out)
}

/// # Safety
/// `n` readable bytes at `p` (or `n == 0`).
unsafe fn copy_bytes(p: *const c_void, n: usize) -> Vec<u8> {
    if n == 0 || p.is_null() {
        return Vec::new();
    }
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec()
}

/// # Safety
/// `s` is null or points at a live byte span.
unsafe fn span_bytes(s: *const sys::XLA_FFI_ByteSpan) -> Vec<u8> {
    if s.is_null() {
        return Vec::new();
    }
    // SAFETY: per the contract.
    let s = unsafe { &*s };
    // SAFETY: `len` bytes at `ptr`, live for the call (copy_bytes checks null and 0).
    unsafe { copy_bytes(s.ptr.cast(), s.len) }
}

// ------------------------------------------------------------------------------- thunks

/// Wraps a raw handler address as a function pointer.
///
/// # Safety
/// `address` must be the address of a function with the `XLA_FFI_Handler` signature that
/// stays valid for the life of the process.
pub unsafe fn native_handler(address: usize) -> Option<sys::XLA_FFI_Handler> {
    if address == 0 {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { std::mem::transmute::<usize, sys::XLA_FFI_Handler>(address) })
}

/// Asks native handler code which FFI version it was built for, by calling it with a
/// metadata frame (what XLA does at registration), using the runtime api learned by
/// `probe_target`'s metadata call.
pub fn native_version(h: NativeHandler, probe_target: &Target) -> Option<Version> {
    let api = probe_target.runtime_api().0;
    if api.is_null() {
        return None;
    }
    let mut md = sys::XLA_FFI_Metadata {
        struct_size: sys::XLA_FFI_Metadata_STRUCT_SIZE,
        api_version: sys::XLA_FFI_Api_Version {
            struct_size: sys::XLA_FFI_Api_Version_STRUCT_SIZE,
            extension_start: null_mut(),
            major_version: 0,
            minor_version: 0,
        },
        traits: 0,
        state_type_id: sys::XLA_FFI_TypeId { type_id: 0 },
    };
    let mut ext = sys::XLA_FFI_Metadata_Extension {
        extension_base: sys::XLA_FFI_Extension_Base {
            struct_size: sys::XLA_FFI_Metadata_Extension_STRUCT_SIZE,
            r#type: sys::XLA_FFI_Extension_Metadata,
            next: null_mut(),
        },
        metadata: &mut md,
    };
    let empty_args = sys::XLA_FFI_Args {
        struct_size: sys::XLA_FFI_Args_STRUCT_SIZE,
        extension_start: null_mut(),
        size: 0,
        types: null_mut(),
        args: null_mut(),
    };
    let empty_rets = sys::XLA_FFI_Rets {
        struct_size: sys::XLA_FFI_Rets_STRUCT_SIZE,
        extension_start: null_mut(),
        size: 0,
        types: null_mut(),
        rets: null_mut(),
    };
    let empty_attrs = sys::XLA_FFI_Attrs {
        struct_size: sys::XLA_FFI_Attrs_STRUCT_SIZE,
        extension_start: null_mut(),
        size: 0,
        types: null_mut(),
        names: null_mut(),
        attrs: null_mut(),
    };
    let mut frame = sys::XLA_FFI_CallFrame {
        struct_size: sys::XLA_FFI_CallFrame_STRUCT_SIZE,
        extension_start: (&mut ext as *mut sys::XLA_FFI_Metadata_Extension).cast(),
        api,
        ctx: null_mut(),
        stage: sys::XLA_FFI_ExecutionStage_EXECUTE,
        args: empty_args,
        rets: empty_rets,
        attrs: empty_attrs,
        future: null_mut(),
    };
    // SAFETY: a well-formed metadata frame with the runtime's own api; the handler is an
    // XLA FFI handler (vouched for when the `NativeHandler` was made) and only fills in the
    // metadata struct.
    let err = unsafe { (h.0)(&mut frame) };
    if !err.is_null() {
        let f = Frame {
            ptr: &mut frame,
            api,
            target: probe_target_static(probe_target),
            _life: std::marker::PhantomData,
        };
        f.drop_error(err);
        return None;
    }
    Some((md.api_version.major_version, md.api_version.minor_version))
}

fn probe_target_static(t: &Target) -> &'static Target {
    // SAFETY: every `Target` is leaked at creation (see `Target::new`), so it lives forever.
    unsafe { &*(t as *const Target) }
}

mod thunks {
    //! Executable pages of per-target entry stubs.
    use super::*;

    const PAGE: usize = 4096;
    const STUB: usize = 32;
    const PER_PAGE: usize = PAGE / STUB;

    type Slot = AtomicPtr<Target>;

    static FREE: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

    /// A fresh stub: `(code address, its slot)`.
    pub(super) fn take() -> Result<(usize, &'static Slot)> {
        let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
        if free.is_empty() {
            *free = new_page()?;
            free.reverse();
        }
        let (code, slot) = free.pop().expect("a new page has stubs");
        // SAFETY: slots are leaked `AtomicPtr`s made in `new_page`.
        Ok((code, unsafe { &*(slot as *const Slot) }))
    }

    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    fn new_page() -> Result<Vec<(usize, usize)>> {
        extern "C" {
            fn mmap(
                addr: *mut c_void,
                len: usize,
                prot: c_int,
                flags: c_int,
                fd: c_int,
                off: i64,
            ) -> *mut c_void;
            fn mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int;
            #[cfg(target_arch = "aarch64")]
            fn __clear_cache(start: *mut std::ffi::c_char, end: *mut std::ffi::c_char);
        }
        const PROT_READ: c_int = 1;
        const PROT_WRITE: c_int = 2;
        const PROT_EXEC: c_int = 4;
        const MAP_PRIVATE: c_int = 2;
        const MAP_ANONYMOUS: c_int = 0x20;
        let slots: &'static [Slot] = Box::leak(
            (0..PER_PAGE)
                .map(|_| AtomicPtr::new(null_mut()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        // SAFETY: anonymous private mapping of one page, no existing memory involved.
        let page = unsafe {
            mmap(
                null_mut(),
                PAGE,
                PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page.is_null() || page as isize == -1 {
            return Err(Error::invalid(
                "cannot map a page for FFI handler entry stubs (mmap failed)",
            ));
        }
        let target = dispatch as *const () as usize as u64;
        let mut out = Vec::with_capacity(PER_PAGE);
        for (i, slot) in slots.iter().enumerate() {
            let code = page as usize + i * STUB;
            let slot_addr = slot as *const Slot as u64;
            let mut stub = [0u8; STUB];
            #[cfg(target_arch = "x86_64")]
            {
                // movabs rsi, slot ; movabs rax, dispatch ; jmp rax ; int3 padding
                stub.fill(0xCC);
                stub[0..2].copy_from_slice(&[0x48, 0xBE]);
                stub[2..10].copy_from_slice(&slot_addr.to_le_bytes());
                stub[10..12].copy_from_slice(&[0x48, 0xB8]);
                stub[12..20].copy_from_slice(&target.to_le_bytes());
                stub[20..22].copy_from_slice(&[0xFF, 0xE0]);
            }
            #[cfg(target_arch = "aarch64")]
            {
                // ldr x1, [pc+16] ; ldr x16, [pc+20] ; br x16 ; nop ; .quad slot ; .quad dispatch
                stub[0..4].copy_from_slice(&0x5800_0081u32.to_le_bytes());
                stub[4..8].copy_from_slice(&0x5800_00B0u32.to_le_bytes());
                stub[8..12].copy_from_slice(&0xD61F_0200u32.to_le_bytes());
                stub[12..16].copy_from_slice(&0xD503_201Fu32.to_le_bytes());
                stub[16..24].copy_from_slice(&slot_addr.to_le_bytes());
                stub[24..32].copy_from_slice(&target.to_le_bytes());
            }
            // SAFETY: writing inside our own freshly mapped, writable page.
            unsafe { std::ptr::copy_nonoverlapping(stub.as_ptr(), code as *mut u8, STUB) };
            out.push((code, slot as *const Slot as usize));
        }
        // SAFETY: our own page; from now on it is read+execute and never written again.
        if unsafe { mprotect(page, PAGE, PROT_READ | PROT_EXEC) } != 0 {
            return Err(Error::invalid(
                "cannot make the FFI handler entry stubs executable (mprotect failed; is W^X \
                 enforced for this process?)",
            ));
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: flushing the instruction cache for our page.
        unsafe {
            __clear_cache(page.cast(), page.cast::<std::ffi::c_char>().add(PAGE))
        };
        Ok(out)
    }

    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    fn new_page() -> Result<Vec<(usize, usize)>> {
        Err(Error::invalid(
            "custom-call handlers written in Rust or Python need Linux on x86-64 or aarch64",
        ))
    }
}

/// Operations (StableHLO and MHLO) whose regions may not hold a custom call: on the CPU
/// plugins (PJRT 0.81 and 0.115) one in a `reduce`, `reduce_window`, `scatter`,
/// `select_and_scatter` or `map` body stops the process at compile; in a `sort` comparator
/// or an `all_reduce` / `reduce_scatter` computation the compile fails with an unrelated
/// error. `while`, `if`, `case` and called functions hold them fine.
pub const NO_CUSTOM_CALL_REGIONS: [&str; 8] = [
    "reduce",
    "reduce_window",
    "scatter",
    "select_and_scatter",
    "map",
    "sort",
    "all_reduce",
    "reduce_scatter",
];

/// Whether `op` (`dialect.name`, VHLO read as StableHLO) is in [`NO_CUSTOM_CALL_REGIONS`].
pub fn bars_custom_calls(op: &str) -> bool {
    op.split_once('.').is_some_and(|(d, o)| {
        matches!(d, "stablehlo" | "mhlo") && NO_CUSTOM_CALL_REGIONS.contains(&o)
    })
}

/// A custom call inside a region of an operation that bars them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionCustomCall {
    /// The call's target (without `@`); empty where it is not read (bytecode).
    pub target: String,
    /// The enclosing operation (`stablehlo.reduce`).
    pub op: String,
    /// The function the region calls that holds the custom call (`@f, a function the region
    /// calls`), when the call is not in the region itself.
    pub via: Option<String>,
}

impl RegionCustomCall {
    /// A custom call to `target` in a computation an HLO instruction of `opcode` calls
    /// (`reduce-window`), when that opcode bars them.
    pub fn in_hlo(opcode: &str, target: &str) -> Option<RegionCustomCall> {
        let op = format!("stablehlo.{}", opcode.replace('-', "_"));
        let target = target.to_string();
        bars_custom_calls(&op).then_some(RegionCustomCall {
            target,
            op,
            via: None,
        })
    }
}

impl std::fmt::Display for RegionCustomCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let to = Some(&self.target).filter(|t| !t.is_empty());
        write!(
            f,
            "a custom call{} sits in a region of {}{}: the plugin's compiler cannot compile a \
             custom call in a region of reduce, reduce_window, scatter, select_and_scatter, \
             map, sort, all_reduce or reduce_scatter (it stops the process, fails with an \
             unrelated error, or in map hands the handler whole arrays), so rpjrt refuses it \
             before compiling (make the call outside that operation, or write the region with \
             StableHLO operations only)",
            to.map_or(String::new(), |t| format!(" to @{t}")),
            self.op,
            self.via
                .as_ref()
                .map_or(String::new(), |v| format!(" (in {v})")),
        )
    }
}

/// Finds a custom call in a region of an operation that bars them
/// ([`bars_custom_calls`]), at any depth of nested regions and through the functions a
/// region references (`func.call @f`, a composite's `decomposition = @f`), in MLIR text.
pub fn text_region_custom_call(text: &str) -> Option<RegionCustomCall> {
    // Per open bracket: the last operation named at this depth and the first symbol after
    // it, the innermost barring operation enclosing it, and the function it is in.
    #[derive(Clone, Default)]
    struct Frame<'t> {
        op: Option<&'t str>,
        sym: Option<&'t str>,
        bar: Option<&'t str>,
        func: Option<&'t str>,
    }
    if !text.contains("custom_call") {
        return None;
    }
    let b = text.as_bytes();
    let ident = |i: usize| {
        let n = b[i..]
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || b"_.$-".contains(&c)));
        &text[i..i + n.unwrap_or(b.len() - i)]
    };
    let mut st = vec![Frame::default()];
    // (function, barring op, target) of calls; (function, barring op, symbol) of references.
    let (mut calls, mut refs, mut defs) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0;
    while i < b.len() {
        let top = st.len() - 1;
        let (c, prev) = (b[i], if i > 0 { b[i - 1] } else { b' ' });
        let mut op = None;
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .unwrap_or(b.len() - i);
                continue;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let s = &text[i + 1..j.min(b.len())];
                let next = text[(j + 1).min(b.len())..].trim_start();
                if s.contains('.') && next.starts_with('(') && ident(i + 1).len() == s.len() {
                    op = Some(s);
                }
                i = j + 1;
            }
            b'(' | b'[' | b'{' => {
                let p = &st[top];
                let bars = p.op.filter(|o| bars_custom_calls(o));
                let func = match p.op {
                    Some("func.func") => p.sym,
                    _ => p.func,
                };
                st.push(Frame {
                    op: None,
                    sym: None,
                    bar: bars.or(p.bar),
                    func,
                });
                i += 1;
            }
            b')' | b']' | b'}' => {
                if st.len() > 1 {
                    st.pop();
                }
                i += 1;
            }
            b'%' => {
                (st[top].op, st[top].sym) = (None, None);
                i += 1;
            }
            b'@' => {
                let quoted = b.get(i + 1) == Some(&b'"');
                let s = match quoted {
                    true => text[i + 2..].split('"').next().unwrap_or(""),
                    false => ident(i + 1),
                };
                let f = &mut st[top];
                if f.op == Some("func.func") && f.sym.is_none() {
                    defs.push(s);
                } else if let Some(func) = f.func {
                    refs.push((func, f.bar, s));
                }
                f.sym = f.sym.or(Some(s));
                i += 1 + s.len() + 2 * usize::from(quoted);
            }
            c if c.is_ascii_alphabetic()
                && !(prev.is_ascii_alphanumeric() || b"#!^_.$-".contains(&prev)) =>
            {
                let s = ident(i);
                op = s.contains('.').then_some(s);
                i += s.len();
            }
            _ => i += 1,
        }
        if let Some(o) = op {
            (st[top].op, st[top].sym) = (Some(o), None);
            if o.ends_with(".custom_call") {
                let rest = &text[i..text[i..].find("custom_call").map_or(b.len(), |n| i + n)];
                let target = match rest.trim_start().trim_start_matches('(').strip_prefix('@') {
                    Some(t) => t.trim_matches('"'),
                    None => rest
                        .split_once("call_target_name = \"")
                        .map_or("", |(_, t)| t),
                };
                let end = target.find(|c: char| !(c.is_alphanumeric() || "_.$-".contains(c)));
                let target = &target[..end.unwrap_or(target.len())];
                calls.push((st[top].func, st[top].bar, target));
            }
        }
    }
    let found = |target: &str, op: &str, via: Option<&str>| RegionCustomCall {
        target: target.to_string(),
        op: op.to_string(),
        via: via.map(|v| format!("@{v}, a function the region calls")),
    };
    if let Some((_, Some(op), t)) = calls.iter().find(|c| c.1.is_some()) {
        return Some(found(t, op, None));
    }
    // Functions holding a custom call, directly or through the functions they reference.
    let mut holding: std::collections::HashMap<&str, &str> =
        calls.iter().filter_map(|c| Some((c.0?, c.2))).collect();
    for _ in 0..defs.len() {
        let more: Vec<(&str, &str)> = refs
            .iter()
            .filter(|r| !holding.contains_key(r.0))
            .filter_map(|&(f, _, g)| Some((f, *holding.get(g)?)))
            .collect();
        if more.is_empty() {
            break;
        }
        holding.extend(more);
    }
    refs.iter()
        .find_map(|&(_, bar, g)| Some(found(holding.get(g)?, bar?, Some(g))))
}

/// One call, composite, custom call or function operation of a walked program (MLIR
/// bytecode).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalkedOp {
    /// The operation's name (`stablehlo.call`, `func.func`).
    pub op: String,
    /// The operations enclosing it, outermost first.
    pub outer: Vec<String>,
    /// For a function, the names it may have; for a call or composite, the names of the
    /// function it may call (empty when they could not be read).
    pub names: Vec<String>,
    /// The function holding it: its index in the walked list.
    pub func: Option<usize>,
}

/// [`text_region_custom_call`] for a program whose operations were walked (MLIR bytecode):
/// a custom call in a barring region, or a call or composite there whose callee holds a
/// custom call, directly or through further calls. A callee whose name could not be read
/// (or that names no function, or where some function's name could not be read) counts as
/// holding one when the program has a custom call anywhere.
pub fn walked_region_custom_call(ops: &[WalkedOp]) -> Option<RegionCustomCall> {
    if !ops.iter().any(|o| o.op.ends_with(".custom_call")) {
        return None;
    }
    let is_func = |o: &WalkedOp| o.op.ends_with(".func");
    let named = ops
        .iter()
        .filter(|o| is_func(o))
        .all(|f| !f.names.is_empty());
    // The functions a call may reach; `None` when not known.
    let targets = |c: &WalkedOp| -> Option<Vec<usize>> {
        let t: Vec<usize> = (0..ops.len())
            .filter(|&i| is_func(&ops[i]) && ops[i].names.iter().any(|n| c.names.contains(n)))
            .collect();
        (named && !t.is_empty()).then_some(t)
    };
    let mut holds = vec![false; ops.len()];
    for o in ops.iter().filter(|o| o.op.ends_with(".custom_call")) {
        if let Some(f) = o.func.filter(|&f| f < holds.len()) {
            holds[f] = true;
        }
    }
    let reaches = |c: &WalkedOp, holds: &[bool]| match targets(c) {
        Some(t) => t.into_iter().find(|&g| holds[g]).map(Some),
        None => Some(None),
    };
    let calls: Vec<&WalkedOp> = ops
        .iter()
        .filter(|o| !is_func(o) && !o.op.ends_with(".custom_call"))
        .collect();
    // Each round marks at least one more function, so this ends.
    loop {
        let more: Vec<usize> = calls
            .iter()
            .filter(|c| reaches(c, &holds).is_some())
            .filter_map(|c| c.func.filter(|&f| f < holds.len() && !holds[f]))
            .collect();
        if more.is_empty() {
            break;
        }
        more.into_iter().for_each(|f| holds[f] = true);
    }
    ops.iter().find_map(|o| {
        let bar = o.outer.iter().rev().find(|e| bars_custom_calls(e))?;
        let via = match o.op.ends_with(".custom_call") {
            true => None,
            false => Some(match reaches(o, &holds)? {
                Some(g) => {
                    let names = &ops[g].names;
                    let name = names
                        .iter()
                        .find(|n| o.names.contains(n))
                        .unwrap_or(&names[0]);
                    format!("@{name}, a function the region calls")
                }
                None => format!(
                    "a function the region calls through {}, whose name could not be read from \
                     bytecode",
                    o.op
                ),
            }),
        };
        Some(RegionCustomCall {
            target: String::new(),
            op: bar.clone(),
            via,
        })
    })
}

#[cfg(test)]
mod nesting_tests {
    use super::*;

    #[test]
    fn a_handlers_own_exhaustion_is_told_apart() {
        let own = "Python handler for \"q\" raised ResourceExhaustedError: request quota of \
                   the lookup service exceeded (traceback, innermost first: x.py:11 in h)";
        assert!(!is_handler_exhaustion(&format!(
            "RESOURCE_EXHAUSTED: {own}"
        )));
        note_handler_exhausted(own);
        assert!(is_handler_exhaustion(&format!(
            "PJRT_LoadedExecutable_Execute failed with RESOURCE_EXHAUSTED: {own}"
        )));
        assert!(!is_handler_exhaustion(
            "RESOURCE_EXHAUSTED: Out of memory allocating 4 GiB"
        ));
        // Bounded: old entries go, long messages are kept by their start (on a character
        // boundary).
        for i in 0..2 * HANDLER_EXHAUSTED_KEPT {
            note_handler_exhausted(&format!("handler {i} \u{e9}{}", "x".repeat(400)));
        }
        let kept = HANDLER_EXHAUSTED.lock().unwrap();
        assert_eq!(kept.len(), HANDLER_EXHAUSTED_KEPT);
        assert!(kept.iter().all(|k| k.len() <= HANDLER_EXHAUSTED_BYTES));
    }

    #[test]
    fn the_nesting_refusal_is_told_apart_and_names_the_limit() {
        let text = "PJRT_LoadedExecutable_Execute failed with RESOURCE_EXHAUSTED: Python handler \
                    for \"rec\" raised ResourceExhaustedError: ... at rpjrt's custom-call \
                    nesting limit of 16: ...";
        assert!(is_nesting_refusal(text));
        assert!(!is_nesting_refusal(
            "RESOURCE_EXHAUSTED: Out of memory allocating 4 GiB"
        ));
        // The words carry no memory vocabulary (they must not read as an allocation failure).
        let m = NESTING_LIMIT.to_lowercase();
        assert!(!m.contains("memory") && !m.contains("alloc") && !m.contains("oom"));
    }
}

#[cfg(test)]
mod region_call_tests {
    use super::*;

    const CC: &str = "stablehlo.custom_call @t(%a, %b) {api_version = 4 : i32} : \
                      (tensor<f32>, tensor<f32>) -> tensor<f32>";

    fn reduce(body: &str) -> String {
        format!(
            "func.func public @main(%x: tensor<8xf32>) -> tensor<f32> {{\n  %z = \
             stablehlo.constant dense<0.0> : tensor<f32>\n  %r = \"stablehlo.reduce\"(%x, %z) \
             ({{\n  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    {body}\n    \
             stablehlo.return %s : tensor<f32>\n  }}) {{dimensions = array<i64: 0>}} : \
             (tensor<8xf32>, tensor<f32>) -> tensor<f32>\n  return %r : tensor<f32>\n}}"
        )
    }

    fn found(src: &str) -> Option<(String, String, Option<String>)> {
        text_region_custom_call(src).map(|r| (r.target, r.op, r.via))
    }

    #[test]
    fn custom_calls_in_barring_regions_are_found_at_any_depth() {
        let direct = reduce(&format!("%s = {CC}"));
        assert_eq!(
            found(&direct),
            Some(("t".into(), "stablehlo.reduce".into(), None))
        );
        // Generic form with call_target_name, and the op in another barring op's region.
        let generic = direct.replace(
            "stablehlo.custom_call @t(%a, %b) {",
            "\"stablehlo.custom_call\"(%a, %b) {call_target_name = \"g.x\", ",
        );
        assert_eq!(found(&generic).unwrap().0, "g.x");
        for op in NO_CUSTOM_CALL_REGIONS {
            let src = direct.replace("\"stablehlo.reduce\"", &format!("\"mhlo.{op}\""));
            assert_eq!(found(&src).unwrap().1, format!("mhlo.{op}"));
        }
        // Inside a while nested in the reduce body.
        let nested = reduce(&format!(
            "%s = stablehlo.while(%i = %a) : tensor<f32>\n cond {{\n %c = \
             stablehlo.constant dense<true> : tensor<i1>\n stablehlo.return %c : tensor<i1>\n \
             }} do {{\n %k = {CC}\n stablehlo.return %k : tensor<f32>\n }}"
        ));
        assert_eq!(found(&nested).unwrap().1, "stablehlo.reduce");
        // Through a chain of called functions.
        let helper = format!(
            "func.func private @h2(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {{\n %s = \
             {CC}\n return %s : tensor<f32>\n}}\nfunc.func private @\"h.1\"(%a: tensor<f32>, %b: \
             tensor<f32>) -> tensor<f32> {{\n %s = func.call @h2(%a, %b) : (tensor<f32>, \
             tensor<f32>) -> tensor<f32>\n return %s : tensor<f32>\n}}\n"
        );
        let via = helper
            + &reduce(
                "%s = func.call @\"h.1\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>",
            );
        assert_eq!(
            found(&via),
            Some((
                "t".into(),
                "stablehlo.reduce".into(),
                Some("@h.1, a function the region calls".into())
            ))
        );
    }

    #[test]
    fn custom_calls_elsewhere_pass() {
        let add = "%s = stablehlo.add %a, %b : tensor<f32>";
        // A custom call after the reduce, one in a comment, one in a string.
        let after = reduce(add).replace(
            "  return %r",
            "  stablehlo.custom_call @log(%r) : (tensor<f32>) -> ()\n  return %r",
        );
        assert_eq!(found(&after), None);
        let comment = reduce(&format!("{add} // {CC}"));
        assert_eq!(found(&comment), None);
        let string = reduce(add).replace("0>}", "0>, note = \"custom_call {\"}");
        assert_eq!(found(&string), None);
        // In a while body, and in a function the reduce does not call.
        let f = format!(
            "func.func private @h(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {{\n %s = \
             {CC}\n return %s : tensor<f32>\n}}\n"
        );
        assert_eq!(found(&(f + &reduce(add))), None);
        // Pretty-printed reduce with an `applies` body, and reduce_precision (no region).
        let pretty = "func.func @main(%x: tensor<8xf32>) -> tensor<f32> {\n %r = stablehlo.reduce(%x \
                      init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, \
                      tensor<f32>) -> tensor<f32>\n %p = stablehlo.reduce_precision %r : tensor<f32>\n \
                      %c = stablehlo.custom_call @t(%p) : (tensor<f32>) -> tensor<f32>\n}";
        assert_eq!(found(pretty), None);
        assert!(!bars_custom_calls("stablehlo.reduce_precision"));
        assert!(!bars_custom_calls("stablehlo.while") && bars_custom_calls("mhlo.sort"));
    }

    #[test]
    fn walked_calls_in_barring_regions_are_found() {
        let op = |o: &str, outer: &[&str], names: &[&str], func: Option<usize>| WalkedOp {
            op: o.to_string(),
            outer: outer.iter().map(|s| s.to_string()).collect(),
            names: names.iter().map(|s| s.to_string()).collect(),
            func,
        };
        let m = ["builtin.module", "stablehlo.func"];
        let in_map = [&m[..], &["stablehlo.map"]].concat();
        let cc_in = vec![
            op("stablehlo.func", &m[..1], &["main"], None),
            op(
                "stablehlo.custom_call",
                &[&m[..], &["stablehlo.sort"]].concat(),
                &[],
                Some(0),
            ),
        ];
        assert_eq!(
            walked_region_custom_call(&cc_in).unwrap().op,
            "stablehlo.sort"
        );
        // main's map calls @h; @h calls @g, which holds the custom call.
        let mut call_in = vec![
            op("stablehlo.func", &m[..1], &["main", "public"], None),
            op("stablehlo.call", &in_map, &["h"], Some(0)),
            op("stablehlo.func", &m[..1], &["h"], None),
            op("stablehlo.call", &m, &["g"], Some(2)),
            op("stablehlo.func", &m[..1], &["g"], None),
            op("stablehlo.custom_call", &m, &[], Some(4)),
        ];
        let r = walked_region_custom_call(&call_in).unwrap();
        assert_eq!(
            (r.op.as_str(), r.via.as_deref()),
            ("stablehlo.map", Some("@h, a function the region calls"))
        );
        // @h calls a function without custom calls instead: nothing to refuse.
        call_in[3].names = vec!["k".into()];
        call_in.push(op("stablehlo.func", &m[..1], &["k"], None));
        assert_eq!(walked_region_custom_call(&call_in), None);
        // A callee whose name is unread, or names no function: refused as before.
        call_in[1].names.clear();
        assert!(walked_region_custom_call(&call_in)
            .unwrap()
            .via
            .unwrap()
            .contains("could not be read"));
        call_in[1].names = vec!["nowhere".into()];
        assert!(walked_region_custom_call(&call_in).is_some());
        // A function whose name is unread makes every call unknown.
        call_in[1].names = vec!["h".into()];
        call_in[6].names.clear();
        assert!(walked_region_custom_call(&call_in).is_some());
        // No custom call in the program, or one outside a barring region.
        assert_eq!(walked_region_custom_call(&call_in[..5]), None);
        let outside = vec![op(
            "stablehlo.custom_call",
            &[&m[..], &["stablehlo.while"]].concat(),
            &[],
            None,
        )];
        assert_eq!(walked_region_custom_call(&outside), None);
    }
}
