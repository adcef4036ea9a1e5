//! `rpjrt run`: compile a program, feed it inputs, print or save its outputs, time it.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rpjrt::{ArraySpec, CompileOptions, ElementType, ProgramFile};
use rpjrt_npy::literal::{parse_literal, random};
use rpjrt_npy::scalars::Scalar;
use rpjrt_npy::{self as npy, Array};
use serde_json::{json, Value as Json};

use crate::common::{self, paint, CliError, Style, EXIT_OK};
use crate::progress::Progress;

/// Arguments of `rpjrt run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The program: StableHLO text (.mlir), MLIR bytecode or a jax.export portable
    /// artifact (.mlirbc), a serialized HloModuleProto (.pb, .hlo, .hlopb), an rpjrt
    /// artifact (what `rpjrt compile` writes; loaded, not compiled), or with
    /// `--format executable` a plugin's own serialized executable (loaded unchecked).
    pub program: PathBuf,
    /// Program format: mlir, hlo or executable (default: told from the file, as
    /// `rpjrt compile` does; a bare serialized executable is never guessed).
    #[arg(long)]
    pub format: Option<String>,
    /// The plugin: a path, a plugin or wheel name, or a platform (`cpu`).
    #[arg(long)]
    pub plugin: Option<std::ffi::OsString>,
    /// An input, as KEY=FILE.npy, KEY=LITERAL (`1.5`, `[1,2,3]:f32`), or FILE.npz (each
    /// array fills the parameter its name names, or arr_N/argN/N argument N; any other
    /// name is refused). KEY is 0-based, argN, arr_N, or the parameter's name where the
    /// program carries names (jax.export). File names need not be UTF-8.
    #[arg(
        long = "input",
        short = 'i',
        value_name = "KEY=FILE|LITERAL",
        allow_hyphen_values = true
    )]
    pub inputs: Vec<OsString>,
    /// Fill inputs that were not given with random values of the right type and shape.
    #[arg(long)]
    pub random: bool,
    /// Seed for --random.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run on this device id (default: the device an artifact was compiled for, else the
    /// plugin's first device).
    #[arg(long, allow_negative_numbers = true)]
    pub device: Option<i32>,
    /// Run this many times and report timing statistics.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Save the outputs: FILE.npz (out0, out1, ...) or FILE.npy (a single output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Create options for the client, as NAME=VALUE.
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Record rpjrt's spans (load, compile, transfer, execute, wait, fetch, custom calls)
    /// into this Chrome trace file (open it in Perfetto, or `rpjrt trace view`); written
    /// even when the run fails. A plugin's own profile (Profiler extension) goes beside it.
    #[arg(long, value_name = "TRACE.json")]
    pub trace: Option<PathBuf>,
}

/// The parameters as a message lists them: `a (f32[8]), b (f32[8])` by name where the
/// program carries names, else by index.
fn parameter_list(n: usize, params: Option<&[ArraySpec]>, names: Option<&[String]>) -> String {
    let list = parameter_list_plain(n, params, names);
    match names {
        None if n > 0 => format!(
            "{list} (this program carries no parameter names: use 0, 1, ... or arg0, arg1, ...)"
        ),
        _ => list,
    }
}

/// [`parameter_list`] without its hint for a program that carries no names.
fn parameter_list_plain(
    n: usize,
    params: Option<&[ArraySpec]>,
    names: Option<&[String]>,
) -> String {
    if n == 0 {
        return "the program takes no arguments".to_string();
    }
    let one = |i: usize| {
        let label = match names.and_then(|v| v.get(i)) {
            Some(name) => format!("{name:?}"),
            None => i.to_string(),
        };
        match params.and_then(|p| p.get(i)) {
            Some(spec) => format!("{label} ({spec})"),
            None => label,
        }
    };
    let list: Vec<String> = (0..n).map(one).collect();
    format!("its parameters are {}", list.join(", "))
}

/// The argument a positional name means by its number: `N`, `argN` (`%argN` too) or
/// np.savez's `arr_N`, N written in decimal digits. `None` for any other name.
fn positional_index(s: &str) -> Option<usize> {
    let t = s.strip_prefix('%').unwrap_or(s);
    let digits = t
        .strip_prefix("arr_")
        .or_else(|| t.strip_prefix("arg"))
        .unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // All digits: only a number past usize's range fails, and that is past the end too.
    Some(digits.parse().unwrap_or(usize::MAX))
}

/// The argument index an input key names: a parameter name the program carries, else a
/// positional name ([`positional_index`]: `0`, `arg0`, `%arg0`, `arr_0`, ...). `None` when
/// it is neither; `Some(Err(i))` for a positional name past the `n` arguments.
fn key_index(s: &str, n: usize, names: Option<&[String]>) -> Option<Result<usize, usize>> {
    if let Some(i) = names.and_then(|v| v.iter().position(|name| name == s)) {
        return Some(Ok(i));
    }
    let i = positional_index(s.trim())?;
    Some(if i < n { Ok(i) } else { Err(i) })
}

/// The argument the `.npz` member `name` of `file` fills: the parameter it names (by the
/// program's parameter names), or the argument its positional name (`arr_N`, `argN`, `N`)
/// numbers. Any other name is refused, never placed by its order in the file: a module
/// without parameter names (one lowered by JAX) would otherwise take `np.savez(alpha=..,
/// mid=.., zeta=..)` for `f(zeta, alpha, mid)` as zeta <- alpha, a wrong answer.
fn member_index(
    file: &str,
    name: &str,
    n: usize,
    params: Option<&[ArraySpec]>,
    names: Option<&[String]>,
) -> Result<usize, String> {
    // A member is matched as written: no trimming, unlike a `--input` key.
    let found = match names.and_then(|v| v.iter().position(|p| p == name)) {
        Some(i) => Some(Ok(i)),
        None => positional_index(name).map(|i| if i < n { Ok(i) } else { Err(i) }),
    };
    let how = match names {
        Some(_) => {
            "name each member after the parameter it fills, or by position: \
                    arr_0, arr_1, ... (np.savez's names for positional arrays), arg0, ... or 0, ..."
        }
        None => {
            "this program carries no parameter names: name the members by position, \
             arr_0, arr_1, ... (np.savez(file, a, b) writes these), arg0, ... or 0, ..."
        }
    };
    match found {
        Some(Ok(i)) => Ok(i),
        Some(Err(_)) => Err(format!(
            "{file}: member {name:?}: the program takes {n} argument(s); {}; {how}",
            parameter_list_plain(n, params, names)
        )),
        None => Err(format!(
            "{file}: member {name:?} names no parameter of the program; {}; {how}",
            parameter_list_plain(n, params, names)
        )),
    }
}

/// [`key_index`] for a `--input KEY=...`: an unknown key or an index past the end is a
/// usage error listing the parameters.
fn parse_key(
    s: &str,
    n: usize,
    params: Option<&[ArraySpec]>,
    names: Option<&[String]>,
) -> Result<usize, CliError> {
    match key_index(s, n, names) {
        Some(Ok(i)) => Ok(i),
        Some(Err(_)) => Err(CliError::usage(format!(
            "input {s:?}: the program takes {n} argument(s); {}",
            parameter_list(n, params, names)
        ))),
        None => Err(CliError::usage(format!(
            "input {s:?}: the program has no parameter of that name; {}",
            parameter_list(n, params, names)
        ))),
    }
}

/// Why an input of type `t` and shape `dims` cannot be argument `i` of type `spec`.
fn mismatch(i: usize, t: ElementType, dims: &[i64], spec: Option<&ArraySpec>) -> Option<String> {
    let spec = spec?;
    if t != spec.element_type {
        return Some(format!(
            "input {i}: the program takes {spec} but the input is {t}{dims:?}"
        ));
    }
    if dims != spec.dims.as_slice() {
        return Some(format!(
            "input {i}: the program takes shape {:?} ({spec}) but the input has shape {dims:?}",
            spec.dims
        ));
    }
    None
}

fn check_against(i: usize, a: &Array, spec: Option<&ArraySpec>) -> Result<(), CliError> {
    match mismatch(i, a.element_type, &a.dims, spec) {
        Some(m) => Err(CliError::usage(m)),
        None => Ok(()),
    }
}

/// Loads a `.npy`/`.npz` input, each array's header checked against the argument it will
/// fill (`slot(name)`) before its data is read: a wrong or huge array is refused from its
/// header, not after it was inflated.
fn load_input(
    file: &Path,
    params: Option<&[ArraySpec]>,
    mut slot: impl FnMut(&str) -> Result<usize, String>,
) -> Result<Vec<(String, Array)>, CliError> {
    let value = file.display();
    npy::load_checked(file, |name, t, dims| {
        let i = slot(name).map_err(rpjrt::Error::InvalidArgument)?;
        match mismatch(i, t, dims, params.and_then(|p| p.get(i))) {
            Some(m) => Err(rpjrt::Error::InvalidArgument(format!("{value}: {m}"))),
            None => Ok(()),
        }
    })
    .map_err(|e| CliError::usage(common::bare(e)))
}

/// How a parameter was given, for the message about giving it twice.
fn label(i: usize, names: Option<&[String]>) -> String {
    match names.and_then(|v| v.get(i)) {
        Some(name) => format!("argument {i} ({name:?})"),
        None => format!("argument {i}"),
    }
}

/// An `--input` as its key (`KEY=`, if any) and its value (a file or a literal), split on
/// its bytes: a file name need not be UTF-8 (a key and a literal must be). A key that is one
/// of the program's parameter `names` followed by `=` is taken first, whatever it holds
/// (JAX names its pytree leaves `p['w']`, `args[0]`, `x/y`), the longest such name when
/// several fit. Otherwise the key is what precedes the first `=`, when that holds no `/`
/// and no `[` (no number, and no plain name, does): `-i /data/a=b.npy` is the file
/// `/data/a=b.npy` (no key), and `-i 0=/data/a=b.npy` gives it to argument 0. A file in the
/// current directory whose name holds `=` is given as `./a=b.npy`, or after a key.
fn split_input<'a>(spec: &'a OsStr, names: Option<&[String]>) -> (Option<&'a OsStr>, &'a OsStr) {
    let b = spec.as_bytes();
    let named = names
        .into_iter()
        .flatten()
        .filter(|name| {
            let n = name.as_bytes();
            !n.is_empty() && b.len() > n.len() && b.starts_with(n) && b[n.len()] == b'='
        })
        .map(|name| name.len())
        .max();
    if let Some(at) = named {
        return (
            Some(OsStr::from_bytes(&b[..at])),
            OsStr::from_bytes(&b[at + 1..]),
        );
    }
    match b.iter().position(|&c| c == b'=') {
        Some(at) if !b[..at].contains(&b'[') && !b[..at].contains(&b'/') => (
            Some(OsStr::from_bytes(&b[..at])),
            OsStr::from_bytes(&b[at + 1..]),
        ),
        _ => (None, spec),
    }
}

/// The files an `--input` may read, for comparing with the outputs before the program (and
/// its parameter names, which decide [`split_input`]'s split) is read: the value as split
/// without names, and the text after the first `=` (what follows a key such as `p['w']=`),
/// and after any later `=` that follows a `[` or a quote (a key such as `p['a=b']=`).
fn possible_input_files(spec: &OsStr) -> Vec<&OsStr> {
    let b = spec.as_bytes();
    let mut out = vec![split_input(spec, None).1];
    for (at, _) in b.iter().enumerate().filter(|(_, &c)| c == b'=') {
        let first = !b[..at].contains(&b'=');
        if first || b[..at].iter().any(|c| matches!(c, b'[' | b'\'' | b'"')) {
            out.push(OsStr::from_bytes(&b[at + 1..]));
        }
    }
    out.dedup();
    out
}

/// Whether a name ends with `suffix` (`.npy`), compared without regard to case (`X.NPY`,
/// `a.Npz`).
fn has_suffix(value: &OsStr, suffix: &str) -> bool {
    let b = value.as_bytes();
    b.len() >= suffix.len() && b[b.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// Whether a name is a `.npz` file's (any case): without `KEY=`, its arrays are spread
/// over the arguments by their names.
fn is_npz_name(value: &OsStr) -> bool {
    has_suffix(value, ".npz")
}

/// Whether an `--input` value names a file whatever else it could be: a `.npy`/`.npz`
/// suffix (any case), or a `/` (no literal has one). Any other value is a literal, or a
/// file when it is no literal and a file of that name exists ([`is_file_input`]).
fn names_file(value: &OsStr) -> bool {
    has_suffix(value, ".npy") || is_npz_name(value) || value.as_bytes().contains(&b'/')
}

/// Whether an `--input` value is read as a file: it [`names_file`], or it is not a
/// literal (`literal_ok` false) and something of that name exists (a file named
/// `x.bin`; a FIFO or directory is then refused as a file, saying what it is).
fn is_file_input(value: &OsStr, literal_ok: bool) -> bool {
    names_file(value) || (!literal_ok && std::fs::symlink_metadata(value).is_ok())
}

/// What `path` is when it exists and is not a regular file (`a FIFO (named pipe)`, `a
/// directory`, ...), following symbolic links; `None` for a regular file or nothing.
fn not_a_regular_file(path: &Path) -> Option<&'static str> {
    rpjrt_raw::files::kind_of(&std::fs::metadata(path).ok()?)
}

/// The `--input` values that are, or may be, files (`KEY=FILE`, `FILE.npy`, `FILE.npz`),
/// each split every way [`gather_inputs`] may split it ([`possible_input_files`]): an
/// output must not replace one of them.
fn input_files(args: &Args) -> Vec<std::path::PathBuf> {
    args.inputs
        .iter()
        .flat_map(|spec| possible_input_files(spec))
        .filter(|v| names_file(v) || std::fs::symlink_metadata(v).is_ok())
        .map(std::path::PathBuf::from)
        .collect()
}

/// Builds the argument arrays from `--input`/`--random`, checked against `params`; input
/// keys may be the parameter `names` where the program carries them.
/// Whether an `--input` literal names its type (`[1,2,3]:f32`, `7:int8`), as
/// `rpjrt_npy::parse_literal` reads a suffix: text after the last `:` holding no `]`.
fn has_type_suffix(value: &std::ffi::OsStr) -> bool {
    value
        .to_str()
        .and_then(|t| t.trim().rsplit_once(':'))
        .is_some_and(|(_, ty)| !ty.contains(']'))
}

fn gather_inputs(
    args: &Args,
    params: Option<&[ArraySpec]>,
    names: Option<&[String]>,
) -> Result<Vec<Array>, CliError> {
    if params.is_none() && args.random {
        return Err(CliError::usage(
            "--random needs the program's parameter types, which this plugin does not report \
             (no optimized program): give every input with --input",
        ));
    }
    let n_guess = params.map(|p| p.len());
    let n = n_guess.unwrap_or(args.inputs.len());
    let mut slots: Vec<Option<Array>> = vec![None; n];
    let mut given_by: Vec<Option<String>> = vec![None; n];
    let mut put = |i: usize, a: Array, by: &str| -> Result<(), CliError> {
        if let Some(first) = &given_by[i] {
            return Err(CliError::usage(format!(
                "{} is given twice (by {first:?} and by {by:?}); {}",
                label(i, names),
                parameter_list(n, params, names)
            )));
        }
        given_by[i] = Some(by.to_string());
        slots[i] = Some(a);
        Ok(())
    };
    let mut next_positional = 0usize;
    for spec in &args.inputs {
        let (target, value) = split_input(spec, names);
        // A key is text (a parameter name or number); one that is not UTF-8 names none.
        let target = match target.map(|k| (k, k.to_str())) {
            Some((k, None)) => {
                return Err(CliError::usage(format!(
                    "input {spec:?}: its key {k:?} is not valid UTF-8, so it names no \
                     parameter; {}",
                    parameter_list(n, params, names)
                )))
            }
            Some((_, key)) => key,
            None => None,
        };
        let file = Path::new(value);
        let value_shown = file.display().to_string();
        let by = format!("{}", Path::new(spec).display());
        // A value holding `=` that split off no key (what precedes the `=` is no parameter
        // name, and holds a `/` or `[`) and names no file: a key the program does not have
        // (`p['v']=...`), or a file that does not exist. Said as both, with the parameters,
        // not as a missing file or a malformed literal alone.
        if target.is_none()
            && value.as_bytes().contains(&b'=')
            && std::fs::symlink_metadata(file).is_err()
        {
            let b = value.as_bytes();
            let key = String::from_utf8_lossy(&b[..b.iter().position(|&c| c == b'=').unwrap_or(0)]);
            return Err(CliError::usage(format!(
                "input {by:?}: {key:?} (before the \"=\") names no parameter of the program, \
                 and no file {value_shown} exists; {}",
                parameter_list(n, params, names)
            )));
        }
        if target.is_none() && is_npz_name(value) {
            let value = value_shown.as_str();
            // Each member's place, from its name alone (never its order in the file), is
            // settled from its header, before its data is read: a name that names no
            // argument, or a second member for the same one, is refused there.
            let mut seen: Vec<Option<String>> = vec![None; n];
            let arrays = load_input(file, params, |name| {
                let i = member_index(value, name, n, params, names)?;
                if let Some(first) = &seen[i] {
                    return Err(format!(
                        "{value}: members {first:?} and {name:?} both fill {}; {}",
                        label(i, names),
                        parameter_list(n, params, names)
                    ));
                }
                seen[i] = Some(name.to_string());
                Ok(i)
            })?;
            let mut last = None;
            for (name, a) in arrays {
                let i = member_index(value, &name, n, params, names).map_err(CliError::usage)?;
                put(i, a, &format!("{value}:{name}"))?;
                last = last.max(Some(i));
            }
            // An input without KEY= after the file fills the argument after the last one
            // it filled (in argument order, not file order).
            if let Some(i) = last {
                next_positional = i + 1;
            }
            continue;
        }
        let i = match target {
            Some(k) => parse_key(k, n, params, names)?,
            None => {
                if next_positional >= n {
                    return Err(CliError::usage(format!(
                        "input {by:?}: the program takes {n} argument(s); {}",
                        parameter_list(n, params, names)
                    )));
                }
                next_positional
            }
        };
        next_positional = i + 1;
        let default = params.and_then(|p| p.get(i)).map(|s| s.element_type);
        // A value that names no file is parsed as a literal first: its error is kept for
        // when no file of that name exists either.
        let literal = match (names_file(value), value.to_str()) {
            (false, Some(text)) => Some(parse_literal(text, default)),
            _ => None,
        };
        let literal_ok = matches!(literal, Some(Ok(_)));
        let a = if is_file_input(value, literal_ok) {
            if let Some(what) = not_a_regular_file(file) {
                return Err(CliError::usage(format!(
                    "input {i}: {value_shown} is {what}, not a regular file: an input is a \
                     .npy/.npz file or a literal (a FIFO, device or directory is never opened)"
                )));
            }
            let named = has_suffix(value, ".npy") || is_npz_name(value);
            if let (false, Err(e)) = (named, std::fs::metadata(file)) {
                return Err(CliError::usage(format!(
                    "input {i}: {value_shown}: it cannot be read as a file ({e}); an input \
                     is a .npy/.npz file or a literal such as 1.5 or [1,2,3]:f32"
                )));
            }
            let mut arrays = load_input(file, params, |_| Ok(i)).map_err(|e| {
                // A file named otherwise was read by its contents: say that it is neither.
                if named {
                    e
                } else {
                    CliError::usage(format!(
                        "input {i}: {value_shown} is neither a .npy nor a .npz file (its name \
                         has no .npy/.npz suffix, and its contents are not numpy's format: {})",
                        e.message
                    ))
                }
            })?;
            if arrays.len() != 1 {
                return Err(CliError::usage(format!(
                    "{value_shown} holds {} arrays; give it without INDEX= to spread them over the arguments",
                    arrays.len()
                )));
            }
            arrays.remove(0).1
        } else {
            match literal {
                // Without the program's parameter types there is no argument type to take:
                // an untyped literal would be guessed (int32 for `[1,2,3]`) and handed to a
                // plugin that may read its bytes as another type.
                Some(Ok(_)) if params.is_none() && !has_type_suffix(value) => {
                    return Err(CliError::usage(format!(
                        "input {i}: the literal {:?} has no type, and this plugin does not \
                         report the program's parameter types (no optimized program) for it \
                         to take the argument's: give its type with a suffix, such as \
                         [1,2,3]:f32 or 7:int32",
                        value.to_string_lossy()
                    )));
                }
                Some(Ok(a)) => a,
                Some(Err(e)) => {
                    // A value that may have been meant as a file name (no list, no type, no
                    // space) is said to be neither.
                    let text = value.to_string_lossy();
                    let file_like = !text.contains(['[', ']', ',', ':', ' ']);
                    let nor_file = if file_like {
                        format!(
                            "; nor is it a file: no file {value_shown} exists (an input is a \
                             literal such as 1.5 or [1,2,3]:f32, or a .npy/.npz file)"
                        )
                    } else {
                        String::new()
                    };
                    return Err(CliError::usage(format!(
                        "input {i}: {}{nor_file}",
                        crate::literal::explain(e)
                    )));
                }
                None => {
                    return Err(CliError::usage(format!(
                        "input {i}: {value:?} is neither a .npy or .npz file name nor a \
                         literal (no file of that name exists, and a literal is UTF-8 text, \
                         such as [1,2,3]:f32)"
                    )))
                }
            }
        };
        put(i, a, &by)?;
    }
    let mut out = Vec::with_capacity(n);
    for (i, slot) in slots.into_iter().enumerate() {
        let spec = params.and_then(|p| p.get(i));
        let key = match names.and_then(|v| v.get(i)) {
            Some(name) => name.clone(),
            None => i.to_string(),
        };
        let a = match (slot, spec) {
            (Some(a), _) => a,
            (None, Some(s)) if args.random => {
                random(s.element_type, &s.dims, args.seed.wrapping_add(i as u64))
                    .map_err(|e| CliError::usage(common::bare(e)))?
            }
            (None, Some(s)) => {
                return Err(CliError::usage(format!(
                    "{} ({s}) was not given: pass --input {key}=... or --random; {}",
                    label(i, names),
                    parameter_list(n, params, names)
                )))
            }
            (None, None) => {
                return Err(CliError::usage(format!("argument {i} was not given")));
            }
        };
        check_against(i, &a, spec)?;
        out.push(a);
    }
    Ok(out)
}

#[derive(Default)]
struct Phase {
    samples: Vec<Duration>,
}

impl Phase {
    fn stats(&self) -> Json {
        let mut s: Vec<f64> = self.samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        s.sort_by(f64::total_cmp);
        if s.is_empty() {
            return Json::Null;
        }
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        json!({"n": s.len(), "min_ms": s[0], "median_ms": median(&s),
               "mean_ms": mean, "max_ms": s[s.len() - 1]})
    }
}

/// The median of sorted, non-empty samples: the middle one, or for an even count the mean
/// of the two middle ones (as numpy and statistics.median give it).
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Runs `rpjrt run` (recording a trace with `--trace`).
pub fn run(args: Args) -> Result<i32, CliError> {
    check_files(&args)?;
    let Some(path) = args.trace.clone() else {
        return run_program(args, None);
    };
    crate::cmd::trace::record(&path, "rpjrt run", |profiler| {
        run_program(args, Some(profiler))
    })
}

/// The usage errors about `run`'s files, found before anything runs (a trace is not
/// started, let alone written, for a command refused): `--out`'s kind, and every output
/// against every input (program, `--input` files, plugin library) and each other.
fn check_files(args: &Args) -> Result<(), CliError> {
    if args.repeat == 0 {
        return Err(CliError::usage("--repeat must be at least 1"));
    }
    // `-` is never a file here: stdout carries the results `run` prints.
    if let Some(path) = &args.out {
        common::output_is_stdout(
            path,
            "--out",
            common::Dash::Refused(
                "it carries the results `run` prints; --json prints every value of the \
                 outputs there",
            ),
        )?;
        if out_kind(path).is_none() {
            return Err(CliError::usage(format!(
                "--out {}: give a .npz or .npy file name",
                path.display()
            )));
        }
    }
    if let Some(path) = &args.trace {
        common::output_is_stdout(
            path,
            "--trace",
            common::Dash::Refused(
                "it carries the results `run` prints, and the plugin's profile is written \
                 beside the trace file",
            ),
        )?;
    }
    let mut outputs: Vec<common::NamedPath<'_>> = Vec::new();
    if let Some(p) = &args.out {
        outputs.push(("--out", p));
    }
    // The plugin's profile (a plugin with the Profiler extension: CUDA, libtpu) goes beside
    // the trace: an output too, checked as the others are, whichever plugin it turns out
    // to be.
    let profile = args.trace.as_deref().map(rpjrt::trace::profile_path);
    let profile_label = args.trace.as_deref().map(|t| {
        format!(
            "--trace {}: the plugin's profile written beside it,",
            t.display()
        )
    });
    if let Some(p) = &args.trace {
        outputs.push(("--trace", p));
    }
    if let (Some(p), Some(label)) = (&profile, &profile_label) {
        outputs.push((label.as_str(), p.as_path()));
    }
    // With no output file, stdout (where the results go) is still checked against them.
    if outputs.is_empty() && !common::stdout_is_a_file() {
        return Ok(());
    }
    let files = input_files(args);
    let plugins = common::plugin_paths(args.plugin.as_deref());
    let mut inputs: Vec<common::NamedPath<'_>> = vec![("the program", &args.program)];
    inputs.extend(files.iter().map(|f| ("an --input file", f.as_path())));
    inputs.extend(plugins.iter().map(|p| ("the plugin library", p.as_path())));
    common::check_outputs(&outputs, &inputs)?;
    // A program is compiled through the client's compile cache, if it has one.
    let options = common::parse_options(&args.options).unwrap_or_default();
    let cache = common::cache_dir_in_use(None, &options);
    common::check_outputs_outside_cache(&outputs, cache.as_ref().map(|(n, d)| (*n, d.as_path())))
}

/// What `--out` writes, by its suffix (any case): `.npy`, one array, or `.npz`, several.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OutKind {
    Npy,
    Npz,
}

fn out_kind(path: &Path) -> Option<OutKind> {
    if has_suffix(path.as_os_str(), ".npy") {
        Some(OutKind::Npy)
    } else if is_npz_name(path.as_os_str()) {
        Some(OutKind::Npz)
    } else {
        None
    }
}

/// Refuses to run on the device `asked` (`--device`) an executable compiled for the device
/// `own` (`None`: portable, which runs anywhere), which loading could not move there (a
/// plugin before PJRT 0.71 takes no compile options at load). Without `--device` the
/// inputs go to the executable's own device, so that an artifact compiled for device 2 runs
/// there: a CLI user has no way to "copy it there first".
fn refuse_another_device(program: &Path, own: Option<i32>, asked: i32) -> Result<(), CliError> {
    match own {
        Some(own) if own != asked => Err(CliError::usage(format!(
            "{}: the executable was compiled for device {own} and cannot be moved to device \
             {asked} here: pass --device {own} (or leave --device out), or compile it \
             portable (Python compile(..., portable=True), Rust CompileOptions::portable) to \
             choose its device when it runs",
            program.display()
        ))),
        _ => Ok(()),
    }
}

/// Says on stderr that `program`, a plugin's bare serialized executable (`--format
/// executable`), is run unchecked: its bytes carry no record of the plugin build that wrote
/// them, so rpjrt cannot tell whether `plugin` is that build, and another build may run it
/// and compute garbage (exit 0) rather than refuse it. The run goes on (it is right on the
/// build that wrote it); the checked form is the artifact `rpjrt compile` writes.
pub(crate) fn warn_bare_executable(program: &std::path::Path, plugin: &std::path::Path) {
    crate::errln!(
        "{} {} is a bare serialized executable (--format executable): its bytes carry no \
         record of the plugin build that wrote them, so rpjrt cannot check them against \
         this plugin ({}); its results are only meaningful on that same plugin build (another \
         build may refuse it, or run it and compute wrong values without an error). For a \
         file rpjrt checks against the plugin, write an artifact with `rpjrt compile \
         PROGRAM -o FILE.rpjrt` (or Python's Executable.serialize()) and run that",
        common::paint_stderr("rpjrt: warning:", Style::Yellow),
        common::printable_path(program),
        common::printable_path(plugin),
    );
}

/// Runs `rpjrt run`; with `profiler`, starts the plugin's profiler once the client exists.
fn run_program(
    args: Args,
    profiler: Option<&mut crate::cmd::trace::ProfilerSlot>,
) -> Result<i32, CliError> {
    let program = common::read_program_file(
        &args.program,
        args.format.as_deref(),
        "`rpjrt run` tells an artifact from its bytes and loads it: leave --format out",
    )?;
    let t = Instant::now();
    let options = common::parse_options(&args.options)?;
    let progress = Progress::new(args.json);
    let spinner = progress.spinner("loading the plugin and creating a client");
    let (client, plugin, _) = common::open_client(args.plugin.as_deref(), &options)?;
    let _leak_client = common::LeakClientOnReturn;
    drop(spinner);
    let load = t.elapsed();
    if let ProgramFile::Executable(_) = &program {
        warn_bare_executable(&args.program, plugin.path());
    }
    if let Some(slot) = profiler {
        slot.begin(&client);
    }

    let chosen = match args.device {
        Some(id) => Some(
            client
                .lookup_device(id)
                .map_err(|e| CliError::usage(format!("--device {id}: {e}")))?,
        ),
        None => None,
    };
    let pinned = match &chosen {
        Some(d) => Some(CompileOptions::default().on_device(i64::from(d.id()))?),
        None => None,
    };
    let t = Instant::now();
    let spinner = progress.spinner(&format!("compiling {}", args.program.display()));
    let watch = common::watch_plugin(&format!("compile of {}", args.program.display()));
    let exe = client
        .open_program(&program, pinned.as_ref())
        .or_else(|e| match (&program, &e) {
            // An artifact that could not be placed on --device (a plugin before PJRT 0.71
            // takes no compile options at load; one compiled for several devices keeps
            // them): loaded as compiled, for the checks below to say what to do instead.
            (
                ProgramFile::Artifact(_),
                rpjrt::Error::Unsupported { .. } | rpjrt::Error::InvalidArgument(_),
            ) if pinned.is_some() => client.open_program(&program, None).map_err(|_| e),
            _ => Err(e),
        })
        .map_err(|e| {
            // rpjrt's own refusals (an artifact for another plugin, a damaged one) are bad
            // input, exit 2; what the plugin reports is a failure, exit 1.
            let text = match &program {
                ProgramFile::Program(_) => format!("compile failed: {e}"),
                _ => format!("loading {}: {e}", args.program.display()),
            };
            match e {
                rpjrt::Error::InvalidArgument(_) => CliError::usage(text),
                _ => CliError::failed(text),
            }
        })?;
    drop(watch);
    drop(spinner);
    // What the client's compile cache (RPJRT_CACHE_DIR, a cache_dir option) had to say:
    // an unusable entry removed, flags that keep it out of use, an entry not stored.
    for w in client
        .cache()
        .map(|c| c.take_warnings())
        .unwrap_or_default()
    {
        crate::errln!("rpjrt: warning: {}", common::printable_lines(&w));
    }
    let devices = exe.num_replicas() * exe.num_partitions();
    if devices > 1 {
        return Err(CliError::usage(format!(
            "{}: the executable runs on {devices} devices ({} replica(s) x {} partition(s)); \
             `rpjrt run` runs single-device programs: compile it for one device, or run it \
             with Executable.execute_sharded from Python or Rust",
            args.program.display(),
            exe.num_replicas(),
            exe.num_partitions()
        )));
    }
    // Without --device, the executable's own device (a portable one: the first device).
    let own = exe.addressable_devices()?.into_iter().next();
    let device = match chosen {
        Some(d) => {
            refuse_another_device(&args.program, own.as_ref().map(|o| o.id()), d.id())?;
            d
        }
        None => exe.default_device()?,
    };
    let compile = t.elapsed();
    // Outputs that --out could not save are refused before anything runs: a .npy holds
    // one array, and each output's type must have a numpy name.
    if let Some(path) = &args.out {
        let with_data = exe
            .outputs()
            .iter()
            .filter(|o| o.element_type != rpjrt::ElementType::Token)
            .count();
        if out_kind(path) == Some(OutKind::Npy) && with_data != 1 {
            return Err(CliError::usage(format!(
                "--out {}: the program has {with_data} outputs with data, and a .npy file \
                 holds one array; save them as .npz",
                path.display()
            )));
        }
        for (i, spec) in exe.outputs().iter().enumerate() {
            // A token has no data: it is left out of the file (and printed as a token).
            if spec.element_type == rpjrt::ElementType::Token {
                continue;
            }
            if let Err(e) = npy::descr_of(spec.element_type) {
                return Err(CliError::usage(format!(
                    "--out {}: output {i} is {spec}: {}; print it with --json instead",
                    path.display(),
                    common::bare(e)
                )));
            }
        }
    }
    // Names count only when they cover the compiled program's parameters one to one.
    let names = program
        .parameter_names()
        .filter(|v| exe.parameters().is_none_or(|p| p.len() == v.len()));
    let inputs = gather_inputs(&args, exe.parameters(), names.as_deref())?;

    let (mut transfer, mut execute, mut fetch) =
        (Phase::default(), Phase::default(), Phase::default());
    // `None` for a token output, which only orders effects and has no data to read.
    let mut outputs: Vec<Option<Array>> = Vec::new();
    for round in 0..args.repeat {
        // The first round is watched (a plugin hanging says so after a while); later ones
        // are not, so that --repeat times no watcher thread.
        let watch = |step: &str| (round == 0).then(|| common::watch_plugin(step));
        let watching = watch("transfer of the inputs");
        let t = Instant::now();
        let bufs = inputs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                client
                    .buffer_from_host(&a.data, a.element_type, &a.dims, None, &device, None)
                    .map_err(|e| {
                        let request = format!(
                            "{}{:?}, {} bytes, on device {}",
                            a.element_type,
                            a.dims,
                            a.data.len(),
                            device.id()
                        );
                        let text = common::explain_request(&e, Some(&device), &request);
                        CliError::failed(format!("input {i}: {text}"))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for b in &bufs {
            b.block_until_ready()?;
        }
        transfer.samples.push(t.elapsed());
        drop(watching);
        let refs: Vec<&rpjrt::Buffer> = bufs.iter().collect();
        let watching = watch("execution");
        let t = Instant::now();
        let outs = match own {
            Some(_) => exe.execute(&refs),
            None => exe.execute_on(&device, &refs),
        }
        .map_err(|e| CliError::failed(common::explain(&e, Some(&device))))?;
        for o in &outs {
            o.block_until_ready()
                .map_err(|e| CliError::failed(common::explain(&e, Some(&device))))?;
        }
        execute.samples.push(t.elapsed());
        drop(watching);
        let watching = watch("transfer of the outputs");
        let t = Instant::now();
        outputs = outs
            .iter()
            .map(|o| match o.element_type() {
                rpjrt::ElementType::Token => Ok(None),
                t => Ok(Some(Array::new(t, o.dims().to_vec(), o.to_vec()?)?)),
            })
            .collect::<Result<Vec<_>, CliError>>()?;
        fetch.samples.push(t.elapsed());
        drop(watching);
        // The round's buffers are destroyed here, under the same watch as every other
        // plugin call of the round: a plugin hanging in PJRT_Buffer_Destroy says so.
        let watching = watch("release of the round's buffers (PJRT_Buffer_Destroy)");
        drop(refs);
        drop(outs);
        drop(bufs);
        drop(watching);
    }

    if let Some(path) = &args.out {
        let arrays: Vec<(usize, &Array)> = outputs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.as_ref().map(|a| (i, a)))
            .collect();
        // The kind and the count were checked before anything ran.
        let saved = match (out_kind(path), arrays.as_slice()) {
            (Some(OutKind::Npy), [(_, only)]) => npy::save_npy(path, only),
            _ => {
                let named: Vec<(String, Array)> = arrays
                    .iter()
                    .map(|(i, a)| (format!("out{i}"), (*a).clone()))
                    .collect();
                npy::save_npz(path, &named)
            }
        };
        // The work is done: a file that cannot be written now is a failure (exit 1).
        saved.map_err(|e| common::output_failed("--out", path, e))?;
    }

    let timings = json!({
        "load_ms": load.as_secs_f64() * 1e3,
        "compile_ms": compile.as_secs_f64() * 1e3,
        "transfer": transfer.stats(), "execute": execute.stats(), "fetch": fetch.stats(),
    });
    if args.json {
        let outs: Vec<Json> = outputs
            .iter()
            .map(|a| match a {
                Some(a) => json!({
                    "dtype": a.element_type.name(), "shape": a.dims, "data": nested_json(a)
                }),
                None => json!({"dtype": "token", "shape": [], "data": null}),
            })
            .collect();
        let mut doc = json!({
            "device": device.id(),
            "outputs": outs,
            "timings": timings,
        });
        // Losslessly: a path that is not UTF-8 gets a `_hex` field too (docs/cli.md).
        common::set_path_json(&mut doc, "program", &args.program);
        common::set_path_json(&mut doc, "plugin", plugin.path());
        common::print_json(&doc)?;
        crate::common::work_done();
        return Ok(EXIT_OK);
    }
    for (i, a) in outputs.iter().enumerate() {
        let shown = a.as_ref().map_or_else(|| "token".to_string(), format_numpy);
        crate::outln!("{} {shown}", paint(&format!("out{i}:"), Style::Bold));
    }
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    crate::outln!(
        "{}",
        paint(
            &format!("load {}  compile {}", ms(load), ms(compile)),
            Style::Dim
        )
    );
    for (name, p) in [
        ("transfer", &transfer),
        ("execute", &execute),
        ("fetch", &fetch),
    ] {
        let s = p.stats();
        let line = if args.repeat > 1 {
            format!(
                "{name:<9} min {:.3}  median {:.3}  mean {:.3}  max {:.3} ms  (n={})",
                s["min_ms"].as_f64().unwrap_or(0.0),
                s["median_ms"].as_f64().unwrap_or(0.0),
                s["mean_ms"].as_f64().unwrap_or(0.0),
                s["max_ms"].as_f64().unwrap_or(0.0),
                args.repeat
            )
        } else {
            format!("{name:<9} {:.3} ms", s["min_ms"].as_f64().unwrap_or(0.0))
        };
        crate::outln!("{}", paint(&line, Style::Dim));
    }
    crate::common::work_done();
    Ok(EXIT_OK)
}

fn scalar_json(s: Scalar) -> Json {
    match s {
        Scalar::Bool(b) => json!(b),
        // Array::get reads at most 64-bit integers: they fit i64 or u64.
        Scalar::Int(i) => i64::try_from(i)
            .map(|v| json!(v))
            .or_else(|_| u64::try_from(i).map(|v| json!(v)))
            .unwrap_or_else(|_| json!(i.to_string())),
        Scalar::BigInt(s) => json!(s.to_string()),
        Scalar::Float(f) => float_json(f),
        // Each part as a float is: NaN and the infinities as text, never null.
        Scalar::Complex(re, im) => json!([float_json(re), float_json(im)]),
    }
}

/// A float as JSON: a number when finite, else `"nan"`, `"inf"` or `"-inf"` (JSON has no
/// such numbers; serde would write null): one spelling, numpy's and the literals', so a
/// value copied from the output reads back as an `--input` literal.
fn float_json(f: f64) -> Json {
    common::nonfinite_json(f)
}

fn nested_json(a: &Array) -> Json {
    fn go(a: &Array, dim: usize, offset: usize, stride: usize) -> Json {
        if dim == a.dims.len() {
            return a.get(offset).map(scalar_json).unwrap_or(Json::Null);
        }
        let n = a.dims[dim].max(0) as usize;
        let inner = stride / n.max(1);
        Json::Array(
            (0..n)
                .map(|i| go(a, dim + 1, offset + i * inner, inner))
                .collect(),
        )
    }
    go(a, 0, 0, a.len())
}

fn format_scalar(s: Scalar, ty: ElementType) -> String {
    match s {
        Scalar::Bool(b) => if b { "True" } else { "False" }.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::BigInt(s) => s.to_string(),
        Scalar::Float(f) => format_float(f, ty),
        Scalar::Complex(re, im) => format!(
            "{}{}{}j",
            format_float(re, ty),
            // The sign bit, as numpy prints it (`-0.j`), except for NaN (`+nanj`).
            if im.is_sign_negative() && !im.is_nan() {
                "-"
            } else {
                "+"
            },
            format_float(im.abs(), ty)
        ),
    }
}

fn format_float(f: f64, ty: ElementType) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Shortest representation at the type's precision, as numpy prints; in scientific
    // notation (`1.e+300`, `1.5e-05`) outside [1e-4, 1e16), where numpy switches too (for
    // float16 from 1e3 on: numpy's cutoff is 10 to the type's decimal precision, 3 digits).
    let single = matches!(ty, ElementType::F32 | ElementType::C64);
    let a = f.abs();
    let upper = if ty == ElementType::F16 { 1e3 } else { 1e16 };
    // A narrower type (float16, bfloat16, the float8/6/4 types): the shortest decimal that
    // reads back as the same value of that type, printed as a float64 (which shows it as
    // written): 0.1 for float16's 0.0999755859375, not every binary digit. A whole number
    // printed in full is printed exactly (float8_e4m3fn's 448 is `448.`, not `450.`), as
    // ml_dtypes prints it.
    let f = match shortest_in(f, ty) {
        d if d != f && d.fract() == 0.0 && a < upper => f,
        d => d,
    };
    if a != 0.0 && !(1e-4..upper).contains(&a) {
        let s = if single {
            format!("{:e}", f as f32)
        } else {
            format!("{f:e}")
        };
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.")
        };
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    let s = if single {
        format!("{}", f as f32)
    } else {
        format!("{f}")
    };
    if s.contains(['.', 'e', 'i', 'n']) {
        s
    } else {
        format!("{s}.")
    }
}

/// The value of type `ty` nearest to `x`, as a float64 (`x` rounded to the type, as
/// `rpjrt_npy::scalars::encode_float` rounds); `None` when the type cannot hold it.
fn round_in(x: f64, ty: ElementType) -> Option<f64> {
    let bits = rpjrt_npy::scalars::encode_float(x, ty).ok()?;
    rpjrt_npy::scalars::decode_float(bits, ty)
}

/// For a float type narrower than float32 (`ty`), the number with the fewest significant
/// decimal digits that rounds to `f` in that type, the nearest to `f` of those (what numpy
/// and ml_dtypes print: float16 0.0999755859375 is `0.1`); `f` itself for float32, float64
/// and the complex types (printed by their own shortest forms), for zero and for a value
/// that is not finite. Also `f` itself for float8_e8m0fnu, a scale type of powers of two
/// only, whose every other value is a factor of 2 away: the shortest decimal that rounds
/// to 0.25 there is `0.2`, which would read as a value the type cannot hold.
fn shortest_in(f: f64, ty: ElementType) -> f64 {
    use ElementType as T;
    if matches!(ty, T::F32 | T::F64 | T::C64 | T::C128 | T::F8E8M0FNU) || f == 0.0 || !f.is_finite()
    {
        return f;
    }
    if round_in(f, ty) != Some(f) {
        return f; // Not a value of the type: shown as it is.
    }
    for digits in 1..=17usize {
        // The nearest decimal of `digits` significant digits, and its neighbours (at a power
        // of two the interval that rounds to `f` is lopsided: the nearest may fall outside
        // it while the one on the other side is inside).
        let text = format!("{:.*e}", digits - 1, f);
        let Some((mantissa, exp)) = text.split_once('e') else {
            return f;
        };
        let (Ok(m), Ok(e)) = (mantissa.replace('.', "").parse::<i64>(), exp.parse::<i32>()) else {
            return f;
        };
        let scale = e - (digits as i32 - 1);
        let best = [m, m - 1, m + 1]
            .into_iter()
            .filter_map(|m| format!("{m}e{scale}").parse::<f64>().ok())
            .filter(|&d| round_in(d, ty) == Some(f))
            .min_by(|a, b| (a - f).abs().total_cmp(&(b - f).abs()));
        if let Some(d) = best {
            return d;
        }
    }
    f
}

/// numpy-style text of an array: `array([1., 2.], dtype=float32)`. As numpy prints by
/// default: an array of more than 1000 elements is summarised, each dimension longer than
/// 6 showing its first and last 3 entries around `...`; a smaller one prints whole.
pub fn format_numpy(a: &Array) -> String {
    /// numpy's `threshold` and `edgeitems`.
    const THRESHOLD: usize = 1000;
    const EDGE: usize = 3;
    let summarise = a.len() > THRESHOLD;
    let go_args = (summarise,);
    fn go(
        a: &Array,
        dim: usize,
        offset: usize,
        stride: usize,
        indent: usize,
        (summarise,): (bool,),
    ) -> String {
        if dim == a.dims.len() {
            return a
                .get(offset)
                .map(|s| format_scalar(s, a.element_type))
                .unwrap_or_else(|| "?".into());
        }
        let n = a.dims[dim].max(0) as usize;
        let inner = stride / n.max(1);
        let cut = summarise && n > 2 * EDGE;
        let shown: Vec<usize> = if cut {
            (0..EDGE).chain(n - EDGE..n).collect()
        } else {
            (0..n).collect()
        };
        let mut parts = Vec::new();
        for (k, &i) in shown.iter().enumerate() {
            if cut && k == EDGE {
                parts.push("...".to_string());
            }
            parts.push(go(
                a,
                dim + 1,
                offset + i * inner,
                inner,
                indent + 1,
                (summarise,),
            ));
        }
        let sep = if dim + 1 < a.dims.len() {
            format!(",\n{}", " ".repeat(indent + 1))
        } else {
            ", ".to_string()
        };
        format!("[{}]", parts.join(&sep))
    }
    // An empty array other than 1-D shows its shape, as numpy does: `[]` alone would read
    // as shape (0,).
    if a.is_empty() && a.dims.len() != 1 {
        let dims: Vec<String> = a.dims.iter().map(|d| d.to_string()).collect();
        return format!(
            "array([], shape=({}), dtype={})",
            dims.join(", "),
            a.element_type.name()
        );
    }
    let body = go(a, 0, 0, a.len(), 6, go_args);
    format!("array({body}, dtype={})", a.element_type.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// float16, bfloat16 and the float8 types printed every binary digit of a value
    /// (`0.0999755859375`); now the shortest decimal that reads back as the same value of
    /// the type, as numpy prints float16 (scientific from 1e3 on), a whole number whole.
    #[test]
    fn narrow_floats_print_their_shortest_decimal() {
        let f = |x: f64, t: ElementType| format_float(x, t);
        assert_eq!(f(0.0999755859375, ElementType::F16), "0.1");
        assert_eq!(f(0.300048828125, ElementType::F16), "0.3");
        assert_eq!(f(65504.0, ElementType::F16), "6.55e+04");
        assert_eq!(f(2048.0, ElementType::F16), "2.048e+03");
        assert_eq!(f(999.0, ElementType::F16), "999.");
        assert_eq!(f(6.103515625e-05, ElementType::F16), "6.104e-05");
        assert_eq!(f(-0.0, ElementType::F16), "-0.");
        assert_eq!(f(0.10009765625, ElementType::BF16), "0.1");
        assert_eq!(f(1504.0, ElementType::BF16), "1504.");
        assert_eq!(f(0.1015625, ElementType::F8E4M3FN), "0.1");
        assert_eq!(f(448.0, ElementType::F8E4M3FN), "448.");
        assert_eq!(f(-57344.0, ElementType::F8E5M2), "-57344.");
        assert_eq!(f(0.001953125, ElementType::F8E4M3FN), "0.002");
        // Powers of two only: exact.
        assert_eq!(f(0.25, ElementType::F8E8M0FNU), "0.25");
        // float32 and float64 as before.
        assert_eq!(f(f64::from(0.1f32), ElementType::F32), "0.1");
        assert_eq!(f(0.1, ElementType::F64), "0.1");
        // Every float16 value prints as a decimal that reads back as itself.
        for bits in 0u64..0x7c00 {
            let x = rpjrt_npy::scalars::decode_float(bits, ElementType::F16).unwrap();
            let text = f(x, ElementType::F16);
            let back: f64 = text
                .trim_end_matches('.')
                .replace(".e", "e")
                .parse()
                .unwrap();
            assert_eq!(round_in(back, ElementType::F16), Some(x), "{x}: {text}");
        }
    }

    /// An executable compiled for another device than `--device` that could not be moved
    /// is refused naming the device to pass (not "copy it there first"); its own device,
    /// and a portable executable, are not.
    #[test]
    fn another_device_than_the_compiled_one_is_refused_naming_it() {
        let p = Path::new("prog.rpjrt");
        let e = refuse_another_device(p, Some(2), 0).unwrap_err();
        assert_eq!(e.exit_code, crate::common::EXIT_USAGE);
        assert!(
            e.message.starts_with(
                "prog.rpjrt: the executable was compiled for device 2 and cannot be moved \
                 to device 0 here: pass --device 2 (or leave --device out), or compile it \
                 portable"
            ),
            "{}",
            e.message
        );
        assert!(refuse_another_device(p, Some(2), 2).is_ok());
        assert!(refuse_another_device(p, None, 3).is_ok());
    }

    /// The imaginary part's sign is its sign bit, as numpy prints it: `-0.j` (printed as
    /// `+0.j` before), while a NaN prints `+nanj` whatever its sign.
    #[test]
    fn complex_parts_print_their_sign_bit() {
        let c = |re: f64, im: f64| format_scalar(Scalar::Complex(re, im), ElementType::C64);
        assert_eq!(c(1.0, -0.0), "1.-0.j");
        assert_eq!(c(1.0, 0.0), "1.+0.j");
        assert_eq!(c(1.0, -f64::NAN), "1.+nanj");
        assert_eq!(c(1.0, f64::NEG_INFINITY), "1.-infj");
    }

    #[test]
    fn numpy_style_text() {
        let a = parse_literal("[[1, 2.5], [3, 4]]:f32", None).unwrap();
        assert_eq!(
            format_numpy(&a),
            "array([[1., 2.5],\n       [3., 4.]], dtype=float32)"
        );
        let b = parse_literal("[true, false]", None).unwrap();
        assert_eq!(format_numpy(&b), "array([True, False], dtype=bool)");
        let s = parse_literal("7:int64", None).unwrap();
        assert_eq!(format_numpy(&s), "array(7, dtype=int64)");
        // Far from 1, floats print in numpy's scientific notation, not hundreds of digits.
        let big = parse_literal("[1e300, -1.5e-5, 0.25]:f64", None).unwrap();
        assert_eq!(
            format_numpy(&big),
            "array([1.e+300, -1.5e-05, 0.25], dtype=float64)"
        );
        let f = parse_literal("[3e38, 1e-7]:f32", None).unwrap();
        assert_eq!(format_numpy(&f), "array([3.e+38, 1.e-07], dtype=float32)");
        // Every type prints its values: float8, the packed int4 (no "?").
        let f8 = parse_literal("[1.5, -448]:f8e4m3fn", None).unwrap();
        assert_eq!(
            format_numpy(&f8),
            "array([1.5, -448.], dtype=float8_e4m3fn)"
        );
        let i4 = parse_literal("[1, -2, 7]:int4", None).unwrap();
        assert_eq!(format_numpy(&i4), "array([1, -2, 7], dtype=int4)");
        // Non-finite floats and complex parts are text in JSON, never null.
        let c = parse_literal("[nan, -inf]:c64", None).unwrap();
        assert_eq!(nested_json(&c).to_string(), r#"[["nan",0.0],["-inf",0.0]]"#);
        let f = parse_literal("[nan, inf, 1]:f32", None).unwrap();
        assert_eq!(nested_json(&f).to_string(), r#"["nan","inf",1.0]"#);
        // ... and what run --json writes reads back as an --input literal.
        let back = parse_literal(&nested_json(&f).to_string(), None).unwrap();
        assert_eq!(format_numpy(&back), format_numpy(&f));
    }

    /// Every dimension longer than 10 was cut to `1, 2, 3, ..., 10, 11, 12`, so a
    /// 12-element output lost values from the default text. numpy summarises only arrays
    /// of more than 1000 elements (3 edge items per dimension longer than 6).
    #[test]
    fn outputs_are_summarised_only_past_numpys_threshold() {
        let list = |n: usize| (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        let a = parse_literal(&format!("[{}]:int32", list(12)), None).unwrap();
        assert_eq!(
            format_numpy(&a),
            "array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], dtype=int32)"
        );
        // 1000 elements: whole.
        let a = parse_literal(&format!("[{}]:int32", list(1000)), None).unwrap();
        let t = format_numpy(&a);
        assert!(!t.contains("..."), "{t}");
        assert!(t.contains(" 500, 501, "), "{t}");
        // 1001: summarised, as numpy prints it.
        let a = parse_literal(&format!("[{}]:int32", list(1001)), None).unwrap();
        assert_eq!(
            format_numpy(&a),
            "array([1, 2, 3, ..., 999, 1000, 1001], dtype=int32)"
        );
        // 2-d, 2 x 600: the short dimension stays whole, the long one is cut.
        let row = |base: usize| {
            format!(
                "[{}]",
                (base..base + 600)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        let a = parse_literal(&format!("[{},{}]:int32", row(0), row(600)), None).unwrap();
        assert_eq!(
            format_numpy(&a),
            "array([[0, 1, 2, ..., 597, 598, 599],\n       [600, 601, 602, ..., 1197, 1198, 1199]], \
             dtype=int32)"
        );
        // 1100 x 1: the long dimension is cut, rows as numpy shows them.
        let col = (0..1100)
            .map(|i| format!("[{i}]"))
            .collect::<Vec<_>>()
            .join(",");
        let a = parse_literal(&format!("[{col}]:int32"), None).unwrap();
        assert_eq!(
            format_numpy(&a),
            "array([[0],\n       [1],\n       [2],\n       ...,\n       [1097],\n       \
             [1098],\n       [1099]], dtype=int32)"
        );
    }
}
