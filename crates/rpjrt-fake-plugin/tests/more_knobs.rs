//! The knobs other capabilities test against: CRASH_ON / HANG_ON (in a child process),
//! FFI handler registration, the KV device exchange and the memory limit.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rpjrt_fake_plugin as fake;
use rpjrt_sys as sys;

fn api_from(spec: &str) -> Api {
    Api::new(fake::configure_from_spec(spec).unwrap())
}

// ------------------------------------------------------------ crash and hang

/// Set in the child: which knob to apply before creating a client.
const CHILD: &str = "RPJRT_FAKE_TEST_CHILD";

/// In the child (env `CHILD` set), configure from the environment and call the entry
/// the knob names; in a normal run, nothing.
#[test]
fn child_calls_client_create() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let api = Api::new(fake::GetPjrtApi());
    eprintln!("child: calling PJRT_Client_Create");
    let _ = create_client(api, &[]);
    eprintln!("child: PJRT_Client_Create returned");
}

/// Runs `child_calls_client_create` in a child process with `knob` set, reads its
/// stderr until `marker` appears (or a minute passes) and returns the child.
fn spawn_child(knob: &str, marker: &str) -> (std::process::Child, Vec<String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_calls_client_create",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env(knob, "PJRT_Client_Create")
        // A core file, if the system writes one, lands outside the repository.
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let done = line.contains(marker);
                lines.push(line);
                if done {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    (child, lines)
}

fn wait_with_deadline(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("child did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn crash_on_raises_sigsegv() {
    use std::os::unix::process::ExitStatusExt;
    let (mut child, lines) = spawn_child(fake::knobs::CRASH_ON, "crashing");
    let status = wait_with_deadline(&mut child);
    assert_eq!(status.signal(), Some(11), "{status:?}; stderr: {lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("PJRT_Client_Create: crashing")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("returned")), "{lines:?}");
}

#[test]
fn hang_on_never_returns() {
    let (mut child, lines) = spawn_child(fake::knobs::HANG_ON, "hanging");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("PJRT_Client_Create: hanging")),
        "{lines:?}"
    );
    // It announced the hang and has not exited.
    assert!(child.try_wait().unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn crash_and_hang_knobs_name_known_entries() {
    let _g = serial();
    assert!(fake::configure_from_spec("RPJRT_FAKE_CRASH_ON=PJRT_Nope").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_HANG_ON=PJRT_Nope").is_err());
    let cfg = fake::Config::from_spec(
        "RPJRT_FAKE_CRASH_ON=PJRT_Client_Compile,PJRT_FFI_Register_Handler\n\
         RPJRT_FAKE_HANG_ON=PJRT_Event_Await",
    )
    .unwrap();
    assert_eq!(cfg.crash_on.len(), 2);
    assert!(cfg.hang_on.contains("PJRT_Event_Await"));
    fake::configure_from_spec("").unwrap();
}

// ------------------------------------------------------------------------ FFI

fn ffi_extension(api: Api) -> &'static sys::PJRT_FFI_Extension {
    let mut p = api.0.extension_start;
    while !p.is_null() {
        // SAFETY: the fake's extension chain lives as long as its table.
        let base = unsafe { &*p };
        if base.r#type == sys::PJRT_Extension_Type_FFI {
            // SAFETY: an FFI extension of the default size (48) is a whole
            // PJRT_FFI_Extension.
            return unsafe { &*p.cast::<sys::PJRT_FFI_Extension>() };
        }
        p = base.next;
    }
    panic!("no FFI extension")
}

fn register(api: Api, name: &str, handler: sys::XLA_FFI_Handler) -> CallResult<()> {
    let ext = ffi_extension(api);
    let mut a: sys::PJRT_FFI_Register_Handler_Args =
        new_args(sys::PJRT_FFI_Register_Handler_Args_STRUCT_SIZE);
    a.target_name = name.as_ptr().cast();
    a.target_name_size = name.len();
    a.handler = handler as *mut std::ffi::c_void;
    a.platform_name = "host".as_ptr().cast();
    a.platform_name_size = 4;
    // SAFETY: a valid args struct for this function.
    let err = unsafe { (ext.register_handler.unwrap())(&mut a) };
    api.take(err)
}

/// What the last metadata call looked like: (frame size, api version, extension type).
type Seen = (usize, (i32, i32), i32);
static SEEN: std::sync::Mutex<Option<Seen>> = std::sync::Mutex::new(None);

/// A handler that answers the metadata call with `version` and traits 1.
unsafe fn answer(
    frame: *mut sys::XLA_FFI_CallFrame,
    version: (i32, i32),
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: the plugin passes a valid call frame.
    let f = unsafe { &*frame };
    // SAFETY: the runtime's API table and the extension outlive the call.
    let (api, ext) = unsafe { (&*f.api, &*f.extension_start) };
    *SEEN.lock().unwrap() = Some((
        f.struct_size,
        (api.api_version.major_version, api.api_version.minor_version),
        ext.r#type,
    ));
    // SAFETY: the metadata extension carries a writable metadata pointer.
    let meta =
        unsafe { &mut *(*f.extension_start.cast::<sys::XLA_FFI_Metadata_Extension>()).metadata };
    meta.api_version.major_version = version.0;
    meta.api_version.minor_version = version.1;
    meta.traits = 1;
    std::ptr::null_mut()
}

unsafe extern "C" fn handler_03(frame: *mut sys::XLA_FFI_CallFrame) -> *mut sys::XLA_FFI_Error {
    // SAFETY: forwarded.
    unsafe { answer(frame, (0, 3)) }
}

unsafe extern "C" fn handler_05(frame: *mut sys::XLA_FFI_CallFrame) -> *mut sys::XLA_FFI_Error {
    // SAFETY: forwarded.
    unsafe { answer(frame, (0, 5)) }
}

unsafe extern "C" fn failing_handler(
    frame: *mut sys::XLA_FFI_CallFrame,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: the plugin passes a valid call frame whose api has Error_Create.
    let api = unsafe { &*(*frame).api };
    let mut a: sys::XLA_FFI_Error_Create_Args =
        new_args(sys::XLA_FFI_Error_Create_Args_STRUCT_SIZE);
    a.message = c"bad attrs".as_ptr();
    a.errc = sys::XLA_FFI_Error_Code_INVALID_ARGUMENT;
    // SAFETY: a valid args struct.
    unsafe { (api.XLA_FFI_Error_Create.unwrap())(&mut a) }
}

fn registered(name: &str) -> Option<fake::FfiTarget> {
    fake::ffi_targets().into_iter().find(|t| t.name == name)
}

#[test]
fn ffi_ok_calls_the_handler_for_metadata_and_records_it() {
    let _g = serial();
    let api = api_from("");
    register(api, "ok_03", handler_03).unwrap();
    let t = registered("ok_03").unwrap();
    assert_eq!(
        (t.platform.as_str(), t.api_version, t.traits),
        ("host", (0, 3), 1)
    );
    assert_eq!(
        *SEEN.lock().unwrap(),
        Some((168, (0, 4), sys::XLA_FFI_Extension_Metadata))
    );
    // Newer than the fake's 0.4: success, but dropped like XLA does.
    register(api, "new_05", handler_05).unwrap();
    assert!(registered("new_05").is_none());
    // A newer fake takes it.
    let api = api_from("RPJRT_FAKE_FFI_VERSION=0.5");
    register(api, "new_05b", handler_05).unwrap();
    assert_eq!(registered("new_05b").unwrap().api_version, (0, 5));
    assert_eq!(SEEN.lock().unwrap().unwrap().1, (0, 5));
    // A handler error fails the registration with its code and message.
    let (code, msg) = register(api, "failing", failing_handler).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert!(
        msg.contains("bad attrs") && msg.contains("failing"),
        "{msg}"
    );
    assert!(registered("failing").is_none());
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn ffi_refuse_and_drop() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_FFI=refuse");
    let (code, msg) = register(api, "refused", handler_03).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert!(msg.contains("refused"), "{msg}");
    let api = api_from("RPJRT_FAKE_FFI=drop");
    register(api, "dropped", handler_03).unwrap();
    assert!(registered("refused").is_none() && registered("dropped").is_none());
    assert!(fake::configure_from_spec("RPJRT_FAKE_FFI=maybe").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_FFI_VERSION=4").is_err());
    fake::configure_from_spec("").unwrap();
}

#[test]
fn ffi_targets_are_exported_from_the_cdylib() {
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("librpjrt_fake_plugin.so");
    // SAFETY: our own test library; its initialisers do nothing.
    let lib = unsafe { libloading::Library::new(&lib) }.unwrap();
    type Targets = unsafe extern "C" fn(*mut std::os::raw::c_char, usize) -> usize;
    // SAFETY: the symbol has this signature.
    let targets: libloading::Symbol<Targets> =
        unsafe { lib.get(b"rpjrt_fake_ffi_targets") }.unwrap();
    // SAFETY: capacity 0 with a null buffer only asks for the length.
    assert_eq!(unsafe { targets(std::ptr::null_mut(), 0) }, 0);
    std::mem::forget(lib);
}

// ------------------------------------------------------------------------- KV

struct Store {
    entries: Vec<(String, String)>,
    timeouts: Vec<i32>,
}

unsafe extern "C" fn kv_put(args: *mut sys::PJRT_KeyValuePutCallback_Args) -> *mut sys::PJRT_Error {
    // SAFETY: the plugin passes valid args whose user_arg is our Store.
    let a = unsafe { &*args };
    // SAFETY: as above.
    let store = unsafe { &mut *a.user_arg.cast::<Store>() };
    store
        .entries
        .push((str_of(a.key, a.key_size), str_of(a.value, a.value_size)));
    std::ptr::null_mut()
}

unsafe extern "C" fn kv_get(args: *mut sys::PJRT_KeyValueGetCallback_Args) -> *mut sys::PJRT_Error {
    // SAFETY: the plugin passes valid args whose user_arg is our Store.
    let a = unsafe { &mut *args };
    // SAFETY: as above.
    let store = unsafe { &mut *a.user_arg.cast::<Store>() };
    store.timeouts.push(a.timeout_in_ms);
    let key = str_of(a.key, a.key_size);
    if let Some((_, v)) = store.entries.iter().find(|(k, _)| *k == key) {
        // Leaked on purpose is not allowed: hand a static copy without a deleter.
        let v: &'static str = Box::leak(v.clone().into_boxed_str());
        a.value = v.as_ptr().cast_mut().cast();
        a.value_size = v.len();
        a.value_deleter_callback = None;
        return std::ptr::null_mut();
    }
    // SAFETY: the plugin passes a valid PJRT_CallbackError.
    let make = unsafe { (*a.callback_error).unwrap() };
    let msg = "deadline exceeded";
    // SAFETY: message bytes valid for the call.
    unsafe {
        make(
            sys::PJRT_Error_Code_DEADLINE_EXCEEDED,
            msg.as_ptr().cast(),
            msg.len(),
        )
    }
}

fn device_process(api: Api, device: *mut sys::PJRT_Device) -> (i32, bool) {
    let mut d: sys::PJRT_Device_GetDescription_Args =
        new_args(sys::PJRT_Device_GetDescription_Args_STRUCT_SIZE);
    d.device = device;
    call!(api, PJRT_Device_GetDescription, d).unwrap();
    let mut p: sys::PJRT_DeviceDescription_ProcessIndex_Args =
        new_args(sys::PJRT_DeviceDescription_ProcessIndex_Args_STRUCT_SIZE);
    p.device_description = d.device_description;
    call!(api, PJRT_DeviceDescription_ProcessIndex, p).unwrap();
    let mut x: sys::PJRT_Device_IsAddressable_Args =
        new_args(sys::PJRT_Device_IsAddressable_Args_STRUCT_SIZE);
    x.device = device;
    call!(api, PJRT_Device_IsAddressable, x).unwrap();
    (p.process_index, x.is_addressable)
}

#[test]
fn kv_exchange_builds_a_multi_process_device_list() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_KV=1");
    let mut store = Store {
        entries: vec![("fake:device:0".into(), "3".into())],
        timeouts: Vec::new(),
    };
    let opts = [nv_int("num_nodes", 2), nv_int("node_id", 1)];
    let mut a: sys::PJRT_Client_Create_Args = new_args(sys::PJRT_Client_Create_Args_STRUCT_SIZE);
    a.create_options = opts.as_ptr();
    a.num_options = opts.len();
    a.kv_put_callback = Some(kv_put);
    a.kv_put_user_arg = (&mut store as *mut Store).cast();
    a.kv_get_callback = Some(kv_get);
    a.kv_get_user_arg = (&mut store as *mut Store).cast();
    call!(api, PJRT_Client_Create, a).unwrap();
    assert!(store
        .entries
        .contains(&("fake:device:1".to_string(), "2".to_string())));
    assert!(
        store.timeouts.iter().all(|t| *t > 0),
        "{:?}",
        store.timeouts
    );
    let mut all: sys::PJRT_Client_Devices_Args =
        new_args(sys::PJRT_Client_Devices_Args_STRUCT_SIZE);
    all.client = a.client;
    call!(api, PJRT_Client_Devices, all).unwrap();
    // SAFETY: the plugin returned that many device pointers.
    let all = unsafe { std::slice::from_raw_parts(all.devices, all.num_devices) };
    let procs: Vec<(i32, bool)> = all.iter().map(|d| device_process(api, *d)).collect();
    assert_eq!(
        procs,
        [(0, false), (0, false), (0, false), (1, true), (1, true)]
    );
    assert_eq!(devices(api, a.client).len(), 2);
    let mut pi: sys::PJRT_Client_ProcessIndex_Args =
        new_args(sys::PJRT_Client_ProcessIndex_Args_STRUCT_SIZE);
    pi.client = a.client;
    call!(api, PJRT_Client_ProcessIndex, pi).unwrap();
    assert_eq!(pi.process_index, 1);
    destroy_client(api, a.client);

    // A missing process: the get error comes back from create, naming the process.
    let opts = [nv_int("num_nodes", 3), nv_int("node_id", 0)];
    a.create_options = opts.as_ptr();
    a.num_options = opts.len();
    store.entries.clear();
    let (code, msg) = call!(api, PJRT_Client_Create, a).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_DEADLINE_EXCEEDED);
    assert!(
        msg.contains("waiting for process 1") && msg.contains("deadline exceeded"),
        "{msg}"
    );
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());

    // Without the knob the options are just recorded.
    let api = api_from("");
    call!(api, PJRT_Client_Create, a).unwrap();
    assert_eq!(devices(api, a.client).len(), 2);
    destroy_client(api, a.client);
}

// --------------------------------------------------------------------- memory

fn stats(api: Api, device: *mut sys::PJRT_Device) -> sys::PJRT_Device_MemoryStats_Args {
    let mut s: sys::PJRT_Device_MemoryStats_Args =
        new_args(sys::PJRT_Device_MemoryStats_Args_STRUCT_SIZE);
    s.device = device;
    call!(api, PJRT_Device_MemoryStats, s).unwrap();
    s
}

#[test]
fn memory_limit_fails_allocations_and_stats_report_use() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_MEMORY_LIMIT=1000");
    let client = create_client(api, &[]).unwrap();
    let dev = devices(api, client)[0];
    let data = [1.0f32; 200];
    let b1 = put_f32(api, client, dev, &data, &[200]).unwrap();
    let s = stats(api, dev);
    assert_eq!(
        (s.bytes_in_use, s.num_allocs, s.bytes_limit),
        (800, 1, 1000)
    );
    assert!(s.bytes_limit_is_set && s.largest_free_block_bytes_is_set);
    assert_eq!(s.largest_free_block_bytes, 200);
    let (code, msg) = put_f32(api, client, dev, &data, &[200]).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_RESOURCE_EXHAUSTED);
    assert!(msg.contains("out of memory on device 0"), "{msg}");
    // The other device has its own budget.
    let b2 = put_f32(api, client, devices(api, client)[1], &data, &[200]).unwrap();
    destroy_buffer(api, b1);
    let s = stats(api, dev);
    assert_eq!((s.bytes_in_use, s.peak_bytes_in_use), (0, 800));
    let b3 = put_f32(api, client, dev, &data, &[200]).unwrap();
    destroy_buffer(api, b2);
    destroy_buffer(api, b3);
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());

    // No limit: stats still count, and say there is no limit.
    let api = api_from("");
    let client = create_client(api, &[]).unwrap();
    let dev = devices(api, client)[0];
    let b = put_f32(api, client, dev, &data, &[200]).unwrap();
    let s = stats(api, dev);
    assert_eq!(s.bytes_in_use, 800);
    assert!(!s.bytes_limit_is_set);
    destroy_buffer(api, b);
    destroy_client(api, client);
    assert!(fake::configure_from_spec("RPJRT_FAKE_MEMORY_LIMIT=lots").is_err());
}

#[test]
fn version_struct_size_is_what_the_knob_says() {
    let _g = serial();
    let api = api_from("");
    assert_eq!(
        api.0.pjrt_api_version.struct_size,
        sys::PJRT_Api_Version_STRUCT_SIZE
    );
    let api = api_from("RPJRT_FAKE_VERSION_STRUCT_SIZE=0");
    assert_eq!(api.0.pjrt_api_version.struct_size, 0);
    // The version itself is still there.
    assert_eq!(api.0.pjrt_api_version.minor_version, 114);
    assert!(fake::configure_from_spec("RPJRT_FAKE_VERSION_STRUCT_SIZE=-1").is_err());
    fake::configure_from_spec("").unwrap();
}
