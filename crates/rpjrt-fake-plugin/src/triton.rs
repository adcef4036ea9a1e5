//! The Triton extension's `compile`: deterministic, PTX-looking output derived from the
//! module and the options, in the args layout of extension version 1 or 2
//! (`RPJRT_FAKE_TRITON_VERSION`).
//!
//! The output strings are owned by the caller, as the header says, and allocated with C++
//! `new[]` as XLA's implementation does, so a caller frees them with `delete[]`.

use std::ffi::c_void;
use std::mem::offset_of;

use rpjrt_sys as sys;

use crate::error::Fail;
use crate::named::read_str;
use crate::state::State;

#[link(name = "stdc++")]
extern "C" {
    /// C++ `operator new[](std::size_t, const std::nothrow_t&)`: null instead of throwing.
    #[link_name = "_ZnamRKSt9nothrow_t"]
    fn cxx_new_array_nothrow(size: usize, tag: *const c_void) -> *mut c_void;
    /// C++ `std::nothrow`.
    #[link_name = "_ZSt7nothrow"]
    static CXX_NOTHROW: u8;
}

/// FNV-1a, 64 bits: the fake's fingerprint of a module.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The text the fake "compiles" a module to, and its shared memory: the PTX target is
/// `sm_` + the arch's digits; shared memory is 1 KiB per stage per warp.
pub(crate) fn fake_output(
    module: &[u8],
    arch: &str,
    num_warps: i32,
    num_ctas: i32,
    num_stages: i32,
) -> (String, i64) {
    let hash = fnv1a(module);
    let target: String = arch.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let text = format!(
        "//\n// rpjrt-fake-plugin Triton output (not a real kernel)\n\
         // module: {} bytes, fnv1a64 {hash:016x}\n\
         // num_warps={num_warps} num_ctas={num_ctas} num_stages={num_stages}\n//\n\
         .version 8.0\n.target sm_{target}\n.address_size 64\n\n\
         .visible .entry fake_triton_{hash:016x}()\n.maxntid {}, 1, 1\n{{\n\tret;\n}}\n",
        module.len(),
        num_warps * 32
    );
    (text, 1024 * i64::from(num_stages) * i64::from(num_warps))
}

/// `bytes` copied into a C++ `new[]` block the caller owns: `(pointer, length)`.
fn cxx_copy(bytes: &[u8]) -> Result<(*const std::ffi::c_char, usize), Fail> {
    // SAFETY: operator new[] (nothrow) takes any size and returns null on failure;
    // `CXX_NOTHROW` is libstdc++'s `std::nothrow` object, only its address is used.
    let p = unsafe { cxx_new_array_nothrow(bytes.len().max(1), (&raw const CXX_NOTHROW).cast()) };
    if p.is_null() {
        return Err(crate::error::internal(
            "fake plugin: out of memory for Triton output",
        ));
    }
    // SAFETY: `p` is a fresh block of at least `bytes.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len()) };
    Ok((p.cast_const().cast(), bytes.len()))
}

entry!(PJRT_Triton_Compile, |a, state| { compile(a, state)? });

fn compile(a: &mut sys::PJRT_Triton_Compile_Args, state: &State) -> Result<(), Fail> {
    if a.module.is_null() || a.module_size == 0 {
        bail!("fake plugin: PJRT_Triton_Compile: the module is empty");
    }
    // SAFETY: per the C API, `module` points at `module_size` bytes.
    let module = unsafe { std::slice::from_raw_parts(a.module.cast::<u8>(), a.module_size) };
    // SAFETY: per the C API, `arch_name` points at `arch_name_size` bytes.
    let arch = unsafe { read_str(a.arch_name, a.arch_name_size) };
    if arch.is_empty() {
        bail!("fake plugin: PJRT_Triton_Compile: empty arch_name");
    }
    if a.num_warps < 1 || a.num_ctas < 1 || a.num_stages < 1 {
        bail!(
            "fake plugin: PJRT_Triton_Compile: num_warps {}, num_ctas {}, num_stages {} must \
             all be positive",
            a.num_warps,
            a.num_ctas,
            a.num_stages
        );
    }
    if module.windows(6).any(|w| w == b"tt.bad") {
        bail!("fake plugin: PJRT_Triton_Compile: the module contains tt.bad");
    }
    let (text, smem) = fake_output(module, &arch, a.num_warps, a.num_ctas, a.num_stages);
    let version = state.config.triton_version;
    a.out_smem_bytes = smem;
    let tail = offset_of!(sys::PJRT_Triton_Compile_Args, out_path);
    if version == 1 {
        // Version 1: asm, then the cluster dims (num_ctas, 1, 1) where version 2 has the path.
        let (p, n) = cxx_copy(text.as_bytes())?;
        a.out_asm = p;
        a.out_asm_size = n;
        let dims = [a.num_ctas, 1, 1];
        let base: *mut sys::PJRT_Triton_Compile_Args = a;
        // SAFETY: bytes tail..tail+12 lie inside the args (checked struct_size covers
        // out_path_size, which ends at tail+16).
        unsafe {
            base.cast::<u8>()
                .add(tail)
                .cast::<[i32; 3]>()
                .write_unaligned(dims)
        };
    } else if arch.starts_with("gfx") {
        // Version 2, ROCm-like: the kernel "goes to a file"; the path names none that exists.
        let path = format!(
            "/nonexistent/rpjrt-fake-triton-{:016x}.hsaco",
            fnv1a(module)
        );
        let (p, n) = cxx_copy(path.as_bytes())?;
        a.out_asm = std::ptr::null();
        a.out_asm_size = 0;
        a.out_path = p;
        a.out_path_size = n;
    } else {
        let (p, n) = cxx_copy(text.as_bytes())?;
        a.out_asm = p;
        a.out_asm_size = n;
        a.out_path = std::ptr::null();
        a.out_path_size = 0;
    }
    Ok(())
}
