//! Session checkpoints: every slot of an [`rpjrt::Session`] in one `.npz` file, and back.
//!
//! [`save`] writes a stored zip of `.npy` members, one per slot, as `np.savez` writes, so
//! `np.load(path)` reads it; each member is named the slot's name plus `.npy` (any slot
//! name round-trips exactly: `w` and `w.npy` are two slots and two members). Types numpy
//! has a type string for are stored as themselves; the others (bfloat16, float8, int4 ...)
//! as `uint8` arrays with a trailing axis of the element's byte size (one byte per element
//! for the sub-byte types, as ml_dtypes holds them). The member [`DTYPES_KEY`] (a numpy
//! string holding a JSON object) names every slot's element type, so
//! `arr.view(ml_dtypes.bfloat16)[..., 0]` recovers such a slot.
//!
//! [`restore`] binds every array of an `.npz` file to the slot of its name, all or nothing.
//! It checks before it reads: a name stored twice is refused naming it, and each member's
//! `.npy` header is checked against its slot's type and shape, and against the size the
//! archive declares, before any of its data is inflated; no more data is read than the
//! header describes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rpjrt::{
    element_count, try_unpack_sub_byte, ArraySpec, Buffer, ByteOrder, CopyMode, ElementType, Error,
    HostArray, Result, Session, SlotValue,
};

use crate::npy::{
    byte_order_of_descr, decode_text, descr_of, ml_dtypes_guess, text_len, type_of_descr,
    write_npy_raw, Header,
};
use crate::npz::{bare, io_err, write_members, NpzReader, MAX_NUMPY_DIMS};
use crate::{invalid, npy};

/// The `.npz` member of a checkpoint that records each slot's element type name (numpy has
/// no type string for bfloat16, the float8 types or the sub-byte integers).
pub const DTYPES_KEY: &str = "__rpjrt_dtypes__";

/// The largest type table read (the JSON of slot names and type names).
const MAX_TABLE: usize = 64 << 20;

/// Writes every slot of `session` that holds a value to an `.npz` file at `path`,
/// atomically (a temporary file in the same directory, renamed over `path` once complete).
///
/// Slots whose loader has not run are loaded first; empty slots are left out; a slot whose
/// buffer was deleted is an error naming it, and the old file is left as it was.
pub fn save(session: &Session, path: impl AsRef<Path>) -> Result<()> {
    save_with(session, path, || Ok(()))
}

/// [`save`], with `check` run at the moment the values are taken (after the lazy slots are
/// loaded; no step runs and no bind lands until they are copied): when it fails, that is
/// the error and nothing is written (a file already at `path` stays as it was). A binding
/// that can close a session (a loader may do it) refuses this way to write a checkpoint of
/// a closed one.
pub fn save_with(
    session: &Session,
    path: impl AsRef<Path>,
    check: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let path = path.as_ref();
    // One state of the session: no step runs (and nothing is donated) while it is copied.
    let members = session.with_values(|values| {
        check()?;
        members_of(values)
    })?;
    write_members(path, &members)
}

/// The longest slot name a checkpoint saves, in bytes (a zip member's name, with `.npy`,
/// shares a 64 KiB header with its other fields).
pub const MAX_SLOT_NAME_BYTES: usize = 65_000;

/// The `.npy` members of a checkpoint of `values`, its type table last.
fn members_of(values: &[(String, Buffer)]) -> Result<Vec<(String, Vec<u8>)>> {
    let names: Vec<&String> = values.iter().map(|(n, _)| n).collect();
    if names.iter().any(|n| n.as_str() == DTYPES_KEY) {
        return Err(invalid(format!(
            "a slot named {DTYPES_KEY:?} cannot be saved: the name is reserved for the \
             checkpoint's type table"
        )));
    }
    if let Some(name) = names.iter().find(|n| n.contains('\0')) {
        // numpy (Python's zipfile) cuts a member name at its first NUL: "a\0b.npy" would
        // load as "a", beside or over a slot really named "a".
        return Err(invalid(format!(
            "slot {name:?} cannot be saved: its name contains a NUL character, at which \
             numpy's zip reader cuts member names (it would load as {:?})",
            name.split('\0').next().unwrap_or_default()
        )));
    }
    if let Some(name) = names.iter().find(|n| n.len() > MAX_SLOT_NAME_BYTES) {
        // A zip member's name and header fields share 64 KiB; the message shows the start.
        let start: String = name.chars().take(40).collect();
        return Err(invalid(format!(
            "slot {start:?}... cannot be saved: its name is {} bytes, and a checkpoint \
             member's name holds at most {MAX_SLOT_NAME_BYTES}",
            name.len()
        )));
    }
    check_numpy_keys(&names)?;
    for (name, b) in values {
        // save's form of a type numpy cannot name has one more axis: the element's bytes.
        let extra = usize::from(descr_of(b.element_type()).is_err());
        let rank = b.dims().len() + extra;
        if rank > MAX_NUMPY_DIMS {
            let stored = match extra {
                0 => String::new(),
                _ => format!(" ({} with the trailing byte axis of its type)", rank),
            };
            return Err(invalid(format!(
                "slot {name:?} cannot be saved: it has {} dimensions{stored}, and numpy holds \
                 at most {MAX_NUMPY_DIMS} (numpy.load could not read the checkpoint); reshape \
                 it to fewer dimensions first",
                b.dims().len()
            )));
        }
    }
    let mut members = Vec::with_capacity(names.len() + 1);
    let mut types = serde_json::Map::new();
    for (name, b) in values {
        let t = b.element_type();
        if t == ElementType::Token {
            return Err(invalid(format!(
                "slot {name:?} holds a token, which has no data to save"
            )));
        }
        let mut data = b.to_vec_row_major().map_err(|e| in_slot(name, e))?;
        let member = match descr_of(t) {
            Ok(descr) => write_npy_raw(&descr, b.dims(), &data),
            Err(_) => {
                if t.is_sub_byte() {
                    data = try_unpack_sub_byte(t, &data, element_count(b.dims())?)?;
                }
                let mut dims = b.dims().to_vec();
                dims.push(t.host_itemsize() as i64);
                write_npy_raw("|u1", &dims, &data)
            }
        };
        types.insert(name.clone(), serde_json::Value::from(t.name()));
        members.push((name.clone(), member));
    }
    let table = serde_json::Value::Object(types).to_string();
    members.push((DTYPES_KEY.to_string(), npy::write_npy_text(&table)));
    Ok(members)
}

/// Refuses slot names that `numpy.load` cannot tell apart. Slot `n` is member `n.npy`, and
/// numpy's `NpzFile` looks a key up as a member name first and only then with `.npy` added:
/// with slots `x` and `x.npy`, `np.load(path)["x.npy"]` is member `x.npy`, slot `x`, and
/// no key reaches slot `x.npy`. Python's zipfile on Windows also reads `\` in a member
/// name as `/`, so `a\b` and `a/b` are one member there. (numpy strips `.npy` exactly:
/// `x` and `x.NPY` are two keys.)
fn check_numpy_keys(names: &[&String]) -> Result<()> {
    let key = |n: &str| n.replace('\\', "/");
    let mut seen: HashMap<String, &str> = HashMap::with_capacity(names.len() + 1);
    for n in names.iter().map(|n| n.as_str()).chain([DTYPES_KEY]) {
        if let Some(other) = seen.insert(key(n), n) {
            return Err(invalid(format!(
                "slots {other:?} and {n:?} cannot both be saved: Python's zipfile reads \
                 '\\' in a member name as '/' on Windows, so numpy.load there sees one \
                 member for both; rename one of them"
            )));
        }
    }
    for n in names.iter().map(|n| n.as_str()) {
        let Some(stem) = key(n).strip_suffix(".npy").map(str::to_string) else {
            continue;
        };
        if let Some(&other) = seen.get(&stem) {
            let what = match other {
                DTYPES_KEY => "the checkpoint's type table".to_string(),
                _ => format!("slot {other:?}"),
            };
            return Err(invalid(format!(
                "slot {n:?} cannot be saved beside {what}: that is stored as member \
                 {:?}, and numpy.load(path)[{n:?}] looks the key up as a member name before \
                 adding .npy, so it would return {what} and no key would reach slot {n:?}; \
                 rename one of them",
                format!("{other}.npy")
            )));
        }
    }
    Ok(())
}

fn slot_err(name: &str, why: String) -> Error {
    invalid(format!("slot {name:?}: {why}"))
}

/// `e` with the slot's name in its message, of the same kind and code: a closed client
/// stays [`Error::Closed`], a deleted buffer [`Error::Deleted`], a plugin's error keeps its
/// entry and code. (`Closed` has a fixed message and no room for the name; it says what
/// was closed, which is the same for every slot.)
fn in_slot(name: &str, e: Error) -> Error {
    e.map_message(|m| format!("slot {name:?}: {m}"))
}

/// Binds every array in the `.npz` file at `path` to the slot of its name (creating slots
/// the session does not have yet): a checkpoint written by [`save`], or any file
/// `np.savez` wrote.
///
/// All-or-nothing: an array whose element type or shape differs from its slot's is refused
/// naming the slot, and a damaged or truncated file is an error naming the file; either
/// way the session is left as it was. Arrays `np.savez` stored as raw bytes (bfloat16 and
/// other ml_dtypes types) take the type of their slot, which must then be known (from a
/// program or an earlier bind), in the byte order their type string states (`>V2` is a
/// big-endian bfloat16 array). ml_dtypes' float8_e5m2, which numpy saves as `<f1`, is
/// refused saying so (numpy has no 1-byte float to read it as). A slot whose value lives
/// in another memory of the device (host memory) is restored into that memory. Members
/// are read, checked and uploaded one at a time, so the extra host memory is one member,
/// not the file; the slots change only once every upload has succeeded
/// ([`Session::bind_all`]).
pub fn restore(session: &Session, path: impl AsRef<Path>) -> Result<()> {
    restore_with(session, path, &|| Ok(()))
}

/// [`restore`], with `check` run before each member is read and once more before the slots
/// change: when it fails, that is the error and the session is left as it was. A binding
/// whose sessions can be closed while a restore reads (from another thread) stops reading
/// this way; the bind itself may still race such a close, which the caller then handles.
pub fn restore_with(
    session: &Session,
    path: impl AsRef<Path>,
    check: &dyn Fn() -> Result<()>,
) -> Result<()> {
    let path = path.as_ref();
    let file = path.display();
    if session.in_step() {
        // The running step stores its outputs when it returns, over part of the restore:
        // the slots would hold neither the checkpoint nor the step's result.
        return Err(invalid(format!(
            "{file}: the session is stepping: a restore needs the session between steps, and \
             this call comes from inside its running step (a custom-call handler); restore \
             after the step returns"
        )));
    }
    let mut npz = NpzReader::open(path)?.ok_or_else(|| {
        invalid(format!(
            "{file}: not an .npz archive (it does not start with a zip header)"
        ))
    })?;
    let names = npz.names().to_vec();
    let types = match names.iter().position(|n| n == DTYPES_KEY) {
        Some(i) => read_type_table(&mut npz, i)?,
        None => HashMap::new(),
    };
    let specs: HashMap<String, ArraySpec> = session
        .slots()
        .into_iter()
        .filter_map(|s| s.spec.map(|spec| (s.name, spec)))
        .collect();
    let with_file = |e: Error| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{file}: {m}")),
        other => other,
    };
    let mut ready = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if name == DTYPES_KEY {
            continue;
        }
        check()?;
        let slot = specs.get(name);
        let member = npz.member(i)?;
        let plan = plan_member(name, member.header(), types.get(name).copied(), slot)
            .map_err(with_file)?;
        let spec = ArraySpec {
            element_type: plan.element_type,
            dims: plan.dims.clone(),
        };
        // Checked against the slot before any data is read.
        if let Some(have) = slot.filter(|&have| have != &spec) {
            return Err(invalid(format!(
                "slot {name:?} holds {have}, but {file} stores {spec}"
            )));
        }
        let data = member.read_data(plan.bytes)?;
        check_narrow(name, plan.element_type, &data).map_err(with_file)?;
        let mut host = HostArray::from_owner(Arc::new(data), plan.element_type, plan.dims)
            .with_byte_order(plan.order);
        if let Some(strides) = plan.strides {
            host = host.with_byte_strides(strides, 0);
        }
        if plan.element_type.is_sub_byte() {
            host = host.unpacked();
        }
        // A slot whose value lives in another memory of the device (host memory) gets the
        // restored value in that memory too; otherwise the device's default memory.
        let device = session.device();
        let memory = (session.fetch_loaded(name).ok().flatten())
            .and_then(|b| b.memory().ok())
            .filter(|m| device.default_memory().ok().as_ref() != Some(m));
        let buffer = session
            .client()
            .put(&host, device, memory.as_ref(), CopyMode::Always)
            .map_err(|e| in_slot(name, e))?;
        ready.push((name.clone(), SlotValue::Uploaded(buffer)));
    }
    check()?;
    session.bind_all(ready).map_err(with_file)
}

/// Refuses a byte that is no element of `t` when `t` is narrower than a byte (see
/// [`rpjrt::first_foreign_byte`]): packing would keep its low bits and silently give
/// another value (an int4 byte 0x7f became -1).
fn check_narrow(name: &str, t: ElementType, data: &[u8]) -> Result<()> {
    match rpjrt::first_foreign_byte(t, data) {
        None => Ok(()),
        Some((i, b)) => Err(invalid(format!(
            "slot {name:?} is {t}, but {}",
            rpjrt::foreign_byte_text(t, i, b)
        ))),
    }
}

/// A checkpoint's type table (member `i`, [`DTYPES_KEY`]): slot name → element type.
fn read_type_table(npz: &mut NpzReader, i: usize) -> Result<HashMap<String, ElementType>> {
    let path = npz.path().to_path_buf();
    let bad = |why: String| io_err(&path, format!("the type table {DTYPES_KEY:?} {why}"));
    let member = npz.member(i)?;
    let n = text_len(member.header()).map_err(|e| bad(bare(&e)))?;
    if n > MAX_TABLE {
        return Err(bad(format!(
            "claims {n} bytes (at most {MAX_TABLE} are read)"
        )));
    }
    let text = decode_text(&member.read_data(n)?).map_err(|e| bad(bare(&e)))?;
    let table: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("is not JSON: {e}")))?;
    if !table.is_object() {
        return Err(bad("is not a JSON object".into()));
    }
    // Read again in file order with repeated names kept (a JSON value keeps only the last
    // of them, which would pick one type silently; .npy headers refuse repeats too).
    let Entries(entries) =
        serde_json::from_str(&text).map_err(|e| bad(format!("is not JSON: {e}")))?;
    let mut types = HashMap::with_capacity(entries.len());
    for (name, v) in &entries {
        let t = v
            .as_str()
            .ok_or_else(|| bad(format!("gives slot {name:?} a non-string type")))
            .and_then(|t| {
                ElementType::from_name(t)
                    .map_err(|e| bad(format!("gives slot {name:?} type {t:?}: {}", bare(&e))))
            })?;
        if types.insert(name.clone(), t).is_some() {
            return Err(bad(format!("names slot {name:?} twice")));
        }
    }
    Ok(types)
}

/// A JSON object's entries in file order, repeated names kept.
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut v = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    v.push(entry);
                }
                Ok(Entries(v))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// How to read one member: its element type, shape, data size and layout.
struct Plan {
    element_type: ElementType,
    dims: Vec<i64>,
    /// Data bytes: numpy's form (sub-byte types one element per byte).
    bytes: usize,
    /// Byte strides when the member is in Fortran order.
    strides: Option<Vec<i64>>,
    order: ByteOrder,
}

/// The type of one member from its header: from the type table (`named`), else from the
/// member's type string, else (raw bytes) from the slot's type.
fn plan_member(
    name: &str,
    h: &Header,
    named: Option<ElementType>,
    slot: Option<&ArraySpec>,
) -> Result<Plan> {
    let descr = h.descr.as_str();
    let raw_bytes = descr
        .strip_prefix(['|', '<', '>', '='])
        .and_then(|d| d.strip_prefix('V'))
        .and_then(|n| n.parse::<usize>().ok());
    // The byte order the type string states. Raw-byte types state one too (numpy.savez
    // writes a big-endian bfloat16 array as `>V2`): it applies to each element of the type
    // the element size comes from, as for any other type string.
    let stated = byte_order_of_descr(descr);
    let mut dims = h.dims.clone();
    let (t, order) = match (named, raw_bytes) {
        // A type numpy cannot name: uint8 with a trailing byte axis (what save writes) or
        // raw void elements (what np.savez writes for ml_dtypes arrays).
        (Some(t), _) if descr_of(t).is_err() => {
            let w = t.host_itemsize();
            let as_u8 = type_of_descr(descr).ok().map(|d| d.0) == Some(ElementType::U8)
                && dims.last() == Some(&(w as i64));
            if raw_bytes == Some(w) {
                (t, stated)
            } else {
                if !as_u8 || h.fortran {
                    return Err(invalid(format!(
                        "slot {name:?} is {t}, stored as {w}-byte raw elements (or C-order \
                         uint8 with a trailing axis of {w}), but the member has type \
                         {descr:?} and shape {dims:?}"
                    )));
                }
                dims.pop();
                // The bytes of each element as the saving machine held them (save's form).
                (t, ByteOrder::Native)
            }
        }
        (named, None) => {
            let (t, _) = type_of_descr(descr).map_err(|e| refused_descr(name, descr, slot, e))?;
            if let Some(n) = named.filter(|&n| n != t) {
                return Err(invalid(format!(
                    "slot {name:?}: the type table says {n}, but the member holds {t}"
                )));
            }
            (t, stated)
        }
        // A type numpy names, stored as raw elements: the type table rules (a slot of
        // another type is refused with the table's type when the value lands).
        (Some(n), Some(w)) => {
            if n.host_itemsize() != w {
                return Err(invalid(format!(
                    "slot {name:?}: the type table says {n} ({} bytes per element), but the \
                     member stores raw {w}-byte elements ({descr:?})",
                    n.host_itemsize()
                )));
            }
            (n, stated)
        }
        (None, Some(w)) => match slot {
            Some(s)
                if s.element_type != ElementType::Token
                    && descr_of(s.element_type).is_err()
                    && s.element_type.host_itemsize() == w =>
            {
                (s.element_type, stated)
            }
            Some(s) if s.element_type.host_itemsize() != w => {
                return Err(invalid(format!(
                    "slot {name:?} is {} ({} bytes per element), but the file stores it as \
                     raw {w}-byte elements ({descr:?})",
                    s.element_type,
                    s.element_type.host_itemsize()
                )))
            }
            Some(s) if descr_of(s.element_type).is_ok() => {
                return Err(invalid(format!(
                    "slot {name:?} is {}, which numpy saves by its type string ({:?}), but the \
                     file stores it as raw {w}-byte elements ({descr:?}); raw elements are \
                     read only into types numpy cannot name (bfloat16, float8, int4 ...)",
                    s.element_type,
                    descr_of(s.element_type).unwrap_or_default()
                )))
            }
            _ => {
                return Err(invalid(format!(
                    "slot {name:?} is stored as raw {w}-byte elements ({descr:?}, how numpy \
                     saves bfloat16, float8 and other ml_dtypes types), which name no element \
                     type; give the slot its type first (a program or a bind), or save it as \
                     a checkpoint (Session.save)"
                )))
            }
        },
    };
    let itemsize = t.host_itemsize();
    let bytes = element_count(&dims)?
        .checked_mul(itemsize)
        .ok_or_else(|| slot_err(name, format!("shape {dims:?} is too large")))?;
    let strides = h
        .fortran
        .then(|| crate::npy::fortran_strides(&dims, itemsize));
    Ok(Plan {
        element_type: t,
        dims,
        bytes,
        strides,
        order,
    })
}

/// The refusal of member `name`'s type string `descr`, which names no element type
/// ([`type_of_descr`]'s error `e`). A type string numpy writes for an ml_dtypes type that
/// PJRT has (`<f1`: float8_e5m2) says so, and how to save the array so that it restores:
/// as raw bytes, which take the slot's type, or as a checkpoint.
fn refused_descr(name: &str, descr: &str, slot: Option<&ArraySpec>, e: Error) -> Error {
    let Some(guess) = ml_dtypes_guess(descr).filter(|g| g.in_pjrt) else {
        return slot_err(name, bare(&e));
    };
    let slot_type = match slot {
        Some(s) => format!("slot {name:?} is {}", s.element_type),
        None => format!(
            "slot {name:?} has no type yet: give it the type {} first (a program or a bind)",
            guess.name
        ),
    };
    invalid(format!(
        "slot {name:?}: the .npy type {descr:?} has no PJRT element type: {what}; numpy \
         itself cannot load it. Save the array as raw bytes, as numpy.savez stores the other \
         ml_dtypes types (arr.view(\"V{size}\") in place of arr): raw elements restore into \
         their slot's type ({slot_type}); or save the session with Session.save, which \
         records each slot's type",
        what = guess.what,
        size = guess.itemsize
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpjrt::Code;

    #[test]
    fn numpy_keys_refuse_names_numpy_confuses() {
        let check = |names: &[&str]| {
            let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            check_numpy_keys(&owned.iter().collect::<Vec<_>>())
        };
        for pair in [
            ["x", "x.npy"],
            ["x.npy.npy", "x.npy"],
            ["a\\b", "a/b"],
            ["a/b.npy", "a\\b"],
            ["__rpjrt_dtypes__.npy", "y"],
        ] {
            let e = check(&pair).expect_err(&format!("{pair:?}")).to_string();
            assert!(e.contains(&format!("{:?}", pair[0])), "{e}");
            assert!(e.contains("rename"), "{e}");
        }
        for ok in [
            &["x", "X", "x.NPY", "xnpy"][..],
            &["w", "w.npy.npy", ".npy"],
            &["a/b", "a"],
        ] {
            check(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
    }

    #[test]
    fn in_slot_names_the_slot_and_keeps_the_kind() {
        let name = |e: &Error| e.to_string();
        let e = in_slot("w", Error::Deleted("buffer was deleted".into()));
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
        assert_eq!(name(&e), "slot \"w\": buffer was deleted");
        let e = in_slot("w", Error::invalid("bad"));
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(name(&e).contains("slot \"w\": bad"), "{e}");
        let e = in_slot(
            "w",
            Error::Pjrt {
                entry: "PJRT_Event_Await",
                code: Code::Internal,
                message: "it broke".into(),
            },
        );
        assert_eq!(e.code(), Code::Internal);
        assert_eq!(e.entry(), Some("PJRT_Event_Await"));
        assert!(name(&e).contains("slot \"w\": it broke"), "{e}");
        let e = in_slot("w", Error::ResourceExhausted("no memory".into()));
        assert_eq!(e.code(), Code::ResourceExhausted);
        assert!(name(&e).contains("slot \"w\""), "{e}");
        let e = in_slot("w", Error::Closed("buffer"));
        assert!(matches!(e, Error::Closed("buffer")), "{e:?}");
    }
}
