//! The Profiler extension is declared `@unchecked` (its header is outside the measured
//! set): its sizes and offsets, worked out by hand from the C headers for LP64.

use std::mem::{offset_of, size_of};

use rpjrt_sys::*;

#[test]
fn profiler_extension_layout() {
    assert_eq!(size_of::<PJRT_Extension_Base>(), 24);
    assert_eq!(offset_of!(PJRT_Profiler_Extension, profiler_api), 24);
    assert_eq!(offset_of!(PJRT_Profiler_Extension, traceme_context_id), 32);
    assert_eq!(PJRT_Profiler_Extension_STRUCT_SIZE, 40);
}

#[test]
fn profiler_api_layout() {
    assert_eq!(offset_of!(PLUGIN_Profiler_Api, error_destroy), 16);
    assert_eq!(offset_of!(PLUGIN_Profiler_Api, create), 40);
    assert_eq!(offset_of!(PLUGIN_Profiler_Api, collect_data), 72);
    assert_eq!(PLUGIN_Profiler_Api_STRUCT_SIZE, 80);
}

#[test]
fn profiler_argument_layouts() {
    assert_eq!(PLUGIN_Profiler_Error_Destroy_Args_STRUCT_SIZE, 24);
    assert_eq!(PLUGIN_Profiler_Error_Message_Args_STRUCT_SIZE, 40);
    assert_eq!(PLUGIN_Profiler_Error_GetCode_Args_STRUCT_SIZE, 28);
    assert_eq!(PLUGIN_Profiler_Create_Args_STRUCT_SIZE, 32);
    assert_eq!(PLUGIN_Profiler_Destroy_Args_STRUCT_SIZE, 16);
    assert_eq!(PLUGIN_Profiler_Start_Args_STRUCT_SIZE, 16);
    assert_eq!(PLUGIN_Profiler_Stop_Args_STRUCT_SIZE, 16);
    assert_eq!(PLUGIN_Profiler_CollectData_Args_STRUCT_SIZE, 32);
    assert_eq!(offset_of!(PLUGIN_Profiler_CollectData_Args, buffer), 16);
}
