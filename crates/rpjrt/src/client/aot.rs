//! Compile once: serialized executables in a small versioned envelope.
//!
//! A plugin's own serialized executable says nothing about what it was built for, and
//! handing a plugin a blob from another plugin (or a damaged one) can abort the process.
//! [`Executable::serialize`] therefore wraps the plugin's bytes in an envelope that records
//! the target, and [`Client::load`] checks the envelope completely — magic, length,
//! checksum, then every target field against the client — before the plugin sees the blob.
//!
//! # Envelope format (version 1)
//!
//! All integers little-endian.
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `RPJRTEXE` |
//! | 4 | envelope version (1) |
//! | 8 | total length of the artifact in bytes, checksum included |
//! | 4 | number of header fields N |
//! | N × (4 + k + 4 + v) | header fields: key length, key (UTF-8), value length, value (UTF-8) |
//! | 8 + c | encoded `CompileOptionsProto` (length, bytes) |
//! | 8 + b | the plugin's serialized executable (length, bytes) |
//! | 32 | SHA-256 of every byte before it |
//!
//! The header fields are the [`ArtifactTarget`] fields (`platform_name`, `platform_version`,
//! `pjrt_version`, `xla_version`, `stablehlo_current_version`, `stablehlo_minimum_version`,
//! `device_kind`, `device_count`) plus informational ones (`rpjrt_version`, `compile_ms`).
//! Unknown fields are ignored, so later versions can add some without a version bump.
//! Nothing that decides how the plugin's bytes are executed is taken from the header: the
//! parameter types that arguments are checked against are read from the plugin (at first
//! need), because a header rewritten along with its checksum could otherwise make the
//! checks pass integers where the program reads floats. (Artifacts of earlier rpjrt versions
//! also carry a `parameters` field; it is ignored.)
//!
//! The checksum catches accidents (a flipped byte, a truncated copy), not tampering: a
//! deliberately crafted artifact is as dangerous as a crafted plugin blob.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::client::executable::{Executable, Origin, Source};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::options::{tupled_arguments as tupled, CompileOptions};
use crate::plugin::Plugin;
use crate::program::{is_artifact, ProgramFile, ENVELOPE_MAGIC};
use crate::raw::aot as raw;

/// The envelope version this rpjrt writes and reads.
pub const ENVELOPE_VERSION: u32 = 1;
const CHECKSUM_LEN: usize = 32;
const FIXED_HEAD: usize = 8 + 4 + 8 + 4;

/// What an executable was compiled for: loading it anywhere else is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactTarget {
    /// Platform name, e.g. `cpu`.
    pub platform_name: String,
    /// The plugin's platform version string.
    pub platform_version: String,
    /// The plugin's PJRT C API version, e.g. `0.81`.
    pub pjrt_version: String,
    /// The plugin's `xla_version` attribute (empty when it has none).
    pub xla_version: String,
    /// The plugin's newest StableHLO version (empty when unknown).
    pub stablehlo_current_version: String,
    /// The plugin's oldest StableHLO version (empty when unknown).
    pub stablehlo_minimum_version: String,
    /// The plugin library's fingerprint ([`crate::Plugin::build`]).
    pub plugin_build: String,
    /// The device kind(s), comma-separated when mixed.
    pub device_kind: String,
    /// The number of devices of the client.
    pub device_count: usize,
}

fn version_list(v: Option<Vec<i64>>) -> String {
    let parts: Vec<String> = v.unwrap_or_default().iter().map(i64::to_string).collect();
    parts.join(".")
}

impl ArtifactTarget {
    /// The target a client compiles for.
    pub fn of_client(client: &Client) -> Result<ArtifactTarget> {
        let core = &client.core;
        core.check("client")?;
        let mut kinds: Vec<String> = Vec::new();
        for d in &core.devices {
            if !kinds.contains(&d.facts.kind) {
                kinds.push(d.facts.kind.clone());
            }
        }
        // The build from the memo in the client's cache directory, where there is one.
        core.plugin
            .build_memo(client.cache().as_ref().map(|c| c.dir()));
        let mut t = ArtifactTarget::of_plugin(&core.plugin);
        t.platform_name = core.platform_name.clone();
        t.platform_version = core.platform_version.clone();
        t.device_kind = kinds.join(",");
        t.device_count = core.devices.len();
        Ok(t)
    }

    /// The plugin-level part of a target (no platform or devices).
    pub(crate) fn of_plugin(plugin: &Plugin) -> ArtifactTarget {
        ArtifactTarget {
            platform_name: String::new(),
            platform_version: String::new(),
            pjrt_version: plugin.version().to_string(),
            xla_version: plugin
                .xla_version()
                .map(|v| v.to_string())
                .unwrap_or_default(),
            stablehlo_current_version: version_list(plugin.stablehlo_current_version()),
            stablehlo_minimum_version: version_list(plugin.stablehlo_minimum_version()),
            plugin_build: plugin.build().to_string(),
            device_kind: String::new(),
            device_count: 0,
        }
    }

    /// `(name, value)` of every field, in a fixed order.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("platform_name", self.platform_name.clone()),
            ("platform_version", self.platform_version.clone()),
            ("pjrt_version", self.pjrt_version.clone()),
            ("xla_version", self.xla_version.clone()),
            (
                "stablehlo_current_version",
                self.stablehlo_current_version.clone(),
            ),
            (
                "stablehlo_minimum_version",
                self.stablehlo_minimum_version.clone(),
            ),
            ("plugin_build", self.plugin_build.clone()),
            ("device_kind", self.device_kind.clone()),
            ("device_count", self.device_count.to_string()),
        ]
    }

    fn from_fields(fields: &[(String, String)]) -> Result<ArtifactTarget> {
        let get = |k: &str| -> Result<String> {
            fields
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| Error::invalid(format!("the artifact's header lacks the field {k}")))
        };
        Ok(ArtifactTarget {
            platform_name: get("platform_name")?,
            platform_version: get("platform_version")?,
            pjrt_version: get("pjrt_version")?,
            xla_version: get("xla_version")?,
            stablehlo_current_version: get("stablehlo_current_version")?,
            stablehlo_minimum_version: get("stablehlo_minimum_version")?,
            // Artifacts written before the field was recorded read as an unknown build,
            // which `check_target` refuses to load (and says why).
            plugin_build: get("plugin_build").unwrap_or_default(),
            device_kind: get("device_kind")?,
            device_count: get("device_count")?
                .parse()
                .map_err(|_| Error::invalid("the artifact's device_count field is not a number"))?,
        })
    }

    /// Fields that differ from `other`: `(field, ours, theirs)`.
    pub fn differences(&self, other: &ArtifactTarget) -> Vec<(&'static str, String, String)> {
        self.fields()
            .into_iter()
            .zip(other.fields())
            .filter(|((_, a), (_, b))| a != b)
            .map(|((k, a), (_, b))| (k, a, b))
            .collect()
    }
}

impl fmt::Display for ArtifactTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) on PJRT {}, {} x {}",
            self.platform_name,
            self.platform_version,
            self.pjrt_version,
            self.device_count,
            self.device_kind
        )
    }
}

/// A decoded artifact: target, compile options and the plugin's blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// What it was compiled for.
    pub target: ArtifactTarget,
    /// The encoded `CompileOptionsProto` it was compiled with (empty when unknown).
    pub compile_options: Vec<u8>,
    /// The plugin's serialized executable.
    pub blob: Vec<u8>,
    /// Informational header fields (`rpjrt_version`, `compile_ms`, ...).
    pub extra: Vec<(String, String)>,
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

/// A bounds-checked reader over an artifact body.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(Error::invalid(format!(
                "the artifact is malformed: its {what} runs past the end"
            )));
        };
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::invalid(format!("the artifact's {what} is not UTF-8")))
    }
    fn blob(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = usize::try_from(self.u64(what)?)
            .map_err(|_| Error::invalid(format!("the artifact's {what} is too large")))?;
        self.take(n, what)
    }
}

/// Checks the fixed head of an artifact of `len` bytes whose first bytes are `head`:
/// magic, envelope version and the recorded length.
fn check_fixed_head(head: &[u8], len: u64) -> Result<()> {
    if !is_artifact(head) {
        return Err(Error::invalid(
            "these bytes are not an rpjrt artifact (no RPJRTEXE header); a plugin's own \
             serialized executable can be loaded bare, at your own risk (Rust \
             Client::load_bare, Python client.load(data, bare=True))",
        ));
    }
    if len < (FIXED_HEAD + CHECKSUM_LEN) as u64 || head.len() < FIXED_HEAD {
        return Err(Error::invalid(format!(
            "the artifact is truncated: {len} bytes, shorter than any envelope"
        )));
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if version != ENVELOPE_VERSION {
        return Err(Error::invalid(format!(
            "the artifact uses envelope version {version}, but this rpjrt reads version \
             {ENVELOPE_VERSION}"
        )));
    }
    let total = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
    if total != len {
        return Err(Error::invalid(if len < total {
            format!(
                "the artifact is truncated: its header says {total} bytes, but only {len} are \
                 there"
            )
        } else {
            format!(
                "the artifact has trailing bytes: its header says {total} bytes, but {len} \
                 are there"
            )
        }));
    }
    Ok(())
}

/// The artifact (without its blob) that header `fields` and `compile_options` describe.
fn head_of(fields: Vec<(String, String)>, compile_options: Vec<u8>) -> Result<Artifact> {
    let target = ArtifactTarget::from_fields(&fields)?;
    let known: Vec<&str> = target.fields().iter().map(|(k, _)| *k).collect();
    let extra = fields
        .into_iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .collect();
    Ok(Artifact {
        target,
        compile_options,
        blob: Vec::new(),
        extra,
    })
}

/// Reads into `buf` until it is full or the input ends; returns how many bytes came.
fn read_up_to(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl Artifact {
    /// Encodes the artifact in the envelope format.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.blob.len() + self.compile_options.len() + 512);
        out.extend_from_slice(ENVELOPE_MAGIC);
        put_u32(&mut out, ENVELOPE_VERSION);
        let total_at = out.len();
        put_u64(&mut out, 0);
        let mut fields: Vec<(String, String)> = self
            .target
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        fields.extend(self.extra.iter().cloned());
        put_u32(&mut out, fields.len() as u32);
        for (k, v) in &fields {
            put_str(&mut out, k);
            put_str(&mut out, v);
        }
        put_u64(&mut out, self.compile_options.len() as u64);
        out.extend_from_slice(&self.compile_options);
        put_u64(&mut out, self.blob.len() as u64);
        out.extend_from_slice(&self.blob);
        let total = (out.len() + CHECKSUM_LEN) as u64;
        out[total_at..total_at + 8].copy_from_slice(&total.to_le_bytes());
        let sum = Sha256::digest(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Decodes and verifies an artifact: magic, envelope version, length and checksum.
    /// Nothing here reaches a plugin.
    pub fn decode(bytes: &[u8]) -> Result<Artifact> {
        let (head, blob) = Artifact::decode_parts(bytes)?;
        Ok(head.with_blob(bytes[blob].to_vec()))
    }

    /// [`Artifact::decode`] of bytes the caller hands over (a file just read): the blob
    /// reuses their allocation instead of a fresh copy (no new pages to fault in).
    pub(crate) fn decode_vec(mut bytes: Vec<u8>) -> Result<Artifact> {
        let (head, blob) = Artifact::decode_parts(&bytes)?;
        bytes.truncate(blob.end);
        bytes.drain(..blob.start);
        Ok(head.with_blob(bytes))
    }

    /// Checks an envelope and decodes everything but the blob (left empty), whose range in
    /// `bytes` it returns.
    pub(crate) fn decode_parts(bytes: &[u8]) -> Result<(Artifact, std::ops::Range<usize>)> {
        check_fixed_head(bytes, bytes.len() as u64)?;
        let (body, sum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
        if Sha256::digest(body).as_slice() != sum {
            return Err(Error::invalid(
                "the artifact is corrupt: its SHA-256 checksum does not match its contents",
            ));
        }
        let mut r = Reader {
            data: body,
            pos: 20,
        };
        let n = r.u32("field count")? as usize;
        // Each field takes at least 8 bytes: room for no more than the body can hold.
        let mut fields = Vec::with_capacity(n.min(body.len().saturating_sub(r.pos) / 8));
        for _ in 0..n {
            let k = r.string("header field name")?;
            let v = r.string("header field value")?;
            fields.push((k, v));
        }
        let compile_options = r.blob("compile options")?.to_vec();
        let blob_len = r.blob("executable")?.len();
        let blob = r.pos - blob_len..r.pos;
        if r.pos != body.len() {
            return Err(Error::invalid(
                "the artifact is malformed: bytes left over after the executable",
            ));
        }
        Ok((head_of(fields, compile_options)?, blob))
    }

    /// The header (target and informational fields) of the artifact that `file` holds,
    /// `size` bytes long, read without the compile options and executable that follow it:
    /// a listing of large artifacts reads a few hundred bytes of each. The fixed head is
    /// checked as [`Artifact::decode`] checks it (magic, version, length), but not the
    /// checksum, which needs every byte; `compile_options` and `blob` come back empty.
    pub(crate) fn read_head(file: &mut impl std::io::Read, size: u64) -> Result<Artifact> {
        let io = |e: std::io::Error| Error::invalid(format!("cannot read it: {e}"));
        let mut fixed = [0u8; FIXED_HEAD];
        let got = read_up_to(file, &mut fixed).map_err(io)?;
        check_fixed_head(&fixed[..got], size)?;
        // Field lengths are bounded by what the file holds, so a forged length cannot make
        // this allocate more than the file's size.
        let mut left = size - (FIXED_HEAD + CHECKSUM_LEN) as u64;
        let mut take = |file: &mut dyn std::io::Read, n: u64, what: &str| -> Result<Vec<u8>> {
            if n > left {
                return Err(Error::invalid(format!(
                    "the artifact is malformed: its {what} runs past the end"
                )));
            }
            left -= n;
            let mut b = vec![0u8; n as usize];
            file.read_exact(&mut b).map_err(io)?;
            Ok(b)
        };
        let n = u32::from_le_bytes(fixed[20..24].try_into().expect("4 bytes"));
        let mut string = |file: &mut dyn std::io::Read, what: &str| -> Result<String> {
            let len = u32::from_le_bytes(take(file, 4, what)?.try_into().expect("4 bytes"));
            String::from_utf8(take(file, u64::from(len), what)?)
                .map_err(|_| Error::invalid(format!("the artifact's {what} is not UTF-8")))
        };
        let mut fields = Vec::new();
        for _ in 0..n {
            let k = string(file, "header field name")?;
            let v = string(file, "header field value")?;
            fields.push((k, v));
        }
        head_of(fields, Vec::new())
    }

    /// The bytes of the artifact file at `path` (for [`Client::load`] or
    /// [`Artifact::decode`]), read whole only after its fixed head shows an envelope of
    /// exactly the file's size: a large file that is not an artifact is refused after a
    /// few bytes, not read into memory first.
    pub fn read_file(path: impl AsRef<std::path::Path>) -> Result<Vec<u8>> {
        use std::io::Read as _;
        let path = path.as_ref();
        let fail = |e: &dyn fmt::Display| Error::invalid(format!("{}: {e}", path.display()));
        let (mut file, len) = crate::raw::files::open_regular_file(path)?;
        crate::raw::files::read_bound(path, len, crate::raw::files::MAX_READ_BYTES, "a file")?;
        let mut fixed = [0u8; FIXED_HEAD];
        let got = read_up_to(&mut file, &mut fixed).map_err(|e| fail(&e))?;
        check_fixed_head(&fixed[..got], len)
            .map_err(|e| e.map_message(|m| format!("{}: {m}", path.display())))?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(len as usize)
            .map_err(|_| Error::ResourceExhausted(format!("{}: {len} bytes", path.display())))?;
        bytes.extend_from_slice(&fixed[..got]);
        file.read_to_end(&mut bytes).map_err(|e| fail(&e))?;
        Ok(bytes)
    }

    fn with_blob(self, blob: Vec<u8>) -> Artifact {
        Artifact { blob, ..self }
    }

    /// One informational header field.
    pub fn extra_field(&self, name: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Refuses an artifact built for another target, naming both sides.
    pub fn check_target(&self, ours: &ArtifactTarget) -> Result<()> {
        let diffs = self.target.differences(ours);
        if diffs.is_empty() {
            return Ok(());
        }
        let list = diffs
            .iter()
            .map(|(k, a, b)| match *k {
                "plugin_build" if a.is_empty() => format!(
                    "{k}: the artifact does not record the plugin build that compiled it (it \
                     was written before rpjrt recorded it), so it cannot be shown to match \
                     this plugin's {b:?}: compile it again"
                ),
                "plugin_build" => format!(
                    "{k}: artifact {a:?}, this client {b:?}: another build of the plugin \
                     compiled it"
                ),
                _ => format!("{k}: artifact {a:?}, this client {b:?}"),
            })
            .collect::<Vec<_>>()
            .join("; ");
        let (theirs, mine) = (self.target.to_string(), ours.to_string());
        // The summary leaves out the versions and the plugin build: when only those differ
        // it reads the same on both sides, and the list says what differs.
        let head = if theirs == mine {
            format!("the artifact and this client are both {mine}, but")
        } else {
            format!("the artifact was built for {theirs} but this client is {mine};")
        };
        Err(Error::invalid(format!(
            "{head} it cannot be loaded here ({list})"
        )))
    }
}

/// The header field of an artifact whose compile options are to be given again at load
/// (it was written from an executable loaded with options other than its blob's).
const OPTIONS_AT_LOAD: &str = "options_at_load";

impl Executable {
    /// The plugin's own serialized form of this executable, without an envelope. For an
    /// executable that was loaded rather than compiled, the bytes it was loaded from (a
    /// plugin's serialization of a loaded executable may leave out its compiled code); any
    /// compile options given at load are not in them.
    pub fn serialize_bare(&self) -> Result<Vec<u8>> {
        let (_, loaded) = self.raw_parts()?;
        match self.origin().map(|o| &o.source) {
            Some(Source::Blob(blob)) => Ok(blob.clone()),
            Some(Source::CacheEntry { path, key }) => {
                let gone = |why: String| {
                    Error::invalid(format!(
                        "this executable was loaded from the compile cache entry {}, which \
                         {why}; compile the program again to serialize it (a CPU plugin's \
                         own serialization of a loaded executable leaves out its code)",
                        path.display()
                    ))
                };
                let bytes = crate::read_regular_file(path)
                    .map_err(|e| gone(format!("cannot be read any more ({e})")))?;
                let entry = Artifact::decode_vec(bytes)
                    .map_err(|e| gone(format!("is no longer a valid artifact ({e})")))?;
                // The file may have been replaced since (another program's entry copied
                // over it): only the entry it was loaded from will do.
                super::cache::check_key(&entry, key)
                    .map_err(|e| gone(format!("no longer holds that entry: {e}")))?;
                Ok(entry.blob)
            }
            None => raw::exe_serialize(loaded),
        }
    }

    /// Serializes the executable into an rpjrt artifact that records what it was built
    /// for; load it with [`Client::load`].
    pub fn serialize(&self) -> Result<Vec<u8>> {
        Ok(self.to_artifact(Vec::new())?.encode())
    }

    pub(crate) fn to_artifact(&self, extra: Vec<(String, String)>) -> Result<Artifact> {
        let (core, _) = self.raw_parts()?;
        let blob = self.serialize_bare()?;
        let client = Client {
            core: std::sync::Arc::clone(core),
        };
        let compile_options = match self.recorded_options() {
            Some(o) => o.to_vec(),
            None => self.compile_options_bytes().unwrap_or_default(),
        };
        let mut extra = extra;
        extra.push((
            "rpjrt_version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ));
        if self.origin().is_some_and(|o| o.overridden) && !compile_options.is_empty() {
            // The blob is the one loaded, without the options given at load: `load` gives
            // them again.
            extra.push((OPTIONS_AT_LOAD.to_string(), "1".to_string()));
        }
        Ok(Artifact {
            target: ArtifactTarget::of_client(&client)?,
            compile_options,
            blob,
            extra,
        })
    }
}

/// Refuses load overrides that place the program in two ways that disagree, in rpjrt's
/// words (the plugins' would speak of a device assignment the caller may not have given).
fn check_placement(o: &CompileOptions) -> Result<()> {
    let (r, p) = (o.num_replicas, o.num_partitions);
    let clash = match (o.portable, o.device_ordinal, &o.device_assignment) {
        (true, id, _) if id >= 0 => format!("portable=true and device_ordinal {id}"),
        (true, _, Some(a)) => format!("portable=true and the device assignment {a:?}"),
        (true, ..) if (r, p) != (1, 1) => format!("portable=true and {r} x {p} devices"),
        (_, id, _) if id >= 0 && (r, p) != (1, 1) => {
            format!("device_ordinal {id} and {r} x {p} devices")
        }
        (_, id, Some(a)) if id >= 0 && *a != [vec![id]] => {
            format!("device_ordinal {id} and the device assignment {a:?}")
        }
        _ => return Ok(()),
    };
    Err(Error::invalid(format!(
        "the overrides ask for {clash}, which contradict each other: a portable program \
         runs on the one device chosen at each call, and device_ordinal places a \
         single-device program on one device; give only one of them"
    )))
}

impl Client {
    /// Loads an artifact written by [`Executable::serialize`].
    ///
    /// The envelope is checked completely (magic, length, checksum, and every target field
    /// against this client) before the plugin sees the executable; a mismatch names both
    /// sides. `overrides` replaces the compile options stored in the executable, where the
    /// plugin's PJRT version has that field (0.71 and newer; older plugins refuse): a device
    /// ordinal or `portable` places the program, else it keeps its compiled devices.
    pub fn load(&self, bytes: &[u8], overrides: Option<&CompileOptions>) -> Result<Executable> {
        self.core.check("client")?;
        let artifact = Artifact::decode(bytes)?;
        artifact.check_target(&ArtifactTarget::of_client(self)?)?;
        self.load_artifact(artifact, overrides)
    }

    pub(crate) fn load_artifact(
        &self,
        artifact: Artifact,
        overrides: Option<&CompileOptions>,
    ) -> Result<Executable> {
        let (exe, _, overridden) = self.load_envelope(&artifact, &artifact.blob, overrides)?;
        // The executable keeps the artifact's blob (moved, not copied), so that serializing
        // it again gives the same bytes.
        exe.set_origin(Origin {
            source: Source::Blob(artifact.blob),
            overridden,
        });
        Ok(exe)
    }

    /// Loads a compile-cache entry read from `entry` (filed under `key`): its checked
    /// envelope `head` (whose own blob is left empty) and the executable bytes `blob`, which
    /// live in reused staging memory and so are not kept: serializing the executable reads
    /// the entry again. Also returns the time spent inside the plugin's deserialization.
    pub(crate) fn load_cache_entry(
        &self,
        head: &Artifact,
        blob: &[u8],
        entry: &std::path::Path,
        key: &str,
    ) -> Result<(Executable, std::time::Duration)> {
        let (exe, plugin_time, overridden) = self.load_envelope(head, blob, None)?;
        exe.set_origin(Origin {
            source: Source::CacheEntry {
                path: entry.to_path_buf(),
                key: key.to_string(),
            },
            overridden,
        });
        Ok((exe, plugin_time))
    }

    /// Loads the executable `blob` of an artifact whose envelope is `artifact`: with
    /// `overrides`, or with the stored options where the artifact asks for them at load.
    /// Returns the executable (with its compile options recorded), the time inside the
    /// plugin's deserialization, and whether options were given at load.
    fn load_envelope(
        &self,
        artifact: &Artifact,
        blob: &[u8],
        overrides: Option<&CompileOptions>,
    ) -> Result<(Executable, std::time::Duration, bool)> {
        let encoded = match overrides {
            Some(o) => {
                // Checked as given first (counts of 0, devices the client lacks).
                o.encode(&self.device_ids())?;
                // Loading re-places a compiled program; it does not partition it again.
                // Other counts than the compiled ones load and then compute with the
                // compiled shards (or fail inside the plugin at the first collective).
                let asked = (i64::from(o.num_replicas), i64::from(o.num_partitions));
                let recorded = crate::options::mesh_counts(&artifact.compile_options);
                if let Some(have) = recorded.filter(|&have| have != asked) {
                    return Err(Error::invalid(format!(
                        "the artifact was compiled for {} replica(s) x {} partition(s), but \
                         the overrides say {} x {}: loading places the compiled program and \
                         does not partition it again, so the counts must stay (overrides \
                         replace every compile option: give them too), or compile the program \
                         for the new counts",
                        have.0, have.1, asked.0, asked.1
                    )));
                }
                check_placement(o)?;
                // The plugins place a loaded program by its device assignment alone: a
                // device ordinal becomes one, a portable program has none (its device is
                // chosen at each call), and otherwise the artifact keeps the devices it was
                // compiled for (options given at load replace all of them).
                let mut o = o.clone();
                // How the entry takes its parameters is the compiled program's, too.
                o.parameter_is_tupled_arguments |= tupled(&artifact.compile_options);
                if o.device_assignment.is_none() && !o.portable {
                    o.device_assignment = match o.device_ordinal {
                        id if id >= 0 => Some(vec![vec![id]]),
                        _ => crate::options::recorded_assignment(&artifact.compile_options),
                    };
                }
                Some(o.encode(&self.device_ids())?)
            }
            // An artifact written from an executable loaded with other options than its
            // blob's: those options are given at load again.
            None if artifact.extra_field(OPTIONS_AT_LOAD) == Some("1")
                && !artifact.compile_options.is_empty() =>
            {
                Some(artifact.compile_options.clone())
            }
            None => None,
        };
        let options = encoded.as_deref().unwrap_or(&artifact.compile_options);
        let (exe, plugin_time) = self.load_blob_with(blob, encoded.as_deref(), options)?;
        let overridden = encoded.is_some();
        let recorded = encoded.unwrap_or_else(|| artifact.compile_options.clone());
        if !recorded.is_empty() {
            exe.set_recorded_options(recorded);
        }
        Ok((exe, plugin_time, overridden))
    }

    /// Loads a plugin's own serialized executable, with no envelope and so no checks: the
    /// explicit opt-in for bytes that [`Client::load`] refuses.
    ///
    /// A bare blob does not say which plugin or version produced it (the CPU plugins'
    /// blobs are an XLA proto with no platform or version field that rpjrt could check), so
    /// a blob from another plugin or version may be refused, abort the process, or, worst,
    /// load and compute wrong values without an error (one CPU plugin's blob runs on the
    /// other and returns zeros). Use it only for bytes this same plugin build serialized
    /// ([`Executable::serialize_bare`]); [`Executable::serialize`] writes an artifact that
    /// `load` checks against the client first.
    pub fn load_bare(&self, blob: &[u8]) -> Result<Executable> {
        self.core.check("client")?;
        if is_artifact(blob) {
            return Err(Error::invalid(
                "these bytes are an rpjrt artifact (RPJRTEXE header): load them with load(), \
                 which checks them first",
            ));
        }
        let exe = self.load_blob(blob, None)?;
        exe.set_origin(Origin {
            source: Source::Blob(blob.to_vec()),
            overridden: false,
        });
        Ok(exe)
    }

    /// An executable from what a program file holds ([`ProgramFile::read`]): a program is
    /// compiled (with `options`, or the defaults), an rpjrt artifact is loaded and checked
    /// ([`Client::load`], `options` overriding its stored ones) and a plugin's bare
    /// serialized executable is loaded unchecked ([`Client::load_bare`], `options` as for
    /// an artifact). The one path `rpjrt run` takes.
    pub fn open_program(
        &self,
        file: &ProgramFile,
        options: Option<&CompileOptions>,
    ) -> Result<Executable> {
        match file {
            ProgramFile::Program(p) => {
                self.compile(p, options.unwrap_or(&CompileOptions::default()))
            }
            ProgramFile::Artifact(bytes) => self.load(bytes, options),
            ProgramFile::Executable(blob) => {
                self.core.check("client")?;
                let encoded = match options {
                    Some(o) => Some(o.encode(&self.device_ids())?),
                    None => None,
                };
                let exe = self.load_blob(blob, encoded.as_deref())?;
                exe.set_origin(Origin {
                    source: Source::Blob(blob.clone()),
                    overridden: encoded.is_some(),
                });
                Ok(exe)
            }
        }
    }

    fn load_blob(&self, blob: &[u8], overrides: Option<&[u8]>) -> Result<Executable> {
        Ok(self
            .load_blob_with(blob, overrides, overrides.unwrap_or(&[]))?
            .0)
    }

    /// Loads a plugin blob compiled with the encoded `options` (how its entry takes its
    /// parameters); also returns the time the plugin's deserialization took.
    fn load_blob_with(
        &self,
        blob: &[u8],
        overrides: Option<&[u8]>,
        options: &[u8],
    ) -> Result<(Executable, std::time::Duration)> {
        if blob.is_empty() {
            return Err(Error::invalid("the serialized executable is empty"));
        }
        let _span =
            crate::trace::span(crate::trace::Category::Compile, "deserialize").bytes(blob.len());
        let t0 = std::time::Instant::now();
        let loaded = raw::deserialize_and_load(&self.core.raw, blob, overrides)?;
        let plugin_time = t0.elapsed();
        let exe = Executable::from_loaded_with(&self.core, loaded, options, true)?;
        Ok((exe, plugin_time))
    }

    pub(crate) fn device_ids(&self) -> Vec<i64> {
        self.core
            .devices
            .iter()
            .map(|d| d.facts.id.into())
            .collect()
    }
}
