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
use crate::client::executable::{wait_execution, Executable, ExecuteOptions};
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
    /// Holds a buffer that was deleted: by the caller, donated outside this session,
    /// consumed by a step that failed after donating it, or freed when the client closed;
    /// or held a loader that was dropped before it ran ([`Session::drop_loaders`]).
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
    /// A loader dropped before it ran ([`Session::drop_loaders`]).
    Dropped,
}

struct Slot {
    name: String,
    spec: Option<ArraySpec>,
    content: Content,
    /// Whether `content` is a buffer a caller bound as it was (or a loader returned): the
    /// only kind another slot can also hold. Uploads and step outputs are the slot's own.
    bound: bool,
    /// Whether `content` is a step's output (which a plugin may still be computing, with
    /// custom-call handlers of that step still to run).
    from_step: bool,
}

impl Slot {
    /// What the slot holds now; with `client_closed`, a value or loader reads as deleted
    /// (closing the client freed every buffer, and a loader could make none).
    fn state(&self, client_closed: bool) -> SlotState {
        match &self.content {
            Content::Empty => SlotState::Empty,
            Content::Lazy(_) if client_closed => SlotState::Deleted,
            Content::Lazy(_) => SlotState::Pending,
            Content::Ready(_) if client_closed => SlotState::Deleted,
            Content::Ready(b) if b.is_deleted() => SlotState::Deleted,
            Content::Ready(_) => SlotState::Ready,
            Content::Dropped => SlotState::Deleted,
        }
    }

    /// The error of a use of this slot when it holds no buffer.
    fn no_value(&self, what: &str) -> Error {
        match self.content {
            Content::Dropped => Error::Deleted(format!(
                "slot {:?}: its loader was dropped before it ran (the session was closed); \
                 bind it again",
                self.name
            )),
            _ => Error::invalid(format!("slot {:?} has no value{what}", self.name)),
        }
    }
}

/// A value checked and uploaded for a bind: `(name, spec, buffer, uploaded)`.
type Ready = (String, ArraySpec, Buffer, bool);
/// A loader to bind: `(name, declared spec, loader)`.
type LazyBind = (String, Option<ArraySpec>, Loader);

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    index: HashMap<String, usize>,
    uploads: usize,
    loads: usize,
    programs: Vec<String>,
    /// The thread running a program of this session, while one runs. The lock itself is
    /// never held across the execution: the plugin may call back (a custom-call handler)
    /// into code that uses the session.
    stepping: Option<std::thread::ThreadId>,
    /// The fork generation `stepping` was set in: in a process forked since, the thread
    /// that stepped does not exist, and the step never ends there.
    stepping_generation: u32,
    /// The slots the running step writes (its outputs); empty between steps.
    step_writes: Vec<usize>,
    /// The slots whose buffers the running step donates; empty between steps.
    step_donates: Vec<usize>,
    /// The slots whose loaders are running, and on which thread: a loader that asks for
    /// its own slot again (directly, through another slot's loader, or by calling a
    /// program that reads it) on that thread is a cycle, refused instead of recursing.
    loading: Vec<(usize, std::thread::ThreadId)>,
    /// The slots being read out ([`Session::read_slot`]), once per read: a step does not
    /// donate their buffers.
    reading: Vec<usize>,
    /// The slots whose `bound` flag is set (few): a step donates a slot's buffer only when
    /// none of them (nor, for a bound slot, any slot) holds it too.
    bound: Vec<usize>,
}

impl State {
    /// Whether a thread other than this one runs a step of the session. The step's own
    /// thread and plugin callbacks (a custom-call handler of the running program) are
    /// inside the step: they never wait for it.
    fn stepped_elsewhere(&self) -> bool {
        let here = std::thread::current().id();
        self.stepper()
            .is_some_and(|t| t != here && !crate::raw::callback::in_callback())
    }

    /// Whether a call that binds or fetches the slots `names` waits for another thread's
    /// step: only for slots that step writes or donates (a bind would be overwritten by its
    /// output, a fetch could return an input being consumed). Others go ahead at once,
    /// and land as they would after the step: a handler of the step may have handed the
    /// call to another thread and be waiting for it.
    fn step_holds(&self, names: &[&str]) -> bool {
        let held = |i: &usize| self.step_writes.contains(i) || self.step_donates.contains(i);
        self.stepped_elsewhere() && names.iter().any(|n| self.index.get(*n).is_some_and(held))
    }

    /// Whether another thread's step donates one of `buffers` (held by a slot it donates):
    /// a bind of such a buffer to any slot waits for the step, and is then refused as
    /// deleted, instead of landing a buffer the step is consuming.
    fn step_consumes(&self, buffers: &[&Buffer]) -> bool {
        let donated = |&i: &usize| match &self.slots[i].content {
            Content::Ready(d) => buffers.iter().any(|b| b.raw().same(d.raw())),
            _ => false,
        };
        self.stepped_elsewhere() && self.step_donates.iter().any(donated)
    }

    /// Refuses a bind (or, with `fetch`, a fetch) of slot `i` from inside a plugin
    /// callback (a custom-call handler) where it would be lost or would read an input
    /// being consumed: the running step writes the slot (its outputs land when it returns,
    /// over a bind) or donates it (a fetch), or, for a bind, the slot holds a step's output
    /// that the plugin is still computing (a handler of that step replacing it would drop
    /// the step's result). Such a callback cannot wait for the step: it may be part of it,
    /// and nothing tells which execution it serves.
    fn check_callback_use(&self, i: usize, fetch: bool) -> Result<()> {
        if !crate::raw::callback::in_callback() {
            return Ok(());
        }
        let slot = &self.slots[i];
        let (what, running, does) = match fetch {
            true => ("a fetch", &self.step_donates, "donates the slot's buffer"),
            false => ("a bind", &self.step_writes, "writes the slot"),
        };
        if self.stepper().is_some() && running.contains(&i) {
            return Err(Error::invalid(format!(
                "slot {:?}: {what} from inside a plugin callback (a custom-call handler) while \
                 a step of this session that {does} is running (a value bound now would be \
                 replaced by the step's output, and a donated buffer is being consumed), and \
                 a callback cannot wait for the step, which may be waiting for the callback; \
                 do it after the step returns",
                slot.name
            )));
        }
        if fetch {
            return Ok(());
        }
        if let (Content::Ready(b), true) = (&slot.content, slot.from_step) {
            if !b.is_deleted() && matches!(b.is_ready(), Ok(false)) {
                return Err(Error::invalid(format!(
                    "slot {:?}: {what} from inside a plugin callback (a custom-call handler) \
                     while the slot holds a step's output that is still being computed: a \
                     handler of that step would replace the step's own result; do it once \
                     the output is ready",
                    slot.name
                )));
            }
        }
        Ok(())
    }

    /// The thread running a step of the session, if any (a step a parent of this forked
    /// process was running is none: its thread is not here).
    fn stepper(&self) -> Option<std::thread::ThreadId> {
        self.stepping
            .filter(|_| !crate::raw::guard::forked_since(self.stepping_generation))
    }

    fn slot_index(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.slots.push(Slot {
            name: name.to_string(),
            spec: None,
            content: Content::Empty,
            bound: false,
            from_step: false,
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
        // An error names at most this many slots (a session may hold thousands).
        const SHOWN: usize = 16;
        let mut text = self
            .slots
            .iter()
            .take(SHOWN)
            .map(|s| format!("{:?}", s.name))
            .collect::<Vec<_>>()
            .join(", ");
        if self.slots.len() > SHOWN {
            text.push_str(&format!(" and {} more", self.slots.len() - SHOWN));
        }
        text
    }

    /// Puts `content` into slot `i`; `bound`: a buffer a caller bound as it was (see
    /// [`Slot::bound`]).
    fn store(&mut self, i: usize, content: Content, bound: bool) {
        let slot = &mut self.slots[i];
        slot.content = content;
        slot.from_step = false;
        if slot.bound != bound {
            slot.bound = bound;
            if bound {
                self.bound.push(i);
            } else {
                self.bound.retain(|&j| j != i);
            }
        }
    }

    /// Whether a slot other than `i` holds `b`, the buffer of slot `i`: only a slot holding
    /// a bound buffer can (uploads and step outputs are fresh buffers), so unless slot `i`
    /// is bound itself only those few are compared.
    fn held_elsewhere(&self, i: usize, b: &Buffer) -> Option<usize> {
        let holds = |j: usize| {
            j != i && matches!(&self.slots[j].content, Content::Ready(o) if o.raw().same(b.raw()))
        };
        if self.slots[i].bound {
            (0..self.slots.len()).find(|&j| holds(j))
        } else {
            self.bound.iter().copied().find(|&j| holds(j))
        }
    }

    /// The second half of a bind, under the lock: all or nothing, the prepared values and
    /// the loaders land in their slots (created as needed). A slot given a type meanwhile
    /// (by another thread) is checked again, and a bound buffer deleted meanwhile (a step
    /// donated it) is refused, before anything changes.
    fn land(&mut self, ready: Vec<Ready>, lazy: Vec<LazyBind>) -> Result<()> {
        let declared = lazy
            .iter()
            .filter_map(|(n, s, _)| Some((n, s.as_ref()?, "it is declared")));
        let bound = ready
            .iter()
            .map(|(n, s, ..)| (n, s, "the value bound to it is"));
        for (name, spec, what) in bound.chain(declared) {
            if let Some(have) = self
                .index
                .get(name)
                .and_then(|&i| self.slots[i].spec.as_ref())
            {
                if have != spec {
                    return Err(Error::invalid(format!(
                        "slot {name:?} holds {have}, but {what} {spec}"
                    )));
                }
            }
        }
        if let Some((name, ..)) = ready.iter().find(|r| r.2.is_deleted()) {
            return Err(deleted(name));
        }
        let names = ready.iter().map(|r| &r.0).chain(lazy.iter().map(|l| &l.0));
        for name in names {
            if let Some(&i) = self.index.get(name) {
                self.check_callback_use(i, false)?;
            }
        }
        for (name, spec, buffer, uploaded) in ready {
            let i = self.slot_index(&name);
            self.settle_spec(i, &spec, "the value bound to it")?;
            if uploaded {
                self.uploads += 1;
            }
            self.store(i, Content::Ready(buffer), !uploaded);
        }
        for (name, spec, loader) in lazy {
            let i = self.slot_index(&name);
            if let Some(spec) = spec {
                self.settle_spec(i, &spec, "its declared spec")?;
            }
            self.store(i, Content::Lazy(loader), false);
        }
        Ok(())
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
    /// Signalled when a program of this session finishes.
    idle: std::sync::Condvar,
}

impl Inner {
    /// Waits until no program of this session runs, so calls stay serialised. A call made
    /// while one runs on this same thread (a custom-call handler of the running program),
    /// or from inside any plugin callback (the running program may be waiting for it), is
    /// refused instead of waiting for itself.
    /// `what` names the caller's operation for the refusal.
    fn wait_idle<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        what: &str,
    ) -> Result<MutexGuard<'a, State>> {
        while let Some(t) = st.stepper() {
            if t == std::thread::current().id() {
                return Err(Error::invalid(format!(
                    "the session is stepping: {what} needs the session between steps, and a \
                     program of this session is running and waits for this call (a \
                     custom-call handler of the running step); do it after the step returns"
                )));
            }
            if crate::raw::callback::in_callback() {
                return Err(Error::invalid(format!(
                    "the session is stepping: {what} needs the session between steps, and a \
                     step of this session is running on another thread, which a plugin \
                     callback (this custom-call handler) cannot wait for: the plugin may be \
                     waiting for the callback first; do it outside the handler"
                )));
            }
            st = self.idle.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        Ok(st)
    }

    /// The lock, once no other thread runs a step that writes or donates one of the slots
    /// `names` ([`State::step_holds`]), so that a bind or a fetch of them lands after that
    /// step's outputs are stored. The step's own thread and plugin callbacks (a custom-call
    /// handler of the running program) go ahead: they run inside the step.
    fn lock_between_steps(&self, names: &[&str], buffers: &[&Buffer]) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        while st.step_holds(names) || st.step_consumes(buffers) {
            st = self.idle.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st
    }

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
            SlotValue::Buffer(b) | SlotValue::Uploaded(b) if b.is_deleted() => Err(deleted(name)),
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

    /// The first half of a bind, without the lock: refuses an empty or repeated name
    /// (among `values` and `lazy`), checks each value against its slot's spec and uploads
    /// host values. Returns `(name, spec, buffer, uploaded)` for [`State::land`].
    fn prepare(&self, values: Vec<(String, SlotValue)>, lazy: &[LazyBind]) -> Result<Vec<Ready>> {
        let mut seen = std::collections::HashSet::with_capacity(values.len() + lazy.len());
        for name in values.iter().map(|v| &v.0).chain(lazy.iter().map(|l| &l.0)) {
            if name.is_empty() {
                return Err(Error::invalid("a slot name is empty"));
            }
            if !seen.insert(name.as_str()) {
                return Err(Error::invalid(format!(
                    "slot {name:?} is given more than one value"
                )));
            }
        }
        let mut ready = Vec::with_capacity(values.len());
        for (name, value) in values {
            let spec = {
                let st = self.lock();
                st.index.get(&name).and_then(|&i| st.slots[i].spec.clone())
            };
            let (buffer, uploaded) = self.materialize(&name, spec.as_ref(), value)?;
            let spec = ArraySpec {
                element_type: buffer.element_type(),
                dims: buffer.dims().to_vec(),
            };
            ready.push((name, spec, buffer, uploaded));
        }
        Ok(ready)
    }

    fn check_device(&self, name: &str, b: &Buffer) -> Result<()> {
        let d = b.device()?;
        if d != self.device {
            return Err(Error::invalid(format!(
                "the buffer bound to slot {name:?} is on {d}{}, but the session runs on {}",
                of_another_client(&d, &self.device),
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
            let me = std::thread::current().id();
            let (name, spec) = {
                let mut st = self.lock();
                let name = st.slots[i].name.clone();
                if st.loading.contains(&(i, me)) {
                    let chain = st
                        .loading
                        .iter()
                        .filter(|(_, t)| *t == me)
                        .map(|(j, _)| format!("{:?}", st.slots[*j].name))
                        .collect::<Vec<_>>()
                        .join(" -> ");
                    return Err(Error::invalid(format!(
                        "slot {name:?} is being loaded: its loader asked for it again (a \
                         loader cycle: {chain} -> {name:?}); a loader must not need its own \
                         slot"
                    )));
                }
                st.loading.push((i, me));
                (name, st.slots[i].spec.clone())
            };
            let loading = Loading(self, i, me);
            let value = loader().map_err(|e| prefix(&name, e));
            drop(loading);
            let value = value?;
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
                st.store(i, Content::Ready(buffer), !uploaded);
            }
        }
        Ok(())
    }
}

/// Takes one mark of a read of slot `.1` ([`Session::read_slot`]) away when the read ends.
struct Reading<'a>(&'a Inner, usize);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if let Some(k) = st.reading.iter().position(|&i| i == self.1) {
            st.reading.swap_remove(k);
        }
    }
}

/// Takes slot `.1`'s mark of a running loader on thread `.2` away on every path out of the
/// loader (errors and panics included).
struct Loading<'a>(&'a Inner, usize, std::thread::ThreadId);

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if let Some(k) = st.loading.iter().position(|e| *e == (self.1, self.2)) {
            st.loading.remove(k);
        }
    }
}

/// `" of another client"` when `d` and `session_device` belong to different clients (their
/// names alone can be equal: `CpuDevice(id=0)` and `CpuDevice(id=0)`), else nothing.
fn of_another_client(d: &Device, session_device: &Device) -> &'static str {
    if Arc::ptr_eq(d.core(), session_device.core()) {
        ""
    } else {
        " of another client"
    }
}

/// A slot's buffer, unless it was deleted. (A step of this session never donates a buffer
/// that another of its slots holds, so the slot lost it outside the session, or to a step
/// that failed.)
fn ready_buffer(name: &str, b: &Buffer) -> Result<Buffer> {
    if b.is_deleted() {
        return Err(Error::Deleted(format!(
            "slot {name:?}: its buffer was deleted or donated outside this session (by \
             delete(), by a call that donated it, or by another session sharing it), or \
             consumed by a step of this session that failed; bind it again"
        )));
    }
    Ok(b.clone())
}

/// The refusal of a bind of a buffer that was deleted (or donated) before it landed.
fn deleted(name: &str) -> Error {
    Error::Deleted(format!(
        "the buffer bound to slot {name:?} was deleted (or donated)"
    ))
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
                idle: std::sync::Condvar::new(),
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
            // Portable: it runs on any device, but only of the client it was compiled by.
            [] if Arc::ptr_eq(exe.raw_parts()?.0, self.inner.device.core()) => true,
            [] => {
                return Err(Error::invalid(format!(
                    "{} is a portable executable of another client, but the session's slots \
                     live on {} of its own client; compile it with the session's client",
                    exe.name(),
                    self.inner.device
                )))
            }
            [d] if *d == self.inner.device => false,
            [d] => {
                let other = of_another_client(d, &self.inner.device);
                let fix = if other.is_empty() {
                    "compile it for that device (or portable)"
                } else {
                    "compile it with the session's client"
                };
                return Err(Error::invalid(format!(
                    "{} runs on {d}{other}, but the session's slots live on {}; {fix}",
                    exe.name(),
                    self.inner.device
                )));
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
    /// differs from the slot's is refused here, naming the slot, before any upload. While
    /// another thread runs a program of this session that writes or donates the slot, the
    /// bind lands after that step has stored its outputs (so they do not overwrite it);
    /// other slots are bound at once.
    pub fn bind(&self, name: &str, value: SlotValue) -> Result<()> {
        self.bind_all(vec![(name.to_string(), value)])
    }

    /// Binds every `(name, value)` pair at once, all or nothing: each value is checked
    /// against its slot's element type and shape (and against the other pairs for the same
    /// name, which is refused), host values are uploaded, and only when every value is
    /// ready do the slots change. On any error the session is left as it was. Slots are
    /// created as needed. (A checkpoint restore is built on this.)
    pub fn bind_all(&self, values: Vec<(String, SlotValue)>) -> Result<()> {
        self.bind_all_with(values, Vec::new())
    }

    /// [`Session::bind_all`] that also binds each `(name, spec, loader)` of `lazy` to its
    /// loader (as [`Session::bind_lazy`]), in the same all-or-nothing step. A `spec` is the
    /// element type and shape the slot is declared to hold: it is checked with the values
    /// against the slots' specs before any slot changes, and becomes the slot's spec, so
    /// whatever lands there later (a bind, a restore, the loader's value) is checked
    /// against it. A name given twice (as a value or a loader) is refused.
    pub fn bind_all_with(
        &self,
        values: Vec<(String, SlotValue)>,
        lazy: Vec<LazyBind>,
    ) -> Result<()> {
        let ready = self.inner.prepare(values, &lazy)?;
        let names = ready.iter().map(|r| &r.0).chain(lazy.iter().map(|l| &l.0));
        let names: Vec<&str> = names.map(String::as_str).collect();
        let buffers: Vec<&Buffer> = ready.iter().filter(|r| !r.3).map(|r| &r.2).collect();
        let mut st = self.inner.lock_between_steps(&names, &buffers);
        drop(buffers);
        st.land(ready, lazy)
    }

    /// Drops the loader of every slot whose loader has not run (it never will: bindings
    /// call this when the session closes), releasing what the loaders captured; those slots
    /// read [`SlotState::Deleted`] until bound again. A loader running now is left to
    /// finish: its value lands as it would have (the caller frees it), and the loader is
    /// released then. Returns how many loaders were dropped. The loaders are dropped after
    /// the session's lock is released (dropping one may run code that uses the session).
    pub fn drop_loaders(&self) -> usize {
        let dropped: Vec<Loader> = {
            let mut guard = self.inner.lock();
            let st = &mut *guard;
            let mut out = Vec::new();
            for (i, slot) in st.slots.iter_mut().enumerate() {
                let running = st.loading.iter().any(|&(j, _)| j == i);
                if running || !matches!(slot.content, Content::Lazy(_)) {
                    continue;
                }
                if let Content::Lazy(l) = std::mem::replace(&mut slot.content, Content::Dropped) {
                    out.push(l);
                }
            }
            out
        };
        dropped.len()
    }

    /// Binds slot `name` to a loader, called only when a program first needs the slot (or
    /// on [`Session::fetch`]). Its value is checked against the slot's type and shape then.
    pub fn bind_lazy(&self, name: &str, loader: Loader) -> Result<()> {
        self.bind_all_with(Vec::new(), vec![(name.to_string(), None, loader)])
    }

    /// The buffer slot `name` holds (running its loader first if it is lazy). The buffer is
    /// shared with the slot: a later donation of the slot makes it unusable. While another
    /// thread runs a program of this session that writes or donates the slot, this waits
    /// for that step's outputs (as do the binds): what it returns is never an input that
    /// step is donating.
    pub fn fetch(&self, name: &str) -> Result<Buffer> {
        let i = {
            let st = self.inner.lock_between_steps(&[name], &[]);
            let i = st.find(name)?;
            st.check_callback_use(i, true)?;
            if let Content::Ready(b) = &st.slots[i].content {
                return ready_buffer(name, b);
            }
            i
        };
        self.inner.load(&[i])?;
        let st = self.inner.lock_between_steps(&[name], &[]);
        match &st.slots[i].content {
            Content::Ready(b) => ready_buffer(name, b),
            _ => Err(st.slots[i].no_value(" yet: bind it first")),
        }
    }

    /// Runs `f` on the buffer of slot `name` (loaded first if lazy) once it is ready. While
    /// `f` runs, no step of this session donates that buffer: a step that starts meanwhile
    /// writes a fresh buffer instead, so `f` can copy the value out whole (Python's
    /// `Session.fetch`), and neither side fails. Waits as [`Session::fetch`] does.
    pub fn read_slot<R>(&self, name: &str, f: impl FnOnce(&Buffer) -> Result<R>) -> Result<R> {
        let inner = &*self.inner;
        loop {
            let b = self.fetch(name)?;
            let mut st = inner.lock();
            let i = st.find(name)?;
            // A step that began since may be consuming it, or have replaced it: again.
            let same = matches!(&st.slots[i].content, Content::Ready(c) if c.raw().same(b.raw()));
            if !same || st.step_holds(&[name]) {
                continue;
            }
            st.reading.push(i);
            drop(st);
            let _reading = Reading(inner, i);
            return b.block_until_ready().and_then(|()| f(&b));
        }
    }

    /// Runs `f` on every slot that has a value, `(name, buffer)` in creation order (lazy
    /// slots are loaded first), at one moment of the session: while `f` runs, no program of
    /// this session runs and no bind from another thread lands (they wait for `f`), so what
    /// `f` sees is one state, and no buffer it is given is donated under it. A checkpoint
    /// is written this way. Refused, like a nested step, from inside a running program's
    /// custom-call handler.
    pub fn with_values<R>(&self, f: impl FnOnce(&[(String, Buffer)]) -> Result<R>) -> Result<R> {
        let inner = &*self.inner;
        let all: Vec<usize> = (0..inner.lock().slots.len()).collect();
        inner.load(&all)?;
        let st = inner.wait_idle(
            inner.lock(),
            "reading every slot at one moment (as a checkpoint save does)",
        )?;
        let mut values = Vec::with_capacity(st.slots.len());
        for slot in &st.slots {
            if let Content::Ready(b) = &slot.content {
                values.push((slot.name.clone(), ready_buffer(&slot.name, b)?));
            }
        }
        // Held as a step that writes every slot is: other threads' steps, binds and
        // fetches wait until `f` returns.
        let mut st = st;
        st.step_writes = (0..st.slots.len()).collect();
        let held = Stepping::begin(inner, st);
        let r = f(&values);
        drop(held);
        r
    }

    /// Whether this thread runs inside a step of this session (the step's own thread, and
    /// so a custom-call handler its program runs inline there), where a restore must not
    /// land. A callback on another thread is not counted: nothing says which execution it
    /// serves, and binds refuse the slots a running step writes from any callback.
    pub fn in_step(&self) -> bool {
        self.inner.lock().stepper() == Some(std::thread::current().id())
    }

    /// Waits up to `limit` until no other thread runs a program of this session; whether
    /// none does now. Faces wait in slices with it, answering Ctrl-C in between, before a
    /// call that would wait for a step.
    pub fn wait_between_steps(&self, limit: std::time::Duration) -> bool {
        self.wait_for_slots(None, limit)
    }

    /// [`Session::wait_between_steps`] for a bind or fetch of the slots `names` only: it
    /// waits while another thread's step writes or donates one of them, as
    /// [`Session::bind`] and [`Session::fetch`] do.
    pub fn wait_for_slots(&self, names: Option<&[&str]>, limit: std::time::Duration) -> bool {
        let inner = &*self.inner;
        let busy = |st: &mut State| match names {
            Some(n) => st.step_holds(n),
            None => st.stepped_elsewhere(),
        };
        let waited = inner.idle.wait_timeout_while(inner.lock(), limit, busy);
        !busy(&mut waited.unwrap_or_else(|e| e.into_inner()).0)
    }

    /// As [`Session::fetch`], but never runs a loader and never waits: `Ok(None)` when slot
    /// `name` is bound to a loader that has not run yet, or when another thread holds the
    /// session or runs one of its programs; [`Session::fetch`] then does the rest.
    pub fn fetch_loaded(&self, name: &str) -> Result<Option<Buffer>> {
        let st = match self.inner.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(None),
        };
        if st.step_holds(&[name]) {
            // Another thread's step will replace or donate what the slot holds now.
            return Ok(None);
        }
        let i = st.find(name)?;
        st.check_callback_use(i, true)?;
        match &st.slots[i].content {
            Content::Ready(b) => ready_buffer(name, b).map(Some),
            Content::Lazy(_) => Ok(None),
            Content::Empty | Content::Dropped => Err(st.slots[i].no_value(" yet: bind it first")),
        }
    }

    /// Every slot: name, type and shape, state (in creation order). Once the client is
    /// closed, every slot that held a value or a loader reads [`SlotState::Deleted`].
    pub fn slots(&self) -> Vec<SlotInfo> {
        let client_closed = self.inner.client.is_closed();
        self.inner
            .lock()
            .slots
            .iter()
            .map(|s| SlotInfo {
                name: s.name.clone(),
                spec: s.spec.clone(),
                state: s.state(client_closed),
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

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let client_closed = self.inner.client.is_closed();
        let st = self.inner.lock();
        let slots = st
            .slots
            .iter()
            .map(|s| describe_slot(s.name.as_str(), s.spec.as_ref(), s.state(client_closed)))
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
        self.call_outputs().map(drop)
    }

    /// As [`SessionProgram::call`], and returns every output of this step in order
    /// (discarded ones included). An output stored in a slot is shared with it: a later
    /// step that donates the slot makes that buffer unusable. These are this call's own
    /// outputs even when other threads step the session right after it.
    pub fn call_outputs(&self) -> Result<Vec<Buffer>> {
        self.call_with(Vec::new())
    }

    /// Binds `values` to input slots of this program and runs it, as one step: no other
    /// thread's bind or step lands between the bind and the step's read of its inputs, so
    /// the step computes with these values (Python's `program(x=...)`). The values are
    /// checked and uploaded first, all or nothing, as [`Session::bind_all`] does; a name
    /// that is not an input of the program is refused.
    pub fn call_with(&self, values: Vec<(String, SlotValue)>) -> Result<Vec<Buffer>> {
        let inner = &*self.inner;
        let ready = match values.is_empty() {
            true => Vec::new(),
            false => self.prepare_inputs(values)?,
        };
        let mut st = inner.wait_idle(inner.lock(), "running a program of the session")?;
        let given = |st: &State, i: usize| ready.iter().any(|r| r.0 == st.slots[i].name);
        let lazy: Vec<usize> = (self.inputs.iter().copied())
            .filter(|&i| matches!(st.slots[i].content, Content::Lazy(_)) && !given(&st, i))
            .collect();
        if !lazy.is_empty() {
            // Loaders run without the lock (they may take long, or call back into a
            // binding that uses the session).
            drop(st);
            inner.load(&lazy)?;
            st = inner.wait_idle(inner.lock(), "running a program of the session")?;
        }
        st.land(ready, Vec::new())?;
        // The execution borrows clones of the slots' buffers; the lock is released while the
        // plugin runs (its custom calls may use the session), and `stepping` keeps other
        // calls out until the outputs are stored.
        let mut refs: Vec<Buffer> = Vec::with_capacity(self.inputs.len());
        for &i in &self.inputs {
            let slot = &st.slots[i];
            match &slot.content {
                Content::Ready(b) => refs.push(ready_buffer(&slot.name, b)?),
                _ => {
                    return Err(
                        slot.no_value(&format!(": bind it before calling {}", self.exe.name()))
                    )
                }
            }
        }
        let slot_refs: Vec<&Buffer> = self
            .inputs
            .iter()
            .map(|&i| match &st.slots[i].content {
                Content::Ready(b) => b,
                _ => unreachable!("checked above"),
            })
            .collect();
        let donate: Vec<usize> = self
            .donated
            .iter()
            .copied()
            // Never donate borrowed host memory, nor a buffer that another argument of
            // this call also reads (one buffer bound to two slots, through clones of one
            // handle or the same one), nor one that another slot of the session holds (a
            // snapshot bound from an earlier step's output), nor one being read out: that
            // slot keeps its value, and this step writes a fresh buffer instead.
            .filter(|&k| {
                !refs[k].borrows_host()
                    && slot_refs
                        .iter()
                        .enumerate()
                        .all(|(j, b)| j == k || !b.raw().same(slot_refs[k].raw()))
                    && st.held_elsewhere(self.inputs[k], slot_refs[k]).is_none()
                    && !st.reading.contains(&self.inputs[k])
            })
            .collect();
        drop(slot_refs);
        st.step_writes.clear();
        st.step_writes
            .extend(self.outputs.iter().flatten().copied());
        st.step_donates.clear();
        st.step_donates
            .extend(donate.iter().map(|&k| self.inputs[k]));
        let stepping = Stepping::begin(inner, st);
        let refs: Vec<&Buffer> = refs.iter().collect();
        // A failed execution's error is carried by its outputs: a step that keeps none in a
        // slot (a program without outputs, or `outputs=[None]`) would lose it, so it waits
        // for the execution and fails with it.
        let keeps_none = self.outputs.iter().all(Option::is_none);
        let outs = if donate.is_empty() && !self.portable && !keeps_none {
            self.exe
                .execute(&refs)
                .map_err(|e| self.in_slot_terms(e, &[]))?
        } else {
            let options = ExecuteOptions {
                donate,
                device: self.portable.then(|| inner.device.clone()),
                completion_events: keeps_none,
                ..Default::default()
            };
            let lists = [refs];
            let ran = self.exe.execute_with(&lists, &options).and_then(|mut r| {
                let outs = r.outputs.pop().unwrap_or_default();
                wait_execution(&r.events, outs.iter().filter(|_| keeps_none))?;
                Ok(outs)
            });
            match ran {
                Ok(outs) => outs,
                Err(e) => {
                    let e = self.in_slot_terms(e, &options.donate);
                    return Err(self.lost_in_failure(e, &options.donate, &lists[0]));
                }
            }
        };
        let mut st = inner.lock();
        for (out, slot) in outs.iter().zip(&self.outputs) {
            if let Some(i) = slot {
                st.store(*i, Content::Ready(out.clone()), false);
                st.slots[*i].from_step = true;
            }
        }
        st.stepping = None;
        st.step_writes.clear();
        st.step_donates.clear();
        drop(st);
        drop(stepping);
        Ok(outs)
    }

    /// [`Inner::prepare`] of values for this program's input slots; other names are refused.
    fn prepare_inputs(&self, values: Vec<(String, SlotValue)>) -> Result<Vec<Ready>> {
        let names: Vec<String> = self.inputs();
        if let Some((n, _)) = values.iter().find(|(n, _)| !names.contains(n)) {
            let names = if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            };
            let exe = self.exe.name();
            return Err(Error::invalid(format!(
                "{exe} has no input slot {n:?} (its inputs: {names})"
            )));
        }
        self.inner.prepare(values, &[])
    }

    /// `e`, a refused or failed execution's error, in the session's terms: each `argument
    /// N` it names is the slot that argument is read from (`slot "w" (argument N)`), and a
    /// donation refused because host views of the buffer exist says how to get out of it.
    fn in_slot_terms(&self, e: Error, donate: &[usize]) -> Error {
        let st = self.inner.lock();
        let names: Vec<&str> = self
            .inputs
            .iter()
            .map(|&i| st.slots[i].name.as_str())
            .collect();
        let exe = self.exe.name();
        e.map_message(|m| {
            let mut m = name_arguments(&m, &names);
            if m.contains("cannot be donated while") {
                let which: Vec<String> = donate
                    .iter()
                    .filter_map(|&k| names.get(k).map(|n| format!("{n:?}")))
                    .collect();
                m.push_str(&format!(
                    "; {exe} donates slot{} {} to update {} in place: drop the host views \
                     (arrays made with np.from_dlpack, external references) of the slot's \
                     buffer before the step, or make the program without donation \
                     (Session.program(..., donate=False); Rust: Session::program_with(.., \
                     false)), which writes a fresh buffer and leaves the view's one alone",
                    if which.len() == 1 { "" } else { "s" },
                    which.join(", "),
                    if which.len() == 1 { "it" } else { "them" },
                ));
            }
            m
        })
    }

    /// `e`, a failed execution's error, naming the donated slots the plugin consumed
    /// before it failed: their values are gone, and the slots read as deleted until bound
    /// again.
    fn lost_in_failure(&self, e: Error, donate: &[usize], refs: &[&Buffer]) -> Error {
        // Only the plugin's own failure consumed anything (see `with_consumed`, which said
        // so already, naming the slots): what is left to say is what to do.
        if !crate::client::executable::plugin_ran(&e) {
            return e;
        }
        let st = self.inner.lock();
        let lost: Vec<String> = donate
            .iter()
            .filter(|&&k| refs[k].is_deleted())
            .map(|&k| format!("{:?}", st.slots[self.inputs[k]].name))
            .collect();
        if lost.is_empty() {
            return e;
        }
        let note = format!(
            "bind slot{} {} again",
            if lost.len() == 1 { "" } else { "s" },
            lost.join(", "),
        );
        e.map_message(|m| format!("{m}; {note}"))
    }
}

/// `m` with each `argument N` (a whole number, not part of a longer word) that is an
/// argument of a session program written as the slot it is read from, `names[N]`:
/// `slot "w" (argument N)`.
fn name_arguments(m: &str, names: &[&str]) -> String {
    const WORD: &str = "argument ";
    let mut out = String::with_capacity(m.len() + 16);
    let mut rest = m;
    while let Some(at) = rest.find(WORD) {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let tail = &after[WORD.len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let starts_word = !out
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let k = (digits > 0 && starts_word)
            .then(|| tail[..digits].parse::<usize>().ok())
            .flatten()
            .filter(|&k| k < names.len());
        match k {
            Some(k) => {
                out.push_str(&format!("slot {:?} (argument {k})", names[k]));
                rest = &tail[digits..];
            }
            None => {
                out.push_str(WORD);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Ends a step on every path out of [`SessionProgram::call`] (errors included): clears
/// `stepping` when it is still this thread's step, and wakes the calls waiting for it.
/// The success path clears it itself while it stores the outputs, and by the time this
/// guard drops another thread may have begun its own step: clearing that one's flag would
/// let a third call read the slots mid-step and lose an update.
struct Stepping<'a>(&'a Inner);

impl<'a> Stepping<'a> {
    /// Marks this thread as stepping the session and releases the lock: other threads'
    /// steps, binds and fetches wait until the guard drops.
    fn begin(inner: &'a Inner, mut st: MutexGuard<'a, State>) -> Stepping<'a> {
        st.stepping = Some(std::thread::current().id());
        st.stepping_generation = crate::fork_generation();
        drop(st);
        Stepping(inner)
    }
}

impl Drop for Stepping<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if st.stepping == Some(std::thread::current().id()) {
            st.stepping = None;
            st.step_writes.clear();
            st.step_donates.clear();
        }
        drop(st);
        self.0.idle.notify_all();
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

#[cfg(test)]
mod tests {
    use super::name_arguments;

    #[test]
    fn name_arguments_rewrites_whole_argument_numbers_only() {
        let names = ["x", "w"];
        assert_eq!(
            name_arguments("argument 1 cannot be donated", &names),
            "slot \"w\" (argument 1) cannot be donated"
        );
        assert_eq!(
            name_arguments("donated argument 0 before; argument 1: gone", &names),
            "donated slot \"x\" (argument 0) before; slot \"w\" (argument 1): gone"
        );
        // Out of range, not a number, or part of a longer word: left as they are.
        for m in [
            "argument 12 is odd",
            "argument list 0 has 2 buffers",
            "subargument 0 is odd",
            "arguments 0, 1",
            "argument ",
        ] {
            assert_eq!(name_arguments(m, &names), m);
        }
    }
}
