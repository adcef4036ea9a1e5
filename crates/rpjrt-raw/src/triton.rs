//! The Triton extension: `PJRT_Triton_Compile` (Triton IR in, GPU assembly out).
//!
//! The extension struct is the base plus one function slot; what changed between its
//! versions is the args struct, and the plugin does not say which version it implements
//! (no version field, and the extension struct has the same size in all of them):
//!
//! - version 1: after `out_smem_bytes` (offset 72) come three `int`s, the cluster
//!   dimensions `x, y, z` (offsets 80, 84, 88); the plugin requires `struct_size >= 92`.
//! - version 2 (declared in rpjrt-sys): after `out_smem_bytes` come `out_path` and
//!   `out_path_size` (offsets 80 and 88, a file path for ROCm's HSACO output); the plugin
//!   requires `struct_size >= 80`, and when it is larger it always writes both fields:
//!   null/0 when the output is assembly text (CUDA), the path with a null `out_asm` when
//!   the output is a file.
//! - version 3 appends an output format and a binary (SPIR-V); a caller sending the
//!   version-2 size gets version-2 behaviour.
//!
//! So rpjrt sends the version-2 size (96 bytes) with every output field zeroed, which every
//! version accepts and none writes past, and reads the answer without guessing: assembly
//! with a non-zero tail can only be version 1 (version 2 zeroes the path when it returns
//! assembly), so the tail is the cluster dimensions; otherwise the tail is version 2's path.
//!
//! Ownership: `out_asm` and `out_path` are owned by the caller and were allocated by the
//! plugin with C++ `new[]` (the header marks them "owned"; there is no destroy entry; XLA's
//! own caller frees them with `delete[]`). rpjrt copies them out and frees them with the C++
//! runtime's `operator delete[]`, the libstdc++ the core already links for its exception
//! guard, the same runtime the plugins use.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

use rpjrt_sys as sys;

use super::extension::{Extension, ExtensionView};
use super::{guard, Api};
use crate::error::{Error, Result};

extern "C" {
    /// C++ `operator delete[](void*)` (Itanium mangling), from libstdc++.
    #[link_name = "_ZdaPv"]
    fn cxx_delete_array(p: *mut c_void);
}

/// The Triton extension for the typed extension access (`Api::extension`).
pub struct Triton;

// SAFETY: `PJRT_Triton_Extension` is rpjrt-sys's declaration of the Triton extension (type
// 7): the base followed by the one `compile` slot, in every version of the extension.
unsafe impl Extension for Triton {
    const TYPE_ID: i32 = sys::PJRT_Extension_Type_Triton as i32;
    const NAME: &'static str = "PJRT_Triton_Extension";
    type Struct = sys::PJRT_Triton_Extension;
    fn required_size(_minor: i32) -> usize {
        offset_of!(sys::PJRT_Triton_Extension, compile) + size_of::<usize>()
    }
}

/// What the plugin's Triton compiler returned, copied out of its buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TritonOutput {
    /// Assembly text (PTX for CUDA); empty when the plugin returned a path instead.
    pub asm: Vec<u8>,
    /// Shared memory the kernel needs, in bytes, as the plugin reported it.
    pub smem_bytes: i64,
    /// Cluster dimensions: only version-1 plugins report them.
    pub cluster_dims: Option<[i32; 3]>,
    /// A file the plugin wrote the compiled kernel to (ROCm HSACO), if it returned one.
    pub path: Option<Vec<u8>>,
}

/// Arguments of one compile, as plain values.
pub struct TritonRequest<'a> {
    /// Triton IR (MLIR text or bytecode).
    pub module: &'a [u8],
    /// Target architecture, as the plugin expects it (`9.0` for CUDA).
    pub arch: &'a [u8],
    /// Warps per CTA.
    pub num_warps: i32,
    /// CTAs per cluster.
    pub num_ctas: i32,
    /// Software-pipelining stages.
    pub num_stages: i32,
}

/// The error for a plugin without the Triton extension (or with its slot empty).
fn not_offered(api: &Api, what: &str) -> Error {
    Error::Unsupported {
        what: what.to_string(),
        needs: api.version(),
        plugin: api.version(),
        missing_slot: true,
    }
}

/// Whether the plugin offers `PJRT_Triton_Compile` (extension present, slot non-null).
pub fn has_compile(api: &Api) -> Result<bool> {
    Ok(check_compile(api).is_ok())
}

/// `Ok` where the plugin offers `PJRT_Triton_Compile`, else the error [`compile`] would give.
pub fn check_compile(api: &Api) -> Result<()> {
    compile_fn(api).map(|_| ())
}

fn compile_fn(api: &Api) -> Result<sys::PJRT_Triton_Compile> {
    let view: ExtensionView<Triton> = api.extension::<Triton>()?.ok_or_else(|| {
        not_offered(
            api,
            "PJRT_Triton_Compile (the plugin has no Triton extension, PJRT_Triton_Extension)",
        )
    })?;
    view.read::<Option<sys::PJRT_Triton_Compile>>(offset_of!(sys::PJRT_Triton_Extension, compile))
        .flatten()
        .ok_or_else(|| {
            not_offered(
                api,
                "PJRT_Triton_Compile (the plugin's Triton extension leaves its compile slot empty)",
            )
        })
}

/// Copies `len` bytes at `ptr` (owned by us, allocated by the plugin with `new[]`) and frees
/// them. A null pointer gives an empty vector.
///
/// # Safety
/// A non-null `ptr` must be a `new[]` allocation of at least `len` bytes that nobody else
/// frees.
unsafe fn take_owned(ptr: *const std::ffi::c_char, len: usize) -> Vec<u8> {
    if ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller promises `len` readable bytes at `ptr`.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }.to_vec();
    // SAFETY: the plugin allocated it with `new[]` and gave ownership to the caller; it is
    // freed once, here.
    unsafe { cxx_delete_array(ptr.cast_mut().cast()) };
    bytes
}

/// Calls `PJRT_Triton_Compile` and copies the results out (see the module docs for how
/// the version of the plugin's args struct is told apart).
pub fn compile(api: &Api, req: &TritonRequest<'_>) -> Result<TritonOutput> {
    const ENTRY: &str = "PJRT_Triton_Compile";
    let f = compile_fn(api)?;
    if guard::forked_since(api.fork_generation) {
        return Err(api.forked_error(ENTRY));
    }
    // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
    let mut a: sys::PJRT_Triton_Compile_Args =
        unsafe { super::transfer::zeroed_args(sys::PJRT_Triton_Compile_Args_STRUCT_SIZE) };
    a.module = req.module.as_ptr().cast();
    a.module_size = req.module.len();
    a.arch_name = req.arch.as_ptr().cast();
    a.arch_name_size = req.arch.len();
    a.num_warps = req.num_warps;
    a.num_ctas = req.num_ctas;
    a.num_stages = req.num_stages;
    // SAFETY: `f` is an `extern "C"` function taking one pointer and returning one pointer;
    // as `RawEntry` it has the same ABI, only the pointee types are erased.
    let raw: guard::RawEntry =
        unsafe { std::mem::transmute::<sys::PJRT_Triton_Compile, guard::RawEntry>(f) };
    let args: *mut sys::PJRT_Triton_Compile_Args = &mut a;
    // SAFETY: the plugin's compile entry; `a` is a complete args struct whose input
    // pointers (module, arch) borrow slices alive for the call. The guard catches a C++
    // exception escaping from it.
    let err = match unsafe { guard::call(raw, args.cast()) } {
        Ok(e) => e.cast::<sys::PJRT_Error>(),
        Err(what) => return Err(api.exception_error(ENTRY, what)),
    };
    if !err.is_null() {
        return Err(api.take_error(err, ENTRY));
    }
    // Bytes 80..96: version 2's path (pointer, size), or version 1's cluster dims.
    let tail = offset_of!(sys::PJRT_Triton_Compile_Args, out_path);
    let base = args.cast::<u8>();
    // SAFETY: `tail..tail + 16` lies inside `a` (out_path and out_path_size); reading it
    // as three i32 is reading plain integers.
    let dims: [i32; 3] = unsafe { base.add(tail).cast::<[i32; 3]>().read_unaligned() };
    let tail_set = !a.out_path.is_null() || a.out_path_size != 0;
    let version1 = !a.out_asm.is_null() && tail_set;
    // SAFETY: out_asm is null or a `new[]` block of out_asm_size bytes now owned by us.
    let asm = unsafe { take_owned(a.out_asm, a.out_asm_size) };
    let (cluster_dims, path) = if version1 {
        (Some(dims), None)
    } else if !a.out_path.is_null() {
        // SAFETY: version 2 returned a path: a `new[]` block of out_path_size bytes now
        // owned by us (version 1 always returns assembly, so this is not its tail).
        (
            None,
            Some(unsafe { take_owned(a.out_path, a.out_path_size) }),
        )
    } else {
        (None, None)
    };
    Ok(TritonOutput {
        asm,
        smem_bytes: a.out_smem_bytes,
        cluster_dims,
        path,
    })
}
