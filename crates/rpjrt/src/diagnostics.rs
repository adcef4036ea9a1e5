//! Errors that explain themselves: allocator figures for out-of-memory errors, what to
//! do about a plugin that cannot be loaded, and one line on the CUDA driver
//! ([`cuda_driver_summary`], which `rpjrt-cuda`'s `create_client` adds to a CUDA plugin's
//! failure).

use crate::client::Device;
use crate::error::{Error, Result};
pub use crate::oom::{human_bytes, DeviceFigures, MemoryStats, OomReport, MEMORY_OPTIONS};
pub use crate::raw::cuda::summary as cuda_driver_summary;
pub use crate::raw::libraries::{
    describe_missing, library_provider, missing_libraries, MissingLibrary,
};

/// The device allocator's figures, or the plugin's error (both CPU plugins answer
/// `UNIMPLEMENTED`; a plugin before the entry existed answers `Unsupported`). The same as
/// [`Device::memory_stats`].
pub fn memory_stats(device: &Device) -> Result<MemoryStats> {
    device.memory_stats()
}

/// True when `e` says memory ran out (`RESOURCE_EXHAUSTED`, or an allocation failure the
/// plugin reported under another code); see [`Error::is_out_of_memory`].
pub fn is_out_of_memory(e: &Error) -> bool {
    e.is_out_of_memory()
}

/// A few lines to append to an error: for an out-of-memory error on `device`, the
/// allocator's figures (or that the plugin reports none) and what to try; for a plugin
/// that does not load, what to install. `request` describes what was being allocated,
/// when known. `None` when there is nothing to add.
pub fn explain(e: &Error, device: Option<&Device>, request: Option<&str>) -> Option<String> {
    if e.oom_report().is_some() {
        // The error carries its figures already (rpjrt added them where the call failed).
        return None;
    }
    if is_out_of_memory(e) {
        let report = match device {
            Some(d) => d.memory_report(request.map(|r| (r.to_string(), None))),
            None => OomReport {
                request: request.map(str::to_string),
                request_bytes: None,
                devices: Vec::new(),
                options: Vec::new(),
            },
        };
        return Some(report.to_string());
    }
    if let Error::PluginLoad { reason, .. } = e {
        let r = reason.to_lowercase();
        let hint = if r.contains("cannot be found by the dynamic loader") {
            "install what provides the libraries above, or put the directory that holds them \
             on LD_LIBRARY_PATH; `rpjrt plugins` lists the other plugins installed"
        } else if r.contains("libcuda") || r.contains("libcudart") || r.contains("cublas") {
            "the CUDA libraries are missing: pip install the matching nvidia-* wheels \
             (jax-cuda12-plugin[with-cuda] pulls them) or install the CUDA toolkit"
        } else if r.contains("glibc") || r.contains("glibcxx") {
            "the plugin was built for a newer C/C++ runtime than this system has: use a \
             plugin wheel built for this platform"
        } else if let Some(at) = r.find("the file cannot be read") {
            unreadable_hint(os_error(&r[at..]))
        } else {
            return None;
        };
        return Some(format!("hint: {hint}"));
    }
    None
}

/// The OS error number in an I/O error's text (`... (os error 40)`), the first after the
/// start of `text`.
fn os_error(text: &str) -> Option<i32> {
    let from = text.find("(os error ")? + "(os error ".len();
    let digits = &text[from..];
    let end = digits.find(')')?;
    digits[..end].parse().ok()
}

/// The hint for a plugin file that cannot be read, by why (`errno`, when the error gave
/// one): only a file that is not there is told to look for what is installed.
fn unreadable_hint(errno: Option<i32>) -> &'static str {
    use std::io::ErrorKind;
    // The numbers that std's `ErrorKind` does not name on a stable release (Linux's).
    const EIO: i32 = 5;
    const ELOOP: i32 = 40;
    let kind = errno.map(|n| std::io::Error::from_raw_os_error(n).kind());
    match (errno, kind) {
        (_, Some(ErrorKind::NotFound)) => {
            "the file is not there: list what is installed with `rpjrt plugins`, or pip \
             install xla-cpu-pjrt for a CPU plugin"
        }
        (_, Some(ErrorKind::PermissionDenied)) => {
            "the file is there, but this user may not read it (or may not enter a directory \
             on its path): check the permissions with `namei -l PATH`"
        }
        (Some(ELOOP), _) if cfg!(target_os = "linux") => {
            "the path is a loop of symbolic links, which never reaches a file: `namei PATH` \
             shows where each link points; point the path at the library itself"
        }
        (_, Some(ErrorKind::NotADirectory)) => {
            "a part of the path before the file name is a file, not a directory: check the \
             path"
        }
        (_, Some(ErrorKind::InvalidFilename)) => {
            "the path, or a name in it, is longer than the system allows: use a shorter path \
             (a symbolic link to the library, for one)"
        }
        (Some(EIO), _) => {
            "the system failed reading the file (an I/O error: a failing disk or network \
             file system); the kernel log (`dmesg`) may say more"
        }
        _ => {
            "the file cannot be opened for the system's reason above: check the path with \
             `ls -lL PATH`"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::libraries::{describe_missing, library_provider, MissingLibrary};

    #[test]
    fn missing_libraries_are_grouped_by_provider_and_hinted() {
        let m = |name: &str| MissingLibrary {
            name: name.into(),
            needed_by: "/p/plugin.so".into(),
            provider: library_provider(name),
        };
        let text = describe_missing(&[m("libamdhip64.so.7"), m("libzz.so"), m("librocblas.so.5")]);
        assert!(text.contains("3 libraries"), "{text}");
        assert!(
            text.contains("libamdhip64.so.7, librocblas.so.5 (from ROCm"),
            "{text}"
        );
        assert!(text.contains("libzz.so (from an unknown package"), "{text}");
        let e = Error::PluginLoad {
            path: "/p/plugin.so".into(),
            reason: text,
        };
        let hint = explain(&e, None, None).unwrap();
        assert!(hint.contains("LD_LIBRARY_PATH"), "{hint}");
        assert!(!hint.contains("not there"), "{hint}");
    }

    #[test]
    fn an_unreadable_plugin_is_said_to_be_missing_only_when_it_is() {
        // Any file that could not be read got "the file is not there", a symlink loop or
        // a file this user may not read included.
        let hint = |why: &str| {
            let e = Error::PluginLoad {
                path: "/p/plugin.so".into(),
                reason: format!("the file cannot be read ({why})"),
            };
            explain(&e, None, None).unwrap()
        };
        let missing = hint("No such file or directory (os error 2)");
        assert!(missing.contains("not there"), "{missing}");
        for (why, want) in [
            (
                "Too many levels of symbolic links (os error 40)",
                "loop of symbolic links",
            ),
            ("Permission denied (os error 13)", "permissions"),
            ("Input/output error (os error 5)", "I/O error"),
            ("Not a directory (os error 20)", "not a directory"),
            (
                "File name too long (os error 36)",
                "longer than the system allows",
            ),
            ("Text file busy (os error 26)", "cannot be opened"),
            ("no number here", "cannot be opened"),
        ] {
            let h = hint(why);
            assert!(h.contains(want), "{why}: {h}");
            assert!(!h.contains("not there"), "{why}: {h}");
        }
    }

    #[test]
    fn load_errors_get_hints() {
        let e = Error::PluginLoad {
            path: "/x.so".into(),
            reason: "it is not a loadable shared library (libcudart.so.12: cannot open)".into(),
        };
        assert!(explain(&e, None, None).unwrap().contains("nvidia"));
    }
}
