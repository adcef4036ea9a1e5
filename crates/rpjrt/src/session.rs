//! Sessions: programs whose inputs and outputs are named slots, for training loops and
//! other state that is fed back step after step without leaving the device.
//!
//! A [`Session`] holds named slots, each an array on the session's device. A
//! [`SessionProgram`] names the slot each argument comes from and the slot each output
//! goes to; calling it runs the executable and stores the outputs in their slots (no host
//! copy). A slot a program both reads and writes is donated to the execution when the
//! compiled module aliases that output to that input, so the update happens in place.
//!
//! ```no_run
//! # use rpjrt::{Client, CompileOptions, ElementType, Program, Session, HostArray, SlotValue};
//! # fn main() -> rpjrt::Result<()> {
//! # let client = Client::from_path("plugin.so")?;
//! # let exe = client.compile(&Program::mlir(""), &CompileOptions::default())?;
//! let session = Session::new(&client)?;
//! let step = session.program(&exe, &["theta", "x"], &["theta", "loss"])?;
//! session.bind("theta", SlotValue::Host(HostArray::from_owner(std::sync::Arc::new(vec![0u8; 16]), ElementType::F32, vec![4])))?;
//! session.bind_lazy("x", std::sync::Arc::new(|| {
//!     Ok(SlotValue::Host(HostArray::from_owner(std::sync::Arc::new(vec![0u8; 16]), ElementType::F32, vec![4])))
//! }))?;
//! for _ in 0..10 {
//!     step.call()?;
//! }
//! let loss = session.fetch("loss")?.to_vec_of::<f32>()?;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::client::buffer::Buffer;
use crate::client::executable::{Executable, ExecuteOptions};
use crate::client::{Client, Device};
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::host::{CopyMode, HostArray};
use crate::program::ArraySpec;

/// A value to put into a slot.
#[derive(Clone, Debug)]
pub enum SlotValue {
    /// A device buffer, bound as it is (no upload). The slot shares it: if a program
    /// donates the slot, this buffer becomes unusable.
    Buffer(Buffer),
    /// A buffer the caller has just made from host data for this slot (counted as an
    /// upload; used by bindings that convert host values themselves).
    Uploaded(Buffer),
    /// Host data, uploaded to the session's device (counted as an upload; always copied,
    /// so the slot never shares memory with the caller).
    Host(HostArray<'static>),
}

/// Produces a slot's value when a program first needs it (see [`Session::bind_lazy`]).
/// It is called without any session lock held; if it fails, the slot stays lazy and the
/// next use calls it again.
pub type Loader = Arc<dyn Fn() -> Result<SlotValue> + Send + Sync>;

/// What a slot holds now (see [`Session::slots`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Named by a program but never bound.
    Empty,
    /// Bound to a loader that has not run yet.
    Pending,
    /// Holds a buffer.
    Ready,
    /// Holds a buffer that was deleted (by the caller, or donated outside this session).
    Deleted,
}

/// A description of one slot (see [`Session::slots`]).
#[derive(Clone, Debug)]
pub struct SlotInfo {
    /// The slot's name.
    pub name: String,
    /// Its element type and shape, once a program or a bind fixed them.
    pub spec: Option<ArraySpec>,
    /// What it holds.
    pub state: SlotState,
}

enum Content {
    Empty,
    Lazy(Loader),
    Ready(Buffer),
}

struct Slot {
    name: String,
    spec: Option<ArraySpec>,
    content: Content,
}

impl Slot {
    fn state(&self) -> SlotState {
        match &self.content {
            Content::Empty => SlotState::Empty,
            Content::Lazy(_) => SlotState::Pending,
            Content::Ready(b) if b.is_deleted() => SlotState::Deleted,
            Content::Ready(_) => SlotState::Ready,
        }
    }
}

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    index: HashMap<String, usize>,
    uploads: usize,
    loads: usize,
    programs: Vec<String>,
}

impl State {
    fn slot_index(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.slots.push(Slot {
            name: name.to_string(),
            spec: None,
            content: Content::Empty,
        });
        self.index.insert(name.to_string(), self.slots.len() - 1);
        self.slots.len() - 1
    }

    fn find(&self, name: &str) -> Result<usize> {
        self.index.get(name).copied().ok_or_else(|| {
            Error::invalid(format!(
                "the session has no slot {name:?} (slots: {})",
                self.names()
            ))
        })
    }

    fn names(&self) -> String {
        if self.slots.is_empty() {
            return "none".into();
        }
        self.slots
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Fixes slot `i`'s spec, or checks `spec` against the one it has.
    fn settle_spec(&mut self, i: usize, spec: &ArraySpec, what: &str) -> Result<()> {
        let slot = &mut self.slots[i];
        match &slot.spec {
            None => {
                slot.spec = Some(spec.clone());
                Ok(())
            }
            Some(have) if have == spec => Ok(()),
            Some(have) => Err(Error::invalid(format!(
                "slot {:?} holds {have}, but {what} is {spec}",
                slot.name
            ))),
        }
    }
}

struct Inner {
    client: Client,
    device: Device,
    state: Mutex<State>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held cannot leave a slot half-written (every update
        // is one assignment), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns a value into a buffer on the session's device, checked against the slot's
    /// spec before any upload. Returns the buffer and whether it was uploaded.
    fn materialize(
        &self,
        name: &str,
        spec: Option<&ArraySpec>,
        value: SlotValue,
    ) -> Result<(Buffer, bool)> {
        let check = |ty: ElementType, dims: &[i64]| -> Result<()> {
            match spec {
                Some(s) if s.element_type != ty || s.dims != dims => Err(Error::invalid(format!(
                    "slot {name:?} holds {s}, but the value bound to it is {}",
                    ArraySpec {
                        element_type: ty,
                        dims: dims.to_vec()
                    }
                ))),
                _ => Ok(()),
            }
        };
        match value {
            SlotValue::Host(h) => {
                check(h.element_type(), h.dims())?;
                let b = self
                    .client
                    .put(&h, &self.device, None, CopyMode::Always)
                    .map_err(|e| prefix(name, e))?;
                Ok((b, true))
            }
            SlotValue::Buffer(b) | SlotValue::Uploaded(b) if b.is_deleted() => Err(Error::Deleted(
                format!("the buffer bound to slot {name:?} was deleted (or donated)"),
            )),
            SlotValue::Buffer(b) => {
                check(b.element_type(), b.dims())?;
                self.check_device(name, &b)?;
                Ok((b, false))
            }
            SlotValue::Uploaded(b) => {
                check(b.element_type(), b.dims())?;
                self.check_device(name, &b)?;
                Ok((b, true))
            }
        }
    }

    fn check_device(&self, name: &str, b: &Buffer) -> Result<()> {
        let d = b.device()?;
        if d != self.device {
            return Err(Error::invalid(format!(
                "the buffer bound to slot {name:?} is on {d}, but the session runs on {}",
                self.device
            )));
        }
        Ok(())
    }

    /// Runs the loaders of the given slots that are still lazy (without the lock held).
    fn load(&self, slots: &[usize]) -> Result<()> {
        let pending: Vec<(usize, Loader)> = {
            let st = self.lock();
            slots
                .iter()
                .filter_map(|&i| match &st.slots[i].content {
                    Content::Lazy(l) => Some((i, Arc::clone(l))),
                    _ => None,
                })
                .collect()
        };
        for (i, loader) in pending {
            let (name, spec) = {
                let st = self.lock();
                (st.slots[i].name.clone(), st.slots[i].spec.clone())
            };
            let value = loader().map_err(|e| prefix(&name, e))?;
            let (buffer, uploaded) = self.materialize(&name, spec.as_ref(), value)?;
            let mut st = self.lock();
            st.loads += 1;
            if uploaded {
                st.uploads += 1;
            }
            // Bound to something else meanwhile: that binding wins.
            if matches!(st.slots[i].content, Content::Lazy(_)) {
                let spec = ArraySpec {
                    element_type: buffer.element_type(),
                    dims: buffer.dims().to_vec(),
                };
                st.settle_spec(i, &spec, "the loaded value")?;
                st.slots[i].content = Content::Ready(buffer);
            }
        }
        Ok(())
    }
}

/// A slot's buffer, unless it was deleted.
fn ready_buffer(name: &str, b: &Buffer) -> Result<Buffer> {
    if b.is_deleted() {
        return Err(Error::Deleted(format!(
            "slot {name:?}: its buffer was deleted (or donated outside this session)"
        )));
    }
    Ok(b.clone())
}

fn prefix(name: &str, e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("slot {name:?}: {m}")),
        Error::Deleted(m) => Error::Deleted(format!("slot {name:?}: {m}")),
        other => other,
    }
}

/// Named slots on one device and programs that read and write them. Cheap to clone (clones
/// share the slots); safe to use from many threads (calls are serialised).
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl Session {
    /// A session on the client's default device.
    pub fn new(client: &Client) -> Result<Session> {
        Session::on_device(client, &client.default_device()?)
    }

    /// A session whose slots live on `device`.
    pub fn on_device(client: &Client, device: &Device) -> Result<Session> {
        if !device.is_addressable() {
            return Err(Error::invalid(format!(
                "{device} is not addressable from this process"
            )));
        }
        Ok(Session {
            inner: Arc::new(Inner {
                client: client.clone(),
                device: device.clone(),
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// The device the slots live on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// A program that reads argument `k` from slot `inputs[k]` and writes output `k` to
    /// slot `outputs[k]` (an empty name discards that output). Slots are created as needed;
    /// their element types and shapes are fixed by the executable, and a slot that already
    /// has a different one is refused.
    ///
    /// Slots the program both reads and writes are donated when the compiled module aliases
    /// that output to that argument (see [`Executable::input_output_aliases`]).
    pub fn program(
        &self,
        exe: &Executable,
        inputs: &[&str],
        outputs: &[&str],
    ) -> Result<SessionProgram> {
        self.program_with(exe, inputs, outputs, true)
    }

    /// [`Session::program`] with automatic donation switched on or off.
    pub fn program_with(
        &self,
        exe: &Executable,
        inputs: &[&str],
        outputs: &[&str],
        donate: bool,
    ) -> Result<SessionProgram> {
        let devices = exe.addressable_devices()?;
        let on_device = match devices.as_slice() {
            [] => true,
            [d] if *d == self.inner.device => false,
            [d] => {
                return Err(Error::invalid(format!(
                    "{} runs on {d}, but the session's slots live on {}; compile it for that \
                     device (or portable)",
                    exe.name(),
                    self.inner.device
                )))
            }
            more => {
                return Err(Error::invalid(format!(
                    "{} runs on {} devices; a session program runs on one device (split \
                     arrays across devices with rpjrt::sharding)",
                    exe.name(),
                    more.len()
                )))
            }
        };
        if let Some(params) = exe.parameters() {
            if params.len() != inputs.len() {
                return Err(Error::invalid(format!(
                    "{} takes {} argument(s), but {} input slot name(s) were given",
                    exe.name(),
                    params.len(),
                    inputs.len()
                )));
            }
        }
        if exe.num_outputs() != outputs.len() {
            return Err(Error::invalid(format!(
                "{} has {} output(s), but {} output slot name(s) were given",
                exe.name(),
                exe.num_outputs(),
                outputs.len()
            )));
        }
        for n in inputs {
            if n.is_empty() {
                return Err(Error::invalid("an input slot name is empty"));
            }
        }
        for (k, n) in outputs.iter().enumerate() {
            if !n.is_empty() && outputs[..k].contains(n) {
                return Err(Error::invalid(format!(
                    "slot {n:?} is named for more than one output"
                )));
            }
        }
        let aliases = if donate {
            exe.input_output_aliases()?.unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut st = self.inner.lock();
        // Check every spec before creating any slot, so a refused program leaves no trace.
        let mut staged: Vec<(String, ArraySpec, String)> = Vec::new();
        if let Some(params) = exe.parameters() {
            for (k, (n, p)) in inputs.iter().zip(params).enumerate() {
                staged.push((
                    n.to_string(),
                    p.clone(),
                    format!("argument {k} of {}", exe.name()),
                ));
            }
        }
        for (k, (n, o)) in outputs.iter().zip(exe.outputs()).enumerate() {
            if !n.is_empty() {
                staged.push((
                    n.to_string(),
                    o.clone(),
                    format!("output {k} of {}", exe.name()),
                ));
            }
        }
        let mut seen: HashMap<&str, &ArraySpec> = HashMap::new();
        for (n, spec, what) in &staged {
            let have = seen
                .get(n.as_str())
                .copied()
                .or_else(|| st.index.get(n).and_then(|&i| st.slots[i].spec.as_ref()));
            if let Some(have) = have {
                if have != spec {
                    return Err(Error::invalid(format!(
                        "slot {n:?} holds {have}, but {what} is {spec}"
                    )));
                }
            }
            seen.insert(n, spec);
        }
        let input_slots: Vec<usize> = inputs.iter().map(|n| st.slot_index(n)).collect();
        let output_slots: Vec<Option<usize>> = outputs
            .iter()
            .map(|n| (!n.is_empty()).then(|| st.slot_index(n)))
            .collect();
        for (n, spec, what) in &staged {
            let i = st.slot_index(n);
            st.settle_spec(i, spec, what)?;
        }
        let mut donated: Vec<usize> = aliases
            .iter()
            .filter(|&&(out, param)| {
                param < input_slots.len()
                    && out < output_slots.len()
                    && output_slots[out] == Some(input_slots[param])
                    && input_slots
                        .iter()
                        .filter(|&&s| s == input_slots[param])
                        .count()
                        == 1
            })
            .map(|&(_, param)| param)
            .collect();
        donated.sort_unstable();
        donated.dedup();
        st.programs.push(exe.name().to_string());
        Ok(SessionProgram {
            inner: Arc::clone(&self.inner),
            exe: exe.clone(),
            inputs: input_slots,
            outputs: output_slots,
            donated,
            portable: on_device,
        })
    }

    /// Binds `value` to slot `name` (created if new). A value whose element type or shape
    /// differs from the slot's is refused here, naming the slot, before any upload.
    pub fn bind(&self, name: &str, value: SlotValue) -> Result<()> {
        if name.is_empty() {
            return Err(Error::invalid("a slot name is empty"));
        }
        let spec = {
            let st = self.inner.lock();
            st.index.get(name).and_then(|&i| st.slots[i].spec.clone())
        };
        let (buffer, uploaded) = self.inner.materialize(name, spec.as_ref(), value)?;
        let mut st = self.inner.lock();
        let i = st.slot_index(name);
        let spec = ArraySpec {
            element_type: buffer.element_type(),
            dims: buffer.dims().to_vec(),
        };
        st.settle_spec(i, &spec, "the value bound to it")?;
        if uploaded {
            st.uploads += 1;
        }
        st.slots[i].content = Content::Ready(buffer);
        Ok(())
    }

    /// Binds slot `name` to a loader, called only when a program first needs the slot (or
    /// on [`Session::fetch`]). Its value is checked against the slot's type and shape then.
    pub fn bind_lazy(&self, name: &str, loader: Loader) -> Result<()> {
        if name.is_empty() {
            return Err(Error::invalid("a slot name is empty"));
        }
        let mut st = self.inner.lock();
        let i = st.slot_index(name);
        st.slots[i].content = Content::Lazy(loader);
        Ok(())
    }

    /// The buffer slot `name` holds (running its loader first if it is lazy). The buffer is
    /// shared with the slot: a later donation of the slot makes it unusable.
    pub fn fetch(&self, name: &str) -> Result<Buffer> {
        let i = {
            let st = self.inner.lock();
            let i = st.find(name)?;
            if let Content::Ready(b) = &st.slots[i].content {
                return ready_buffer(name, b);
            }
            i
        };
        self.inner.load(&[i])?;
        let st = self.inner.lock();
        match &st.slots[i].content {
            Content::Ready(b) => ready_buffer(name, b),
            _ => Err(Error::invalid(format!(
                "slot {name:?} has no value yet: bind it first"
            ))),
        }
    }

    /// As [`Session::fetch`], but never runs a loader and never waits: `Ok(None)` when slot
    /// `name` is bound to a loader that has not run yet, or when another thread holds the
    /// session (e.g. while it calls a program); [`Session::fetch`] then does the rest.
    pub fn fetch_loaded(&self, name: &str) -> Result<Option<Buffer>> {
        let st = match self.inner.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(None),
        };
        let i = st.find(name)?;
        match &st.slots[i].content {
            Content::Ready(b) => ready_buffer(name, b).map(Some),
            Content::Lazy(_) => Ok(None),
            Content::Empty => Err(Error::invalid(format!(
                "slot {name:?} has no value yet: bind it first"
            ))),
        }
    }

    /// Every slot: name, type and shape, state (in creation order).
    pub fn slots(&self) -> Vec<SlotInfo> {
        self.inner
            .lock()
            .slots
            .iter()
            .map(|s| SlotInfo {
                name: s.name.clone(),
                spec: s.spec.clone(),
                state: s.state(),
            })
            .collect()
    }

    /// How many host values were uploaded into slots (by binds and by loaders).
    pub fn uploads(&self) -> usize {
        self.inner.lock().uploads
    }

    /// How many times a loader ran.
    pub fn loads(&self) -> usize {
        self.inner.lock().loads
    }
}

/// The `.npz` member of a checkpoint that records each slot's element type name (numpy has
/// no type string for bfloat16, the float8 types or the sub-byte integers).
pub const DTYPES_KEY: &str = "__rpjrt_dtypes__";

/// One array of a checkpoint, ready to upload.
struct Saved {
    element_type: ElementType,
    dims: Vec<i64>,
    /// Host bytes: numpy's form (sub-byte types one element per byte), in `order`.
    data: Vec<u8>,
    /// Byte strides when the file stores the array in Fortran order.
    strides: Option<Vec<i64>>,
    order: crate::host::ByteOrder,
}

impl Session {
    /// Writes every slot that holds a value to an `.npz` file (a stored zip of `.npy`
    /// members named after the slots, as `np.savez` writes), atomically: a temporary file
    /// in the same directory, renamed over `path` once complete.
    ///
    /// Slots whose loader has not run are loaded first; empty slots are left out; a slot
    /// whose buffer was deleted is an error naming it. Types numpy has a type string for are
    /// stored as themselves; the others (bfloat16, float8, int4 ...) as `uint8` arrays with a
    /// trailing axis of the element's byte size (one byte per element for the sub-byte
    /// types, as ml_dtypes holds them). The member `__rpjrt_dtypes__` (a numpy string with
    /// a JSON object) names every slot's element type, so `np.load(path)` reads the file and
    /// `arr.view(ml_dtypes.bfloat16)[..., 0]` recovers such a slot.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        let names: Vec<String> = self
            .slots()
            .into_iter()
            .filter(|s| s.state != SlotState::Empty)
            .map(|s| s.name)
            .collect();
        if names.iter().any(|n| n == DTYPES_KEY) {
            return Err(Error::invalid(format!(
                "a slot named {DTYPES_KEY:?} cannot be saved: the name is reserved for the \
                 checkpoint's type table"
            )));
        }
        let mut members = Vec::with_capacity(names.len() + 1);
        let mut types = serde_json::Map::new();
        for name in &names {
            let b = self.fetch(name)?;
            let t = b.element_type();
            if t == ElementType::Token {
                return Err(Error::invalid(format!(
                    "slot {name:?} holds a token, which has no data to save"
                )));
            }
            let mut data = b.to_vec_row_major().map_err(|e| prefix(name, e))?;
            let member = match crate::npy::descr_of(t) {
                Ok(descr) => crate::npy::write_npy_raw(&descr, b.dims(), &data),
                Err(_) => {
                    if t.is_sub_byte() {
                        let n = crate::dtype::element_count(b.dims())?;
                        data = crate::dtype::unpack_sub_byte(t, &data, n);
                    }
                    let mut dims = b.dims().to_vec();
                    dims.push(t.host_itemsize() as i64);
                    crate::npy::write_npy_raw("|u1", &dims, &data)
                }
            };
            types.insert(name.clone(), serde_json::Value::from(t.name()));
            members.push((name.clone(), member));
        }
        let table = serde_json::Value::Object(types).to_string();
        members.push((DTYPES_KEY.to_string(), crate::npy::write_npy_text(&table)));
        crate::npy::write_npz_members(path, &members)
    }

    /// Binds every array in an `.npz` file to the slot of its name (creating slots the
    /// session does not have yet): a checkpoint written by [`Session::save`], or any file
    /// `np.savez` wrote.
    ///
    /// All-or-nothing: an array whose element type or shape differs from its slot's is
    /// refused naming the slot, and a damaged or truncated file is an error naming the file;
    /// either way the session is left as it was. Arrays `np.savez` stored as raw bytes
    /// (bfloat16 and other ml_dtypes types) take the type of their slot, which must then be
    /// known (from a program or an earlier bind). Members are read, checked and uploaded one
    /// at a time, so the extra host memory is one member, not the file; the slots change only
    /// once every upload has succeeded.
    pub fn restore(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        let file = path.display();
        let mut npz = crate::npy::NpzReader::open(path)?.ok_or_else(|| {
            Error::invalid(format!(
                "{file}: not an .npz archive (it does not start with a zip header)"
            ))
        })?;
        let mut names = Vec::with_capacity(npz.len());
        let mut seen = std::collections::HashSet::new();
        for i in 0..npz.len() {
            let name = npz.name(i)?;
            if name.is_empty() {
                return Err(Error::invalid(format!(
                    "{file}: a member has an empty name"
                )));
            }
            if !seen.insert(name.clone()) {
                return Err(Error::invalid(format!(
                    "{file}: slot {name:?} is stored twice"
                )));
            }
            names.push(name);
        }
        let types = match names.iter().position(|n| n == DTYPES_KEY) {
            Some(i) => read_type_table(path, &npz.read(i)?.1)?,
            None => HashMap::new(),
        };
        let specs: HashMap<String, ArraySpec> = self
            .slots()
            .into_iter()
            .filter_map(|s| s.spec.map(|spec| (s.name, spec)))
            .collect();
        // Upload everything first; only then touch the slots.
        let mut ready = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            if name == DTYPES_KEY {
                continue;
            }
            let (_, bytes) = npz.read(i)?;
            let slot = specs.get(name);
            let s = decode_member(name, bytes, types.get(name).copied(), slot).map_err(
                |e| match e {
                    Error::InvalidArgument(m) => Error::InvalidArgument(format!("{file}: {m}")),
                    other => other,
                },
            )?;
            let spec = ArraySpec {
                element_type: s.element_type,
                dims: s.dims.clone(),
            };
            if let Some(have) = slot.filter(|&have| have != &spec) {
                return Err(Error::invalid(format!(
                    "slot {name:?} holds {have}, but {file} stores {spec}"
                )));
            }
            let mut host = HostArray::from_owner(Arc::new(s.data), s.element_type, s.dims)
                .with_byte_order(s.order);
            if let Some(strides) = s.strides {
                host = host.with_byte_strides(strides, 0);
            }
            if s.element_type.is_sub_byte() {
                host = host.unpacked();
            }
            let (buffer, _) = self.inner.materialize(name, None, SlotValue::Host(host))?;
            ready.push((name.clone(), spec, buffer));
        }
        let mut st = self.inner.lock();
        for (name, spec, _) in &ready {
            if let Some(have) = st.index.get(name).and_then(|&i| st.slots[i].spec.as_ref()) {
                if have != spec {
                    return Err(Error::invalid(format!(
                        "slot {name:?} holds {have}, but {file} stores {spec}"
                    )));
                }
            }
        }
        for (name, spec, buffer) in ready {
            let i = st.slot_index(&name);
            st.settle_spec(i, &spec, "the restored value")?;
            st.uploads += 1;
            st.slots[i].content = Content::Ready(buffer);
        }
        Ok(())
    }
}

/// A checkpoint's type table (the member [`DTYPES_KEY`]): slot name → element type.
fn read_type_table(path: &std::path::Path, bytes: &[u8]) -> Result<HashMap<String, ElementType>> {
    let file = path.display();
    let bad = |why: String| Error::invalid(format!("{file}: the type table {DTYPES_KEY:?} {why}"));
    let raw = crate::npy::parse_npy(bytes).map_err(|e| bad(format!("is damaged: {e}")))?;
    let text = crate::npy::read_npy_text(&raw).map_err(|e| bad(format!("{e}")))?;
    let table: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("is not JSON: {e}")))?;
    let obj = table
        .as_object()
        .ok_or_else(|| bad("is not a JSON object".into()))?;
    let mut types = HashMap::with_capacity(obj.len());
    for (name, v) in obj {
        let t = v
            .as_str()
            .ok_or_else(|| bad(format!("gives slot {name:?} a non-string type")))
            .and_then(|t| {
                ElementType::from_name(t)
                    .map_err(|e| bad(format!("gives slot {name:?} type {t:?}: {e}")))
            })?;
        types.insert(name.clone(), t);
    }
    Ok(types)
}

/// One `.npy` member of a checkpoint as an array: its type from the type table (`named`),
/// else from the member's type string, else (raw bytes) from the slot's type.
fn decode_member(
    name: &str,
    mut bytes: Vec<u8>,
    named: Option<ElementType>,
    slot: Option<&ArraySpec>,
) -> Result<Saved> {
    let raw =
        crate::npy::parse_npy(&bytes).map_err(|e| Error::invalid(format!("slot {name:?}: {e}")))?;
    let descr = raw.descr.as_str();
    let raw_bytes = descr
        .strip_prefix(['|', '<', '>', '='])
        .and_then(|d| d.strip_prefix('V'))
        .and_then(|n| n.parse::<usize>().ok());
    let mut dims = raw.dims.clone();
    let (t, order) = match (named, raw_bytes) {
        // A type numpy cannot name: uint8 with a trailing byte axis (what save writes) or
        // raw void elements (what np.savez writes for ml_dtypes arrays).
        (Some(t), _) if crate::npy::descr_of(t).is_err() => {
            let w = t.host_itemsize();
            let as_u8 = crate::npy::type_of_descr(descr).ok().map(|d| d.0) == Some(ElementType::U8)
                && dims.last() == Some(&(w as i64));
            if raw_bytes != Some(w) {
                if !as_u8 || raw.fortran {
                    return Err(Error::invalid(format!(
                        "slot {name:?} is {t}, stored as {w}-byte raw elements (or C-order \
                         uint8 with a trailing axis of {w}), but the member has type \
                         {descr:?} and shape {dims:?}"
                    )));
                }
                dims.pop();
            }
            (t, crate::host::ByteOrder::Native)
        }
        (named, None) => {
            let (t, big) = crate::npy::type_of_descr(descr)
                .map_err(|e| Error::invalid(format!("slot {name:?}: {e}")))?;
            if let Some(n) = named.filter(|&n| n != t) {
                return Err(Error::invalid(format!(
                    "slot {name:?}: the type table says {n}, but the member holds {t}"
                )));
            }
            let order = if big {
                crate::host::ByteOrder::Big
            } else {
                crate::host::ByteOrder::Native
            };
            (t, order)
        }
        (_, Some(w)) => match slot {
            Some(s)
                if s.element_type != ElementType::Token
                    && crate::npy::descr_of(s.element_type).is_err()
                    && s.element_type.host_itemsize() == w =>
            {
                (s.element_type, crate::host::ByteOrder::Native)
            }
            _ => {
                return Err(Error::invalid(format!(
                    "slot {name:?} is stored as raw {w}-byte elements ({descr:?}, how numpy \
                     saves bfloat16, float8 and other ml_dtypes types), which name no element \
                     type; give the slot its type first (a program or a bind), or save with \
                     Session.save"
                )))
            }
        },
    };
    let itemsize = t.host_itemsize();
    let n = crate::dtype::element_count(&dims)?;
    let want = n
        .checked_mul(itemsize)
        .ok_or_else(|| Error::invalid(format!("slot {name:?}: shape {dims:?} is too large")))?;
    if raw.data.len() != want {
        return Err(Error::invalid(format!(
            "slot {name:?}: {t}{dims:?} needs {want} data bytes, the member has {} (truncated \
             or damaged)",
            raw.data.len()
        )));
    }
    let strides = raw.fortran.then(|| {
        let mut strides = vec![0i64; dims.len()];
        let mut step = itemsize as i64;
        for (k, &d) in dims.iter().enumerate() {
            strides[k] = step;
            step *= d.max(1);
        }
        strides
    });
    // The data is the member's tail: drop the header in place rather than copy the data.
    let header = bytes.len() - raw.data.len();
    bytes.drain(..header);
    Ok(Saved {
        element_type: t,
        dims,
        data: bytes,
        strides,
        order,
    })
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.lock();
        let slots = st
            .slots
            .iter()
            .map(|s| describe_slot(s.name.as_str(), s.spec.as_ref(), s.state()))
            .collect::<Vec<_>>()
            .join(", ");
        write!(
            f,
            "Session(device={}, slots=[{slots}], programs=[{}])",
            self.inner.device,
            st.programs.join(", ")
        )
    }
}

/// `name: float32[4, 16] ready`.
pub(crate) fn describe_slot(name: &str, spec: Option<&ArraySpec>, state: SlotState) -> String {
    let spec = spec.map_or_else(|| "?".to_string(), |s| s.to_string());
    let state = match state {
        SlotState::Empty => "empty",
        SlotState::Pending => "pending",
        SlotState::Ready => "ready",
        SlotState::Deleted => "deleted",
    };
    format!("{name}: {spec} {state}")
}

/// A program of a [`Session`]: its arguments and outputs are named slots.
#[derive(Clone)]
pub struct SessionProgram {
    inner: Arc<Inner>,
    exe: Executable,
    inputs: Vec<usize>,
    outputs: Vec<Option<usize>>,
    donated: Vec<usize>,
    portable: bool,
}

impl SessionProgram {
    /// The executable.
    pub fn executable(&self) -> &Executable {
        &self.exe
    }

    /// The slot each argument is read from.
    pub fn inputs(&self) -> Vec<String> {
        let st = self.inner.lock();
        self.inputs
            .iter()
            .map(|&i| st.slots[i].name.clone())
            .collect()
    }

    /// The slot each output is written to (`None`: discarded).
    pub fn outputs(&self) -> Vec<Option<String>> {
        let st = self.inner.lock();
        self.outputs
            .iter()
            .map(|o| o.map(|i| st.slots[i].name.clone()))
            .collect()
    }

    /// The slots this program donates to its execution (read and written, and aliased in
    /// the compiled module).
    pub fn donated(&self) -> Vec<String> {
        let st = self.inner.lock();
        self.donated
            .iter()
            .map(|&k| st.slots[self.inputs[k]].name.clone())
            .collect()
    }

    /// Runs the program: loads lazy input slots, executes (donating the aliased slots), and
    /// stores each output in its slot. Returns without waiting for the computation.
    pub fn call(&self) -> Result<()> {
        let inner = &*self.inner;
        let mut st = inner.lock();
        if self
            .inputs
            .iter()
            .any(|&i| matches!(st.slots[i].content, Content::Lazy(_)))
        {
            // Loaders run without the lock (they may take long, or call back into a
            // binding that uses the session).
            drop(st);
            inner.load(&self.inputs)?;
            st = inner.lock();
        }
        // The lock is held until the outputs are stored, so the slots' buffers can be
        // borrowed for the execution.
        let mut refs: Vec<&Buffer> = Vec::with_capacity(self.inputs.len());
        for &i in &self.inputs {
            let slot = &st.slots[i];
            match &slot.content {
                Content::Ready(b) => {
                    if b.is_deleted() {
                        return Err(Error::Deleted(format!(
                            "slot {:?}: its buffer was deleted (or donated outside this session)",
                            slot.name
                        )));
                    }
                    refs.push(b);
                }
                _ => {
                    return Err(Error::invalid(format!(
                        "slot {:?} has no value: bind it before calling {}",
                        slot.name,
                        self.exe.name()
                    )))
                }
            }
        }
        let donate: Vec<usize> = self
            .donated
            .iter()
            .copied()
            // Never donate borrowed host memory, nor a buffer that another argument of
            // this call also reads (one buffer bound to two slots).
            .filter(|&k| {
                !refs[k].is_zero_copy()
                    && refs
                        .iter()
                        .enumerate()
                        .all(|(j, b)| j == k || !std::ptr::eq(*b, refs[k]))
            })
            .collect();
        let outs = if donate.is_empty() && !self.portable {
            self.exe.execute(&refs)?
        } else {
            let options = ExecuteOptions {
                donate,
                device: self.portable.then(|| inner.device.clone()),
                ..Default::default()
            };
            let mut r = self.exe.execute_with(&[refs], &options)?;
            r.outputs.pop().unwrap_or_default()
        };
        for (out, slot) in outs.into_iter().zip(&self.outputs) {
            if let Some(i) = slot {
                st.slots[*i].content = Content::Ready(out);
            }
        }
        Ok(())
    }
}

impl fmt::Debug for SessionProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outs = self
            .outputs()
            .into_iter()
            .map(|o| o.unwrap_or_else(|| "_".into()))
            .collect::<Vec<_>>()
            .join(", ");
        write!(
            f,
            "SessionProgram({}: ({}) -> ({outs}), donates=[{}])",
            self.exe.name(),
            self.inputs().join(", "),
            self.donated().join(", ")
        )
    }
}
