//! Error paths of transfers and layouts on the fake plugin: missing entries are
//! `Error::Unsupported` naming them, and the Layouts extension is never read past the
//! struct size the plugin gives it.

mod common;

use rpjrt::{Client, ClientOptions, Code, ElementType, Error};

const KNOBS: [&str; 3] = [
    "RPJRT_FAKE_NULL_SLOTS",
    "RPJRT_FAKE_EXTENSIONS",
    "RPJRT_FAKE_VERSION",
];

/// A client on a fresh copy of the fake plugin configured with `knobs`.
fn client(knobs: &[(&str, &str)]) -> Client {
    let p = common::load_fake(knobs, &KNOBS).expect("fake plugin loads");
    Client::new(&p, &ClientOptions::new()).expect("client")
}

fn unsupported(e: Error, needle: &str) {
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains(needle), "{e} does not name {needle}");
}

#[test]
fn missing_transfer_entries_are_unsupported() {
    let c = client(&[(
        "RPJRT_FAKE_NULL_SLOTS",
        "PJRT_Client_CreateBuffersForAsyncHostToDevice,PJRT_Client_CreateUninitializedBuffer,\
         PJRT_Client_CreateErrorBuffer,PJRT_Client_CreateAliasBuffer,PJRT_Buffer_CopyRawToHost",
    )]);
    let d = c.default_device().unwrap();
    unsupported(
        c.begin_upload(&[(ElementType::F32, vec![4])], &d, None)
            .unwrap_err(),
        "PJRT_Client_CreateBuffersForAsyncHostToDevice",
    );
    unsupported(
        c.create_uninitialized_buffer(ElementType::F32, &[4], &d, None)
            .unwrap_err(),
        "PJRT_Client_CreateUninitializedBuffer",
    );
    unsupported(
        c.create_error_buffer(Code::Internal, "x", ElementType::F32, &[4], &d, None)
            .unwrap_err(),
        "PJRT_Client_CreateErrorBuffer",
    );
    unsupported(
        c.create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap_err(),
        "PJRT_Client_CreateAliasBuffer",
    );
    let b = c
        .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
        .unwrap();
    unsupported(
        b.copy_raw_to_host(0, &mut [0u8; 4]).unwrap_err(),
        "PJRT_Buffer_CopyRawToHost",
    );
}

#[test]
fn layouts_extension_is_read_within_the_plugins_size() {
    // No extension at all.
    let c = client(&[("RPJRT_FAKE_EXTENSIONS", "")]);
    unsupported(
        c.default_layout(ElementType::F32, &[2]).unwrap_err(),
        "Layouts extension",
    );
    // A struct too short for the slots rpjrt calls: refused as a whole, never read.
    let c = client(&[("RPJRT_FAKE_EXTENSIONS", "Layouts:40")]);
    let e = c.default_layout(ElementType::F32, &[2]).unwrap_err();
    unsupported(
        e,
        "PJRT_Layouts_Extension (the plugin's struct has 40 bytes",
    );
    unsupported(c.layouts_extension_size().unwrap_err(), "40 bytes");
    // A full struct: the call reaches the fake, whose extension entries are UNIMPLEMENTED.
    let c = client(&[]);
    assert_eq!(c.layouts_extension_size().unwrap(), 80);
    let e = c.default_layout(ElementType::F32, &[2]).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e}");
    // The 0.81 layout of the struct (72 bytes) keeps its first six slots.
    let c = client(&[("RPJRT_FAKE_VERSION", "0.81")]);
    assert_eq!(c.layouts_extension_size().unwrap(), 72);
}
