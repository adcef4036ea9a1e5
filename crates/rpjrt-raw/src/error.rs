//! The one error type of rpjrt.

use std::fmt;
use std::path::PathBuf;

/// A PJRT C API version: `major.minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    /// Major version (0 for every PJRT release so far).
    pub major: i32,
    /// Minor version, bumped for every additive change.
    pub minor: i32,
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Result alias used throughout rpjrt.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The status codes a PJRT plugin reports (the gRPC/absl canonical codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// The operation was cancelled.
    Cancelled,
    /// An error with no better code.
    Unknown,
    /// The caller passed something invalid.
    InvalidArgument,
    /// A deadline passed before the operation finished.
    DeadlineExceeded,
    /// Something requested was not found.
    NotFound,
    /// Something to be created exists already.
    AlreadyExists,
    /// The caller may not do this.
    PermissionDenied,
    /// Out of memory or another resource.
    ResourceExhausted,
    /// The system is not in a state that allows the operation.
    FailedPrecondition,
    /// The operation was aborted.
    Aborted,
    /// A value was outside its valid range.
    OutOfRange,
    /// The plugin does not implement the operation.
    Unimplemented,
    /// An invariant inside the plugin broke.
    Internal,
    /// The service is unavailable right now.
    Unavailable,
    /// Data was lost or corrupted.
    DataLoss,
    /// The caller is not authenticated.
    Unauthenticated,
}

impl Code {
    /// Maps a PJRT error code number to a [`Code`]; unknown numbers become `Unknown`.
    pub fn from_raw(code: i32) -> Code {
        match code {
            1 => Code::Cancelled,
            3 => Code::InvalidArgument,
            4 => Code::DeadlineExceeded,
            5 => Code::NotFound,
            6 => Code::AlreadyExists,
            7 => Code::PermissionDenied,
            8 => Code::ResourceExhausted,
            9 => Code::FailedPrecondition,
            10 => Code::Aborted,
            11 => Code::OutOfRange,
            12 => Code::Unimplemented,
            13 => Code::Internal,
            14 => Code::Unavailable,
            15 => Code::DataLoss,
            16 => Code::Unauthenticated,
            _ => Code::Unknown,
        }
    }

    /// The code's number (the same in PJRT, XLA FFI and absl); [`Code::from_raw`]'s inverse.
    pub fn number(self) -> i32 {
        match self {
            Code::Cancelled => 1,
            Code::Unknown => 2,
            Code::InvalidArgument => 3,
            Code::DeadlineExceeded => 4,
            Code::NotFound => 5,
            Code::AlreadyExists => 6,
            Code::PermissionDenied => 7,
            Code::ResourceExhausted => 8,
            Code::FailedPrecondition => 9,
            Code::Aborted => 10,
            Code::OutOfRange => 11,
            Code::Unimplemented => 12,
            Code::Internal => 13,
            Code::Unavailable => 14,
            Code::DataLoss => 15,
            Code::Unauthenticated => 16,
        }
    }

    /// The code named `name` (the upper-case name [`Code::name`] gives, e.g. `INTERNAL`),
    /// or an error listing the names.
    pub fn from_name(name: &str) -> Result<Code> {
        (1..=16)
            .map(Code::from_raw)
            .chain([Code::Unknown])
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown error code {name:?} (use a name such as \"INTERNAL\"; known: {})",
                    (1..=16)
                        .map(|n| Code::from_raw(n).name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// The upper-case name used by PJRT and absl, e.g. `INVALID_ARGUMENT`.
    pub fn name(self) -> &'static str {
        match self {
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that can go wrong in rpjrt.
///
/// Each variant's `Display` is a sentence that says what failed and, where there is one,
/// what to do about it.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plugin library could not be loaded or is not a usable PJRT plugin.
    #[error("cannot load PJRT plugin {path}: {reason}")]
    PluginLoad {
        /// The path that was given.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// A call into the plugin returned an error.
    #[error("{entry} failed with {code}: {message}")]
    Pjrt {
        /// The C API entry that failed, e.g. `PJRT_Client_Compile`.
        entry: &'static str,
        /// The status code the plugin reported.
        code: Code,
        /// The plugin's own message.
        message: String,
    },
    /// The plugin lacks an entry or a feature that the request needs.
    #[error("{}", unsupported_message(what, needs, plugin, *missing_slot))]
    Unsupported {
        /// The C API entry or feature, e.g. `PJRT_Buffer_CopyToMemory`.
        what: String,
        /// The PJRT version that introduced it.
        needs: ApiVersion,
        /// The version the plugin reports.
        plugin: ApiVersion,
        /// True when the plugin's version is new enough but it leaves the slot empty.
        missing_slot: bool,
    },
    /// The plugin refused an argument struct because its size differs from what it expects.
    #[error("{entry}: the plugin (PJRT {plugin}) expects {struct_name} of {plugin_size} bytes, but rpjrt (PJRT {ours} layout) sends {our_size}; this plugin's ABI is incompatible with this rpjrt build")]
    StructSize {
        /// The entry whose call was refused.
        entry: &'static str,
        /// The struct named in the plugin's message.
        struct_name: String,
        /// The size the plugin expects.
        plugin_size: usize,
        /// The size rpjrt sent.
        our_size: usize,
        /// The plugin's PJRT version.
        plugin: ApiVersion,
        /// The layout rpjrt was written against.
        ours: ApiVersion,
    },
    /// rpjrt refused the request before it reached the plugin.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The object belongs to a client that was closed.
    #[error("{}", closed_message(.0))]
    Closed(&'static str),
    /// The buffer or executable was deleted (or donated to an execution).
    #[error("{0}")]
    Deleted(String),
    /// A key-value store or rendezvous step failed (timeout, lost peer, refused token).
    #[error("{message}")]
    Store {
        /// The status code that describes the failure, e.g. `DEADLINE_EXCEEDED`.
        code: Code,
        /// What failed, naming the process or key involved.
        message: String,
    },
    /// A file could not be written or read for a reason of the system, not of the path
    /// given: a full disk or quota, too many open files, a permission, a read-only file
    /// system, a failing device.
    #[error("{message}")]
    Io {
        /// The status code that describes the failure (`RESOURCE_EXHAUSTED` for a full
        /// disk, `PERMISSION_DENIED`, `DATA_LOSS` for a device error, ...).
        code: Code,
        /// What failed, naming the file, with the system's reason.
        message: String,
    },
    /// A host allocation sized by the request could not be made (or its size overflows):
    /// the request needs more memory than there is, as numpy's `MemoryError`.
    #[error("out of memory: {0}")]
    ResourceExhausted(String),
    /// A plugin's out-of-memory error from an allocating call (put, execute, compile,
    /// copy, transfer), with what rpjrt could add: the device allocator's figures, the
    /// client's create options that bound memory, and a hint.
    #[error("{error}\n{report}")]
    OutOfMemory {
        /// The plugin's error, as it was reported.
        error: Box<Error>,
        /// The figures, options and hint.
        report: Box<crate::oom::OomReport>,
    },
}

/// The message of [`Error::Unsupported`]. Where the version that brought `what` is not
/// known apart from the plugin's own (an extension or answer the plugin lacks), the plugin
/// is said to lack it, not to need the version it has.
fn unsupported_message(
    what: &str,
    needs: &ApiVersion,
    plugin: &ApiVersion,
    missing_slot: bool,
) -> String {
    if missing_slot && plugin == needs {
        format!("{what} is not available: this plugin (PJRT {plugin}) does not implement it")
    } else if !missing_slot && plugin >= needs {
        // The table is shorter than the version the plugin states.
        format!(
            "{what} is not available: this plugin says it implements PJRT {plugin}, which has \
             it since PJRT {needs}, but its function table ends before it"
        )
    } else {
        let tail = if missing_slot { " without it" } else { "" };
        format!(
            "{what} is not available: it needs PJRT {needs}, and this plugin implements PJRT \
             {plugin}{tail}"
        )
    }
}

/// The message of [`Error::Closed`] for an object of kind `what`.
fn closed_message(what: &str) -> String {
    if what == "client" {
        "the client was closed and cannot be used".to_string()
    } else {
        format!("{what} cannot be used: its client was closed")
    }
}

impl Error {
    /// The error of a failed file operation: `message` (which names the file) and the
    /// system's error `e`. A failure of the system (a full disk, a permission, a device) is
    /// [`Error::Io`] with the code that describes it; one of the path itself (a symbolic
    /// link loop, a folder where a file goes) stays [`Error::InvalidArgument`].
    pub fn io(message: impl std::fmt::Display, e: &std::io::Error) -> Error {
        let code = match e.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG | libc::EMFILE | libc::ENFILE) => {
                Code::ResourceExhausted
            }
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => Code::PermissionDenied,
            Some(libc::EIO) => Code::DataLoss,
            _ => return Error::invalid(format!("{message}: {e}")),
        };
        Error::Io {
            code,
            message: format!("{message}: {e}"),
        }
    }

    /// The PJRT status code that best describes this error.
    pub fn code(&self) -> Code {
        match self {
            Error::Pjrt { code, .. } => *code,
            Error::PluginLoad { .. } => Code::NotFound,
            Error::Unsupported { .. } => Code::Unimplemented,
            Error::StructSize { .. } | Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::Closed(_) | Error::Deleted(_) => Code::FailedPrecondition,
            Error::Store { code, .. } | Error::Io { code, .. } => *code,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::OutOfMemory { error, .. } => error.code(),
        }
    }

    /// The entry of the C API that failed, when the error came from a call (or, for
    /// [`Error::Unsupported`], the entry the plugin lacks).
    pub fn entry(&self) -> Option<&str> {
        match self {
            Error::Pjrt { entry, .. } | Error::StructSize { entry, .. } => Some(entry),
            Error::OutOfMemory { error, .. } => error.entry(),
            // The first entry it names ("creating a topology (PJRT_TopologyDescription_Create:
            // ...)"); a feature named otherwise has none.
            Error::Unsupported { what, .. } => {
                let from = &what[what.find("PJRT_")?..];
                let end = from
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(from.len());
                Some(&from[..end])
            }
            _ => None,
        }
    }

    /// True when this error says memory ran out (`RESOURCE_EXHAUSTED`, or an allocation
    /// failure the plugin reported under another code).
    pub fn is_out_of_memory(&self) -> bool {
        let text = self.to_string();
        // rpjrt's refusal of runaway custom-call nesting is RESOURCE_EXHAUSTED too, but a
        // limit of depth, not of memory.
        if crate::ffi::is_nesting_refusal(&text) {
            return false;
        }
        if self.code() == Code::ResourceExhausted {
            return true;
        }
        let m = text.to_lowercase();
        // "OOM" only as a word of its own: "boom", "room" or "zoom" say nothing of memory.
        m.contains("out of memory")
            || m.contains("failed to allocate")
            || m.split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == "oom")
    }

    /// The allocator figures, memory options and hint of an out-of-memory error from an
    /// allocating call (see [`Error::OutOfMemory`]); `None` for any other error.
    pub fn oom_report(&self) -> Option<&crate::oom::OomReport> {
        match self {
            Error::OutOfMemory { report, .. } => Some(report),
            _ => None,
        }
    }

    /// An [`Error::InvalidArgument`] with message `msg`.
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// The same error (same variant, code and entry) with its message rewritten by `f`,
    /// where the variant carries a message of its own (a plugin's error, an invalid
    /// argument, a deletion, a store failure, exhausted memory); other variants are
    /// returned unchanged. Callers add context this way without changing the error's kind.
    pub fn map_message(self, f: impl Fn(String) -> String) -> Error {
        match self {
            Error::Pjrt {
                entry,
                code,
                message,
            } => Error::Pjrt {
                entry,
                code,
                message: f(message),
            },
            Error::InvalidArgument(m) => Error::InvalidArgument(f(m)),
            Error::Deleted(m) => Error::Deleted(f(m)),
            Error::ResourceExhausted(m) => Error::ResourceExhausted(f(m)),
            Error::Store { code, message } => Error::Store {
                code,
                message: f(message),
            },
            Error::OutOfMemory { error, report } => Error::OutOfMemory {
                error: Box::new(error.map_message(f)),
                report,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Code;

    #[test]
    fn a_short_table_is_not_said_to_need_an_older_version() {
        let v = |minor| super::ApiVersion { major: 0, minor };
        let e = |needs, plugin, missing_slot| super::Error::Unsupported {
            what: "PJRT_Client_Compile".into(),
            needs: v(needs),
            plugin: v(plugin),
            missing_slot,
        };
        // A table that ends before an entry its stated version has (round 23: "needs PJRT
        // 0.57, and this plugin implements PJRT 0.114").
        let m = e(57, 114, false).to_string();
        assert!(m.contains("says it implements PJRT 0.114"), "{m}");
        assert!(m.contains("since PJRT 0.57"), "{m}");
        assert!(m.contains("function table ends before it"), "{m}");
        // An older plugin still reads as needing the newer version.
        let m = e(89, 81, false).to_string();
        assert!(
            m.ends_with("it needs PJRT 0.89, and this plugin implements PJRT 0.81"),
            "{m}"
        );
        // A slot left empty.
        let m = e(57, 114, true).to_string();
        assert!(m.ends_with("implements PJRT 0.114 without it"), "{m}");
    }

    #[test]
    fn out_of_memory_is_told_by_whole_words() {
        let e = |code, message: &str| super::Error::Pjrt {
            entry: "PJRT_Plugin_Initialize",
            code,
            message: message.to_string(),
        };
        assert!(e(Code::Internal, "CUDA OOM while allocating").is_out_of_memory());
        // rpjrt's nesting refusal shares the code, not the meaning.
        let nested = format!("16 handlers run, at {}", crate::ffi::NESTING_LIMIT);
        assert!(!e(Code::ResourceExhausted, &nested).is_out_of_memory());
        assert!(e(Code::ResourceExhausted, "no room").is_out_of_memory());
        assert!(e(Code::Internal, "oom: 12 bytes").is_out_of_memory());
        assert!(e(Code::Unknown, "Out of memory allocating 4 GiB").is_out_of_memory());
        assert!(e(Code::ResourceExhausted, "anything").is_out_of_memory());
        for not in [
            "init boom",
            "no room left in the queue",
            "zoom level",
            "bloom filter",
        ] {
            assert!(!e(Code::Internal, not).is_out_of_memory(), "{not}");
        }
    }

    #[test]
    fn code_numbers_round_trip() {
        for n in 1..=16 {
            let c = Code::from_raw(n);
            assert_eq!(c.number(), n, "{c:?}");
        }
        assert_eq!(Code::from_raw(99), Code::Unknown);
    }

    #[test]
    fn code_names_round_trip() {
        for n in 1..=16 {
            let c = Code::from_raw(n);
            assert_eq!(Code::from_name(c.name()).unwrap(), c);
        }
        let e = Code::from_name("internal").unwrap_err().to_string();
        assert!(
            e.contains("unknown error code \"internal\"") && e.contains("INTERNAL"),
            "{e}"
        );
    }
}
