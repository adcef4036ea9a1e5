//! Triton kernels compiled by the plugin.
//!
//! GPU plugins of some versions carry the Triton extension (`PJRT_Triton_Compile`): Triton
//! IR (the `tt` MLIR dialect, as text or bytecode) goes in, GPU assembly (PTX on CUDA)
//! comes out, with the shared memory the kernel needs. No `triton` package is involved:
//! the compiler is the one inside the plugin. Launching the result is the caller's
//! business (for CUDA, `rpjrt-cuda` loads PTX and launches it on XLA's stream).
//!
//! A plugin without the extension gives [`Error::Unsupported`] naming
//! `PJRT_Triton_Compile` and the Triton extension.
//!
//! ```no_run
//! # fn main() -> rpjrt::Result<()> {
//! use rpjrt::triton::TritonCompileOptions;
//! let client = rpjrt::Client::from_path("/path/to/cuda_plugin.so")?;
//! let ir = std::fs::read("kernel.ttir").unwrap();
//! let options = TritonCompileOptions::new("sm_90")?.num_warps(4)?.num_stages(3)?;
//! let kernel = client.triton_compile(&ir, &options)?;
//! println!("{} bytes of PTX, {} bytes of shared memory", kernel.asm.len(), kernel.shared_mem_bytes);
//! # Ok(()) }
//! ```

use crate::client::{Client, Device};
use crate::error::{Error, Result};
use crate::plugin::Plugin;
use crate::raw;
use crate::raw::value::Value;

/// The most warps per CTA [`TritonCompileOptions::num_warps`] accepts (32 warps of 32
/// threads is the 1024-thread limit of a CUDA block).
pub const MAX_NUM_WARPS: i32 = 32;
/// The most CTAs per cluster [`TritonCompileOptions::num_ctas`] accepts (the largest
/// thread-block cluster a GPU offers, 16 on Hopper and later).
pub const MAX_NUM_CTAS: i32 = 16;
/// The most software-pipelining stages [`TritonCompileOptions::num_stages`] accepts.
pub const MAX_NUM_STAGES: i32 = 16;

/// How to compile a Triton kernel: target architecture, warps, CTAs and pipelining stages.
///
/// Every setter checks its value and says what was wrong; the defaults are Triton's own
/// (4 warps, 1 CTA, 3 stages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TritonCompileOptions {
    arch: String,
    num_warps: i32,
    num_ctas: i32,
    num_stages: i32,
}

impl TritonCompileOptions {
    /// Options for architecture `arch`: a CUDA compute capability as `"9.0"` or `"sm_90"`
    /// (`"sm_90a"` becomes `"9.0a"`, the form XLA's Triton compiler parses), or another
    /// vendor's name (`"gfx942"` for ROCm), passed as given.
    pub fn new(arch: &str) -> Result<TritonCompileOptions> {
        Ok(TritonCompileOptions {
            arch: normalize_arch(arch)?,
            num_warps: 4,
            num_ctas: 1,
            num_stages: 3,
        })
    }

    /// Options for the architecture of `device`: its `compute_capability` attribute
    /// (`"9.0"`), which the CUDA plugin gives every device. Another device gets an error
    /// saying to name the architecture.
    pub fn for_device(device: &Device) -> Result<TritonCompileOptions> {
        let found = device
            .attributes()
            .iter()
            .find(|(n, _)| n == "compute_capability");
        match found.map(|(_, v)| v) {
            Some(Value::String(cc)) => TritonCompileOptions::new(cc),
            _ => Err(Error::invalid(format!(
                "device {} (kind {:?}) has no compute_capability attribute to take the \
                 Triton architecture from; name it, e.g. \"9.0\" or \"sm_90\"",
                device.id(),
                device.kind()
            ))),
        }
    }

    /// Options for the architecture of `client`'s first addressable device (see
    /// [`TritonCompileOptions::for_device`]); `Unsupported` naming `PJRT_Triton_Compile`
    /// when the client's plugin has no Triton extension.
    pub fn for_client(client: &Client) -> Result<TritonCompileOptions> {
        // A plugin without the extension: say so, rather than ask for an arch that could
        // never be used (a CPU device has no compute capability).
        raw::triton::check_compile(client.plugin().inner.api)?;
        let devices = client.addressable_devices()?;
        let first = devices.first().ok_or_else(|| {
            Error::invalid("the client has no addressable device to take the Triton arch from")
        })?;
        TritonCompileOptions::for_device(first)
    }

    /// Warps per CTA: a power of two from 1 to [`MAX_NUM_WARPS`].
    pub fn num_warps(mut self, n: i32) -> Result<Self> {
        if !(1..=MAX_NUM_WARPS).contains(&n) || n.count_ones() != 1 {
            return Err(Error::invalid(format!(
                "num_warps must be a power of two from 1 to {MAX_NUM_WARPS}, got {n}"
            )));
        }
        self.num_warps = n;
        Ok(self)
    }

    /// CTAs per cluster: a power of two from 1 to [`MAX_NUM_CTAS`] (more than 1 needs a
    /// GPU with thread-block clusters, compute capability 9.0 or newer).
    pub fn num_ctas(mut self, n: i32) -> Result<Self> {
        if !(1..=MAX_NUM_CTAS).contains(&n) || n.count_ones() != 1 {
            return Err(Error::invalid(format!(
                "num_ctas must be a power of two from 1 to {MAX_NUM_CTAS}, got {n}"
            )));
        }
        self.num_ctas = n;
        Ok(self)
    }

    /// Software-pipelining stages: 1 to [`MAX_NUM_STAGES`].
    pub fn num_stages(mut self, n: i32) -> Result<Self> {
        if !(1..=MAX_NUM_STAGES).contains(&n) {
            return Err(Error::invalid(format!(
                "num_stages must be from 1 to {MAX_NUM_STAGES}, got {n}"
            )));
        }
        self.num_stages = n;
        Ok(self)
    }

    /// The architecture as it is sent to the plugin (`"9.0"` for `"sm_90"`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Warps per CTA.
    pub fn warps(&self) -> i32 {
        self.num_warps
    }

    /// CTAs per cluster.
    pub fn ctas(&self) -> i32 {
        self.num_ctas
    }

    /// Pipelining stages.
    pub fn stages(&self) -> i32 {
        self.num_stages
    }
}

/// The architecture name the plugin gets, or an error saying what was wrong with `arch`.
fn normalize_arch(arch: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::invalid(format!(
            "arch {arch:?} {why}; expected a CUDA compute capability such as \"9.0\" or \
             \"sm_90\", or another vendor's architecture name such as \"gfx942\""
        ))
    };
    if arch.is_empty() {
        return Err(bad("is empty"));
    }
    if !arch.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad("has spaces or characters other than printable ASCII"));
    }
    if arch.len() > 64 {
        return Err(bad("is longer than 64 characters"));
    }
    // "sm_90" / "sm_90a" / "sm_100": the digits are major then one minor digit.
    if let Some(rest) = arch.strip_prefix("sm_") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let suffix = &rest[digits..];
        if digits < 2 || !suffix.bytes().all(|b| b.is_ascii_lowercase()) || suffix.len() > 1 {
            return Err(bad(
                "is not sm_ followed by two or more digits and an optional letter",
            ));
        }
        let (major, minor) = rest[..digits].split_at(digits - 1);
        let major: u32 = major.parse().map_err(|_| bad("has too many digits"))?;
        return Ok(format!("{major}.{minor}{suffix}"));
    }
    // "9.0" / "9.0a": digits, a dot, digits, an optional letter.
    if arch.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        let ok = arch.split_once('.').is_some_and(|(major, minor)| {
            let m = minor.trim_end_matches(|c: char| c.is_ascii_lowercase());
            !major.is_empty()
                && major.bytes().all(|b| b.is_ascii_digit())
                && !m.is_empty()
                && m.bytes().all(|b| b.is_ascii_digit())
                && minor.len() - m.len() <= 1
        });
        if !ok {
            return Err(bad("is not a compute capability MAJOR.MINOR"));
        }
    }
    Ok(arch.to_string())
}

/// A kernel the plugin compiled from Triton IR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TritonKernel {
    /// The assembly (PTX text on CUDA). Empty when the plugin wrote the kernel to a file
    /// instead ([`TritonKernel::path`]).
    pub asm: Vec<u8>,
    /// Dynamic shared memory the kernel needs at launch, in bytes.
    pub shared_mem_bytes: u64,
    /// The thread-block cluster dimensions `[x, y, z]` to launch with. Only plugins with
    /// version 1 of the extension report them (later versions dropped the fields; launch
    /// those kernels without a cluster, or with `num_ctas` CTAs along x).
    pub cluster_dims: Option<[u32; 3]>,
    /// A file the plugin wrote the compiled kernel to (ROCm's HSACO), when it did so
    /// instead of returning assembly.
    pub path: Option<String>,
}

impl TritonKernel {
    /// The assembly as text, if it is UTF-8 (PTX always is).
    pub fn asm_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.asm).ok()
    }

    /// The name of the first `.entry` in PTX assembly (the function to launch), if any.
    pub fn entry_name(&self) -> Option<&str> {
        let text = self.asm_text()?;
        text.lines().find_map(|line| {
            let after = line.split(".entry").nth(1)?;
            let name = after
                .trim_start()
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()?;
            (!name.is_empty()).then_some(name)
        })
    }
}

/// Whether `plugin` can compile Triton kernels (it has the Triton extension with its
/// compile entry).
pub fn is_available(plugin: &Plugin) -> bool {
    raw::triton::has_compile(plugin.inner.api).unwrap_or(false)
}

/// Compiles Triton IR `module` (MLIR text or bytecode) with the plugin's Triton compiler.
///
/// The extension belongs to the plugin, not to a client, so no client is needed; see
/// [`Client::triton_compile`] for the same through a client. Errors: `InvalidArgument`
/// for an empty module, `Unsupported` naming `PJRT_Triton_Compile` when the plugin has no
/// Triton extension, and the plugin's own error when the compiler rejects the module.
pub fn compile(
    plugin: &Plugin,
    module: &[u8],
    options: &TritonCompileOptions,
) -> Result<TritonKernel> {
    if module.is_empty() {
        return Err(Error::invalid(
            "the Triton module is empty; expected Triton IR as MLIR text or bytecode",
        ));
    }
    let out = raw::triton::compile(
        plugin.inner.api,
        &raw::triton::TritonRequest {
            module,
            arch: options.arch.as_bytes(),
            num_warps: options.num_warps,
            num_ctas: options.num_ctas,
            num_stages: options.num_stages,
        },
    )?;
    let plugin_said = |what: String| Error::Pjrt {
        entry: "PJRT_Triton_Compile",
        code: crate::error::Code::Internal,
        message: what,
    };
    let shared_mem_bytes = u64::try_from(out.smem_bytes).map_err(|_| {
        plugin_said(format!(
            "the plugin reported {} bytes of shared memory, a negative size",
            out.smem_bytes
        ))
    })?;
    let cluster_dims = match out.cluster_dims {
        None => None,
        Some(d) => {
            Some(d.map(|v| u32::try_from(v).unwrap_or(0))).filter(|d| d.iter().all(|&v| v > 0))
        }
    };
    if out.cluster_dims.is_some() && cluster_dims.is_none() {
        return Err(plugin_said(format!(
            "the plugin reported cluster dimensions {:?}; each must be at least 1",
            out.cluster_dims.unwrap_or_default()
        )));
    }
    let path = match out.path {
        None => None,
        Some(p) => Some(String::from_utf8(p).map_err(|_| {
            plugin_said("the plugin returned an output path that is not UTF-8".into())
        })?),
    };
    if out.asm.is_empty() && path.is_none() {
        return Err(plugin_said(
            "the plugin reported success but returned neither assembly nor an output path".into(),
        ));
    }
    Ok(TritonKernel {
        asm: out.asm,
        shared_mem_bytes,
        cluster_dims,
        path,
    })
}

impl Client {
    /// Compiles Triton IR with this client's plugin: [`compile`] on [`Client::plugin`],
    /// refused once the client is closed.
    pub fn triton_compile(
        &self,
        module: &[u8],
        options: &TritonCompileOptions,
    ) -> Result<TritonKernel> {
        self.core().check("triton_compile")?;
        compile(self.plugin(), module, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_forms() {
        let a = |s: &str| TritonCompileOptions::new(s).map(|o| o.arch().to_string());
        assert_eq!(a("sm_90").unwrap(), "9.0");
        assert_eq!(a("sm_90a").unwrap(), "9.0a");
        assert_eq!(a("sm_80").unwrap(), "8.0");
        assert_eq!(a("sm_100").unwrap(), "10.0");
        assert_eq!(a("sm_120a").unwrap(), "12.0a");
        assert_eq!(a("9.0").unwrap(), "9.0");
        assert_eq!(a("10.0a").unwrap(), "10.0a");
        assert_eq!(a("gfx942").unwrap(), "gfx942");
        for bad in [
            "", "sm_", "sm_9", "sm_x0", "sm_90ab", "9", "9.", ".0", "9.x", "sm 90", "9.0\0",
        ] {
            let e = a(bad).unwrap_err().to_string();
            assert!(e.contains("arch") && e.contains("sm_90"), "{bad:?}: {e}");
        }
        assert!(a(&"x".repeat(65)).is_err());
    }

    #[test]
    fn counts_are_checked_and_named() {
        let o = TritonCompileOptions::new("9.0").unwrap();
        assert_eq!((o.warps(), o.ctas(), o.stages()), (4, 1, 3));
        for n in [1, 2, 4, 8, 16, 32] {
            assert_eq!(o.clone().num_warps(n).unwrap().warps(), n);
        }
        for n in [0, -4, 3, 12, 64] {
            let e = o.clone().num_warps(n).unwrap_err().to_string();
            assert!(e.contains("num_warps") && e.contains(&n.to_string()), "{e}");
        }
        for n in [0, 3, 32] {
            let e = o.clone().num_ctas(n).unwrap_err().to_string();
            assert!(e.contains("num_ctas"), "{e}");
        }
        assert_eq!(o.clone().num_ctas(16).unwrap().ctas(), 16);
        for n in [0, -1, 17] {
            let e = o.clone().num_stages(n).unwrap_err().to_string();
            assert!(e.contains("num_stages"), "{e}");
        }
        assert_eq!(o.num_stages(1).unwrap().stages(), 1);
    }

    #[test]
    fn entry_name_from_ptx() {
        let k = TritonKernel {
            asm: b".version 8.0\n.visible .entry add_kernel(\n .param .u64 p\n)\n{ ret; }\n"
                .to_vec(),
            shared_mem_bytes: 0,
            cluster_dims: None,
            path: None,
        };
        assert_eq!(k.entry_name(), Some("add_kernel"));
        let none = TritonKernel {
            asm: b"no entry here".to_vec(),
            ..k
        };
        assert_eq!(none.entry_name(), None);
    }
}
