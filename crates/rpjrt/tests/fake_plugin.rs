//! Negotiation and error paths, driven by the scriptable fake plugin.
//!
//! Each test loads its own copy of the fake plugin's library, configured through the
//! `RPJRT_FAKE_*` knobs that the copy reads once, at its first `GetPjrtApi` call. A lock
//! serialises "set knobs, load" so parallel tests do not see each other's settings.
//! The harness builds the fake plugin when it is missing (`common::fake_plugin_library`);
//! these tests run under valgrind in CI as well (scripts/valgrind.sh).

mod common;

use rpjrt::{Client, ClientOptions, CompileOptions, ElementType, Error, Plugin, Program, Value};

const KNOBS: [&str; 10] = [
    "RPJRT_FAKE_VERSION",
    "RPJRT_FAKE_TABLE_SLOTS",
    "RPJRT_FAKE_NULL_SLOTS",
    "RPJRT_FAKE_FAIL",
    "RPJRT_FAKE_MIN_STRUCT_SIZE",
    "RPJRT_FAKE_EXTENSIONS",
    "RPJRT_FAKE_ATTRIBUTES",
    "RPJRT_FAKE_EVENT_ERROR",
    "RPJRT_FAKE_ALLOWED_OPTIONS",
    "RPJRT_FAKE_NULL_API",
];

const PROGRAM: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n";

/// Loads a fresh copy of the fake plugin with the given knobs.
fn fake(knobs: &[(&str, &str)]) -> rpjrt::Result<Plugin> {
    common::load_fake(knobs, &KNOBS)
}

fn client(knobs: &[(&str, &str)]) -> Client {
    let p = fake(knobs).expect("fake plugin loads");
    Client::new(&p, &ClientOptions::new()).expect("client")
}

#[test]
fn default_fake_reports_version_table_and_extensions() {
    let p = fake(&[]).unwrap();
    assert_eq!(p.version().to_string(), "0.114");
    assert_eq!(p.table_slots(), 138);
    assert_eq!(p.table_size(), 40 + 8 * 138);
    assert!(p.extensions().layouts().is_some());
    assert!(p.extensions().ffi().is_some());
    assert!(p.extensions().stream().is_none());
    assert_eq!(p.extensions().all().len(), 2);
}

#[test]
fn every_attribute_kind_is_decoded() {
    let p = fake(&[(
        "RPJRT_FAKE_ATTRIBUTES",
        "s=string:hello;i=int64:-7;l=int64list:1,2,3;f=float:0.5;b=bool:true",
    )])
    .unwrap();
    assert_eq!(p.attribute("s"), Some(&Value::String("hello".into())));
    assert_eq!(p.attribute("i"), Some(&Value::Int64(-7)));
    assert_eq!(p.attribute("l"), Some(&Value::Int64List(vec![1, 2, 3])));
    assert_eq!(p.attribute("f"), Some(&Value::Float(0.5)));
    assert_eq!(p.attribute("b"), Some(&Value::Bool(true)));
}

#[test]
fn oldest_supported_version_works() {
    let p = fake(&[("RPJRT_FAKE_VERSION", "0.57")]).unwrap();
    assert_eq!(p.version().minor, 57);
    assert!(
        p.table_slots() < 138,
        "0.57 has fewer slots: {}",
        p.table_slots()
    );
    let c = Client::new(&p, &ClientOptions::new()).unwrap();
    assert!(!c.devices().unwrap().is_empty());
    let exe = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap();
    let d = c.default_device().unwrap();
    let x = c
        .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
        .unwrap();
    let out = exe.execute(&[&x]).unwrap();
    assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn versions_before_057_are_refused() {
    let e = fake(&[("RPJRT_FAKE_VERSION", "0.56")]).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::PluginLoad { .. }), "{e:?}");
    assert!(msg.contains("0.56") && msg.contains("0.57"), "{msg}");
    assert!(msg.contains("fake-"), "names the path: {msg}");
}

#[test]
fn other_major_versions_are_refused() {
    let e = fake(&[("RPJRT_FAKE_VERSION", "1.3")]).unwrap_err();
    assert!(e.to_string().contains("major"), "{e}");
}

#[test]
fn null_table_is_refused() {
    let e = fake(&[("RPJRT_FAKE_NULL_API", "1")]).unwrap_err();
    assert!(e.to_string().contains("null"), "{e}");
}

#[test]
fn newer_plugin_than_our_layout_keeps_working() {
    // A table no longer than ours (the fake cannot grow past 0.114's), but a newer minor.
    let p = fake(&[("RPJRT_FAKE_VERSION", "0.200")]).unwrap();
    assert_eq!(p.version().minor, 200);
    assert_eq!(p.table_slots(), 138);
    let c = Client::new(&p, &ClientOptions::new()).unwrap();
    assert_eq!(c.platform_name().unwrap(), "fake");
}

#[test]
fn entry_beyond_the_table_is_unsupported_with_versions() {
    // Cut the table just before PJRT_Executable_Fingerprint.
    let slot = rpjrt_sys::PJRT_API_ENTRIES
        .iter()
        .position(|e| e.name == "PJRT_Executable_Fingerprint")
        .unwrap();
    let since = rpjrt_sys::PJRT_API_ENTRIES[slot].since_minor;
    let slots = slot.to_string();
    let c = client(&[
        ("RPJRT_FAKE_VERSION", "0.60"),
        ("RPJRT_FAKE_TABLE_SLOTS", &slots),
    ]);
    assert!(!c.plugin().has_entry("PJRT_Executable_Fingerprint"));
    let exe = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap();
    let e = exe.fingerprint().unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    assert!(msg.contains("PJRT_Executable_Fingerprint"), "{msg}");
    assert!(
        msg.contains(&format!("0.{since}")) && msg.contains("0.60"),
        "{msg}"
    );
}

#[test]
fn null_slot_is_unsupported() {
    let c = client(&[("RPJRT_FAKE_NULL_SLOTS", "PJRT_Buffer_CopyToMemory")]);
    assert!(!c.plugin().has_entry("PJRT_Buffer_CopyToMemory"));
    let d = c.default_device().unwrap();
    let m = d.default_memory().unwrap();
    let x = c.buffer_from_slice(&[1i32, 2], &[2], &d).unwrap();
    let e = x.copy_to_memory(&m).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Unsupported {
                missing_slot: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("PJRT_Buffer_CopyToMemory"), "{e}");
}

#[test]
fn forced_errors_carry_code_entry_and_message() {
    let c = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_Compile:INVALID_ARGUMENT:no such op frobnicate",
    )]);
    let e = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), rpjrt::Code::InvalidArgument);
    assert_eq!(e.entry(), Some("PJRT_Client_Compile"));
    let msg = e.to_string();
    assert!(
        msg.contains("no such op frobnicate") && msg.contains("PJRT_Client_Compile"),
        "{msg}"
    );
}

#[test]
fn struct_size_rejection_names_struct_sizes_and_versions() {
    let p = fake(&[("RPJRT_FAKE_MIN_STRUCT_SIZE", "PJRT_Client_Create_Args:200")]).unwrap();
    let e = Client::new(&p, &ClientOptions::new()).unwrap_err();
    match &e {
        Error::StructSize {
            struct_name,
            plugin_size,
            our_size,
            ..
        } => {
            assert_eq!(struct_name, "PJRT_Client_Create_Args");
            assert_eq!(*plugin_size, 200);
            assert_eq!(*our_size, rpjrt_sys::PJRT_Client_Create_Args_STRUCT_SIZE);
        }
        other => panic!("expected StructSize, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("0.114") && msg.contains("200"), "{msg}");
}

#[test]
fn failed_event_reports_its_error() {
    let c = client(&[(
        "RPJRT_FAKE_EVENT_ERROR",
        "PJRT_Buffer_ReadyEvent:INTERNAL:device fell over",
    )]);
    let d = c.default_device().unwrap();
    let x = c.buffer_from_slice(&[1.0f32; 4], &[4], &d).unwrap();
    let e = x.block_until_ready().unwrap_err();
    assert_eq!(e.code(), rpjrt::Code::Internal);
    assert!(e.to_string().contains("device fell over"), "{e}");
    let ev = x.ready_event().unwrap();
    assert!(ev.is_ready().unwrap());
    assert!(ev.error().unwrap().to_string().contains("device fell over"));
    // A done callback gets the same error, once, also on an event that completed already.
    let (tx, rx) = std::sync::mpsc::channel();
    ev.add_done_callback(move |r| tx.send(r).unwrap());
    let r = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
    assert!(r.unwrap_err().to_string().contains("device fell over"));
    assert!(rx
        .recv_timeout(std::time::Duration::from_millis(50))
        .is_err());
}

#[test]
fn create_options_of_every_kind_reach_the_plugin() {
    let p = fake(&[]).unwrap();
    let opts = ClientOptions::new()
        .set("fake_device_count", 3)
        .set("a_string", "x")
        .set("a_list", vec![1i64, 2])
        .set("a_float", 1.5f32)
        .set("a_bool", true);
    let c = Client::new(&p, &opts).unwrap();
    assert_eq!(c.devices().unwrap().len(), 3);
}

#[test]
fn rejected_create_option_is_an_error() {
    let p = fake(&[("RPJRT_FAKE_ALLOWED_OPTIONS", "cpu_device_count")]).unwrap();
    let e = Client::new(&p, &ClientOptions::new().set("bogus", 1)).unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
}

#[test]
fn closed_client_refuses_every_object() {
    let c = client(&[]);
    let d = c.default_device().unwrap();
    let x = c.buffer_from_slice(&[1u8, 2, 3, 4], &[4], &d).unwrap();
    let exe = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap();
    c.close().unwrap();
    assert!(c.is_closed());
    assert!(matches!(x.to_vec(), Err(Error::Closed(_))));
    assert!(matches!(exe.execute(&[&x]), Err(Error::Closed(_))));
    assert!(matches!(c.devices(), Err(Error::Closed(_))));
    assert!(matches!(
        c.buffer_from_slice(&[1u8], &[1], &d),
        Err(Error::Closed(_))
    ));
    // Dropping after close, in any order, is fine.
    drop(c);
    drop(exe);
    drop(x);
}

#[test]
fn objects_outlive_a_dropped_client_value() {
    let c = client(&[]);
    let d = c.default_device().unwrap();
    let x = c.buffer_from_slice(&[5i64, 6], &[2], &d).unwrap();
    drop(c);
    assert_eq!(x.to_vec_of::<i64>().unwrap(), vec![5, 6]);
    assert_eq!(x.element_type(), ElementType::S64);
}

#[test]
fn delete_twice_is_a_no_op() {
    let c = client(&[]);
    let d = c.default_device().unwrap();
    let x = c.buffer_from_slice(&[1.0f64], &[1], &d).unwrap();
    x.delete().unwrap();
    assert!(x.is_deleted());
    x.delete().unwrap();
    assert!(x.is_deleted());
    assert!(x.to_vec().unwrap_err().to_string().contains("deleted"));
}

#[test]
fn short_host_data_is_refused_before_the_plugin() {
    let c = client(&[]);
    let d = c.default_device().unwrap();
    let e = c
        .buffer_from_host(&[0u8; 15], ElementType::F32, &[4], None, &d, None)
        .unwrap_err();
    assert!(
        e.to_string().contains("15 bytes") && e.to_string().contains("16"),
        "{e}"
    );
    let e = c
        .buffer_from_host(
            &[0u8; 16],
            ElementType::F32,
            &[2, 2],
            Some(&[4, 16]),
            &d,
            None,
        )
        .unwrap_err();
    assert!(e.to_string().contains("byte_strides"), "{e}");
}

#[test]
fn typed_extension_access_checks_the_struct_size() {
    assert!(fake(&[]).unwrap().has_ffi_registration().unwrap());
    let none = fake(&[("RPJRT_FAKE_EXTENSIONS", "")]).unwrap();
    assert!(!none.has_ffi_registration().unwrap());
    // An FFI extension too short to hold register_handler is refused, not read past its end.
    let short = fake(&[("RPJRT_FAKE_EXTENSIONS", "5:24")]).unwrap();
    let e = short.has_ffi_registration().unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("PJRT_FFI_Extension"), "{e}");
}

/// A compile that runs out of memory is explained like any allocation: the figures of the
/// client's addressable devices (the fake reports them, without a limit here) and a hint.
#[test]
fn compile_out_of_memory_carries_the_devices_figures() {
    let c = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_Compile:RESOURCE_EXHAUSTED:no room for the constants",
    )]);
    let e = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), rpjrt::Code::ResourceExhausted, "{e}");
    assert_eq!(e.entry(), Some("PJRT_Client_Compile"));
    let r = e.oom_report().expect("a report");
    assert_eq!(r.devices.len(), 2, "{e}");
    let text = e.to_string();
    assert!(text.contains("no room for the constants"), "{text}");
    assert!(text.contains("request: compiling the program"), "{text}");
    assert!(
        text.contains("device 0 allocator: in use 0 bytes, limit not reported"),
        "{text}"
    );
    assert!(text.contains("hint: "), "{text}");
    // Errors of other codes pass unchanged.
    let c = client(&[("RPJRT_FAKE_FAIL", "PJRT_Client_Compile:INTERNAL:broken")]);
    let e = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap_err();
    assert!(
        e.oom_report().is_none() && matches!(e, Error::Pjrt { .. }),
        "{e:?}"
    );
}

#[test]
fn an_error_reading_an_errors_code_is_not_read_again() {
    // GetCode returning an error of its own was read through the same checked path, which
    // called GetCode again, without end: a stack overflow that aborted the process.
    let c = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Error_GetCode:INTERNAL:code unreadable",
    )]);
    let e = c
        .compile(
            &Program::mlir("func FAKE_COMPILE_ERROR"),
            &CompileOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code(), rpjrt::Code::Unknown, "{e:?}");
}

#[test]
fn a_user_event_needs_the_entry_that_completes_it() {
    // Without PJRT_Event_Set a user event could never complete: wait() blocked for ever.
    let c = client(&[("RPJRT_FAKE_NULL_SLOTS", "PJRT_Event_Set")]);
    let e = rpjrt::Event::new_user(&c).unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { .. }) && e.to_string().contains("PJRT_Event_Set"),
        "{e}"
    );
    let c = client(&[]);
    let ev = rpjrt::Event::new_user(&c).unwrap();
    ev.set(Ok(())).unwrap();
    ev.wait().unwrap();
}
