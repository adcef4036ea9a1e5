//! Typed client create options for the CUDA PJRT plugin (`jax-cuda12-pjrt`,
//! `jax-cuda13-pjrt`).
//!
//! The plugin reads these named values at client creation: `allocator` (a string),
//! `memory_fraction` (a float), `preallocate` (a bool), `visible_devices` (a list of
//! int64 device ordinals) and `platform_name`. It rejects an unknown allocator only once a
//! GPU is there; [`CudaOptions::to_client_options`] checks everything up front so a mistake
//! is reported the same way with or without a GPU.

use std::fmt;
use std::str::FromStr;

use rpjrt::{ClientOptions, Error, Result};

/// The device memory allocator the CUDA plugin uses for buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Allocator {
    /// The plugin's choice (BFC today).
    Default,
    /// Allocate and free with the CUDA driver on each request (slow; no pooling).
    Platform,
    /// XLA's best-fit-with-coalescing pool, sized by `memory_fraction`.
    Bfc,
    /// CUDA's stream-ordered allocator (`cudaMallocAsync`).
    CudaAsync,
}

impl Allocator {
    /// Every allocator, in the order the plugin documents them.
    pub const ALL: [Allocator; 4] = [
        Allocator::Default,
        Allocator::Platform,
        Allocator::Bfc,
        Allocator::CudaAsync,
    ];

    /// The name the plugin reads (`"default"`, `"platform"`, `"bfc"`, `"cuda_async"`).
    pub fn name(self) -> &'static str {
        match self {
            Allocator::Default => "default",
            Allocator::Platform => "platform",
            Allocator::Bfc => "bfc",
            Allocator::CudaAsync => "cuda_async",
        }
    }
}

impl fmt::Display for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Allocator {
    type Err = Error;

    fn from_str(s: &str) -> Result<Allocator> {
        Allocator::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Allocator::ALL.iter().map(|a| a.name()).collect();
                Error::invalid(format!(
                    "unknown CUDA allocator {s:?}: the plugin accepts {}",
                    names.join(", ")
                ))
            })
    }
}

/// Client create options for the CUDA plugin. Unset fields are left to the plugin.
///
/// ```
/// use rpjrt_cuda::{Allocator, CudaOptions};
/// let opts = CudaOptions::new()
///     .memory_fraction(0.5)
///     .preallocate(false)
///     .allocator(Allocator::Bfc)
///     .visible_devices([0])
///     .to_client_options()
///     .unwrap();
/// assert_eq!(opts.entries().len(), 4);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CudaOptions {
    memory_fraction: Option<f64>,
    preallocate: Option<bool>,
    allocator: Option<Allocator>,
    visible_devices: Option<Vec<i64>>,
}

impl CudaOptions {
    /// No options: the plugin's defaults.
    pub fn new() -> CudaOptions {
        CudaOptions::default()
    }

    /// The share of each device's memory the allocator may take, in `(0, 1]`.
    pub fn memory_fraction(mut self, fraction: f64) -> CudaOptions {
        self.memory_fraction = Some(fraction);
        self
    }

    /// Whether the allocator reserves its whole share when the client is created.
    pub fn preallocate(mut self, preallocate: bool) -> CudaOptions {
        self.preallocate = Some(preallocate);
        self
    }

    /// Which allocator to use.
    pub fn allocator(mut self, allocator: Allocator) -> CudaOptions {
        self.allocator = Some(allocator);
        self
    }

    /// The CUDA device ordinals the client may use (distinct, non-negative).
    pub fn visible_devices(mut self, devices: impl IntoIterator<Item = i64>) -> CudaOptions {
        self.visible_devices = Some(devices.into_iter().collect());
        self
    }

    /// Checks the options and turns them into [`ClientOptions`] entries for
    /// [`rpjrt::Client::new`].
    ///
    /// Refuses a memory fraction outside `(0, 1]` (or not finite), an empty, negative or
    /// repeated device list, and a memory fraction or preallocation with the `platform`
    /// allocator, which has no pool for them to size.
    pub fn to_client_options(&self) -> Result<ClientOptions> {
        let mut out = ClientOptions::new();
        if let Some(alloc) = self.allocator {
            if alloc == Allocator::Platform
                && (self.memory_fraction.is_some() || self.preallocate == Some(true))
            {
                return Err(Error::invalid(
                    "the CUDA 'platform' allocator has no pool: memory_fraction and \
                     preallocate=true need 'bfc', 'cuda_async' or 'default'",
                ));
            }
            out = out.set("allocator", alloc.name());
        }
        if let Some(f) = self.memory_fraction {
            if !f.is_finite() || f <= 0.0 || f > 1.0 {
                return Err(Error::invalid(format!(
                    "CUDA memory_fraction must be in (0, 1], got {f}"
                )));
            }
            // The plugin reads a 32-bit float; the narrowing cannot leave (0, 1].
            let narrowed = (f as f32).max(f32::MIN_POSITIVE);
            out = out.set("memory_fraction", narrowed);
        }
        if let Some(p) = self.preallocate {
            out = out.set("preallocate", p);
        }
        if let Some(devices) = &self.visible_devices {
            if devices.is_empty() {
                return Err(Error::invalid(
                    "CUDA visible_devices is empty: list at least one device ordinal",
                ));
            }
            for (i, &d) in devices.iter().enumerate() {
                if d < 0 {
                    return Err(Error::invalid(format!(
                        "CUDA visible_devices[{i}] is {d}: device ordinals are non-negative"
                    )));
                }
                if devices[..i].contains(&d) {
                    return Err(Error::invalid(format!(
                        "CUDA visible_devices lists device {d} twice"
                    )));
                }
            }
            out = out.set("visible_devices", devices.clone());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpjrt::Value;

    #[test]
    fn allocator_names_round_trip() {
        for a in Allocator::ALL {
            assert_eq!(a.name().parse::<Allocator>().unwrap(), a);
        }
        let err = "tlsf".parse::<Allocator>().unwrap_err().to_string();
        assert!(
            err.contains("\"tlsf\"") && err.contains("cuda_async"),
            "{err}"
        );
    }

    #[test]
    fn empty_options_set_nothing() {
        assert!(CudaOptions::new()
            .to_client_options()
            .unwrap()
            .entries()
            .is_empty());
    }

    #[test]
    fn all_options_encode_with_plugin_types() {
        let o = CudaOptions::new()
            .memory_fraction(0.25)
            .preallocate(true)
            .allocator(Allocator::CudaAsync)
            .visible_devices([1, 0])
            .to_client_options()
            .unwrap();
        let get = |n: &str| {
            o.entries()
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("allocator"), Some(Value::String("cuda_async".into())));
        assert_eq!(get("memory_fraction"), Some(Value::Float(0.25)));
        assert_eq!(get("preallocate"), Some(Value::Bool(true)));
        assert_eq!(get("visible_devices"), Some(Value::Int64List(vec![1, 0])));
    }

    #[test]
    fn memory_fraction_bounds() {
        for bad in [0.0, -0.1, 1.0001, f64::NAN, f64::INFINITY] {
            let e = CudaOptions::new().memory_fraction(bad).to_client_options();
            let msg = e.unwrap_err().to_string();
            assert!(
                msg.contains("memory_fraction must be in (0, 1]"),
                "{bad}: {msg}"
            );
        }
        for good in [1e-6, 0.5, 1.0] {
            CudaOptions::new()
                .memory_fraction(good)
                .to_client_options()
                .unwrap();
        }
        // A tiny positive fraction stays positive after narrowing to f32.
        let o = CudaOptions::new()
            .memory_fraction(1e-300)
            .to_client_options()
            .unwrap();
        match &o.entries()[0].1 {
            Value::Float(f) => assert!(*f > 0.0),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn visible_devices_checked() {
        let msg = |d: Vec<i64>| {
            CudaOptions::new()
                .visible_devices(d)
                .to_client_options()
                .unwrap_err()
                .to_string()
        };
        assert!(msg(vec![]).contains("empty"));
        assert!(msg(vec![0, -1]).contains("visible_devices[1] is -1"));
        assert!(msg(vec![0, 2, 0]).contains("device 0 twice"));
    }

    #[test]
    fn platform_allocator_has_no_pool() {
        let e = CudaOptions::new()
            .allocator(Allocator::Platform)
            .memory_fraction(0.5)
            .to_client_options()
            .unwrap_err();
        assert!(
            e.to_string().contains("'platform' allocator has no pool"),
            "{e}"
        );
        CudaOptions::new()
            .allocator(Allocator::Platform)
            .preallocate(false)
            .to_client_options()
            .unwrap();
    }
}
