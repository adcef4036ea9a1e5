//! `rpjrt cache ls|info|clear`: inspect and empty a compile-cache directory.

use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Args, Subcommand};
use rpjrt::{Cache, CacheEntry};
use serde_json::{json, Value as Json};

use crate::common::{printable, printable_path, CliError};

/// Arguments of `rpjrt cache`.
#[derive(Args, Debug)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub action: CacheAction,
}

/// What to do with the cache.
#[derive(Subcommand, Debug)]
pub enum CacheAction {
    /// List the entries, most recently used first.
    Ls(DirArgs),
    /// Show one entry (by key or a unique key prefix).
    Info {
        /// The entry's key or a unique prefix of it (or its file name, KEY.rpjrtexe).
        key: String,
        #[command(flatten)]
        dir: DirArgs,
    },
    /// Remove every entry.
    Clear(DirArgs),
}

/// The directory and output style shared by the cache actions.
#[derive(Args, Debug)]
pub struct DirArgs {
    /// The cache directory; defaults to $RPJRT_CACHE_DIR.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The cache directory named by `--dir` or `RPJRT_CACHE_DIR`; a missing or wrong one is a
/// usage error (exit 2).
fn open(dir: Option<PathBuf>) -> Result<Cache, CliError> {
    let dir = match dir {
        Some(d) => d,
        None => match std::env::var_os("RPJRT_CACHE_DIR") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => {
                return Err(CliError::usage(
                    "no cache directory: pass --dir or set RPJRT_CACHE_DIR",
                ))
            }
        },
    };
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "{} is not a cache directory",
            printable_path(&dir)
        )));
    }
    Cache::new(&dir, None).map_err(|e| CliError::usage(crate::common::bare(e)))
}

fn age_s(t: SystemTime) -> f64 {
    SystemTime::now()
        .duration_since(t)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn entry_json(e: &CacheEntry) -> Json {
    let target = e.target.as_ref().map(crate::common::target_json);
    let mut doc = json!({
        "key": e.key,
        "bytes": e.size,
        "last_used_seconds_ago": age_s(e.last_used),
        "compile_ms": e.compile_ms,
        "target": target,
        "error": e.error,
    });
    crate::common::set_path_json(&mut doc, "path", &e.path);
    doc
}

/// The suffix of an entry's file in the cache directory (`<key>.rpjrtexe`).
const ENTRY_SUFFIX: &str = ".rpjrtexe";

/// The entry `key` (or a unique key prefix, or the entry's file name) names, described for `cache info`: every byte
/// read and verified (the checksum included), unless its header already shows it
/// unusable. The header is checked first, as `cache ls` and a compile check it: an entry
/// whose file is far larger than its header says (a file grown to 2 GiB, say) is reported
/// from the few hundred bytes of its head, never read whole into memory.
fn describe(cache: &Cache, key: &str) -> Result<CacheEntry, CliError> {
    // An entry's file name, as `ls DIR` shows it (`KEY.rpjrtexe`), names its key.
    let key = key.strip_suffix(ENTRY_SUFFIX).unwrap_or(key);
    let by_header: Vec<CacheEntry> = if key.trim().is_empty() {
        Vec::new()
    } else {
        cache
            .entries()
            .map_err(|e| CliError::failed(e.to_string()))?
            .into_iter()
            .filter(|e| e.key.starts_with(key))
            .collect()
    };
    if let [one] = &by_header[..] {
        if one.error.is_some() {
            return Ok(one.clone());
        }
    }
    // None, several (the library says which), or one whose header is sound.
    cache
        .info(key)
        .map_err(|e| CliError::usage(crate::common::bare(e)))
}

/// Refuses (exit 2) a stdout that is one of the cache entries read (`rpjrt cache ls >>
/// DIR/KEY.rpjrtexe`): the listing would be written into the entry.
fn check_stdout_not_entry(entries: &[CacheEntry]) -> Result<(), CliError> {
    let inputs: Vec<crate::common::NamedPath<'_>> = entries
        .iter()
        .map(|e| ("a compile cache entry", e.path.as_path()))
        .collect();
    crate::common::check_stdout(&inputs)
}

/// Runs `rpjrt cache ...`: a bad directory or an unknown key is a usage error (exit 2),
/// a failure to read or remove entries exit 1.
pub fn run(a: CacheArgs) -> Result<(), CliError> {
    match a.action {
        CacheAction::Ls(d) => {
            let cache = open(d.dir)?;
            let entries = cache
                .entries()
                .map_err(|e| CliError::failed(e.to_string()))?;
            check_stdout_not_entry(&entries)?;
            if d.json {
                let total: u64 = entries.iter().map(|e| e.size).sum();
                let mut doc = json!({
                    "total_bytes": total,
                    "entries": entries.iter().map(entry_json).collect::<Vec<_>>(),
                });
                crate::common::set_path_json(&mut doc, "dir", cache.dir());
                return crate::common::print_json(&doc);
            }
            crate::outln!(
                "{:<16} {:>10} {:>10} {:>9}  target",
                "key",
                "bytes",
                "compile ms",
                "age s"
            );
            for e in &entries {
                let target = match (&e.target, &e.error) {
                    (Some(t), _) => printable(&t.to_string()).into_owned(),
                    (None, Some(err)) => format!("unusable: {}", printable(err)),
                    (None, None) => "-".into(),
                };
                crate::outln!(
                    "{:<16} {:>10} {:>10} {:>9.0}  {target}",
                    // By characters: an entry's name is any file name, and a byte
                    // index could fall inside a multi-byte character.
                    printable(&e.key.chars().take(16).collect::<String>()),
                    e.size,
                    e.compile_ms.map_or("-".into(), |m| format!("{m:.1}")),
                    age_s(e.last_used)
                );
            }
            crate::outln!("{} entries", entries.len());
            Ok(())
        }
        CacheAction::Info { key, dir } => {
            let cache = open(dir.dir)?;
            let e = describe(&cache, &key)?;
            check_stdout_not_entry(std::slice::from_ref(&e))?;
            if dir.json {
                return crate::common::print_json(&entry_json(&e));
            }
            crate::outln!("key          {}", printable(&e.key));
            crate::outln!("path         {}", printable_path(&e.path));
            crate::outln!("bytes        {}", e.size);
            if let Some(ms) = e.compile_ms {
                crate::outln!("compile ms   {ms:.1}");
            }
            if let Some(err) = &e.error {
                crate::outln!("unusable     {}", printable(err));
            }
            if let Some(t) = &e.target {
                for (k, v) in t.fields() {
                    crate::outln!("{k:<26} {}", printable(&v.to_string()));
                }
            }
            Ok(())
        }
        CacheAction::Clear(d) => {
            let cache = open(d.dir)?;
            let n = cache.clear().map_err(|e| CliError::failed(e.to_string()))?;
            if d.json {
                return crate::common::print_json(&json!({"removed": n}));
            }
            crate::outln!("removed {n} entries from {}", printable_path(cache.dir()));
            Ok(())
        }
    }
}
