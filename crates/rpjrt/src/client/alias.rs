//! The process's pending alias buffers ([`crate::Client::create_alias_buffer`]): each with
//! its completion, which the first of its fulfiller (fulfill, fail, drop) and its deletion
//! ([`deleted`], from [`crate::Buffer::delete`]) takes out.

use std::sync::{Arc, Mutex};

use crate::client::buffer::BufferMeta;
use crate::client::ClientCore;
use crate::raw::transfer::AliasCallback;

/// An alias's completion: taken out once.
pub(crate) struct AliasSlot {
    cb: Mutex<Option<AliasCallback>>,
}

impl AliasSlot {
    /// The completion, if nothing took it yet.
    pub(crate) fn take(&self) -> Option<AliasCallback> {
        self.cb.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Whether the completion was taken (the alias was fulfilled, failed or deleted).
    pub(crate) fn is_taken(&self) -> bool {
        self.cb.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }
}

/// The alias buffers whose fulfiller is pending, by address, with their completions and
/// clients. One of them as the target of a fulfill (itself, or another pending alias)
/// would make the alias wait for a buffer that waits in turn: the plugins accept it, and
/// every execution queued on it never ends. Deleting one fails it (see [`deleted`]).
static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

/// One pending alias: its address, its completion, its client.
type Pending = (usize, Arc<AliasSlot>, Arc<ClientCore>);

fn pending() -> std::sync::MutexGuard<'static, Vec<Pending>> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lists the alias buffer at `alias` (its address) of `core` as pending, with its
/// completion `cb`; returns the slot its fulfiller takes the completion from.
pub(crate) fn register(alias: usize, cb: AliasCallback, core: &Arc<ClientCore>) -> Arc<AliasSlot> {
    let slot = Arc::new(AliasSlot {
        cb: Mutex::new(Some(cb)),
    });
    pending().push((alias, Arc::clone(&slot), Arc::clone(core)));
    slot
}

/// Takes the alias at `alias` off the list (its fulfiller is done with it).
pub(crate) fn settled(alias: usize) {
    pending().retain(|(a, _, _)| *a != alias);
}

/// Whether the buffer at `alias` is a pending alias.
pub(crate) fn is_pending(alias: usize) -> bool {
    pending().iter().any(|(a, _, _)| *a == alias)
}

/// Fails the pending alias buffer at `alias` (a buffer's address), if it is one, as
/// [`crate::Buffer::delete`] deletes it: no fulfill can complete it any more (the fulfiller
/// refuses a deleted alias), and what waits on it would otherwise wait until the fulfiller
/// is dropped.
pub(crate) fn deleted(alias: usize) {
    let found = {
        let mut pending = pending();
        match pending.iter().position(|(a, _, _)| *a == alias) {
            Some(i) => pending.swap_remove(i),
            None => return,
        }
    };
    // No lock of ours is held: failing the alias runs its waiters' callbacks.
    let (_, slot, core) = found;
    if let Some(cb) = slot.take() {
        let _ = crate::raw::transfer::fulfill_alias_buffer::<BufferMeta>(
            core.raw(),
            cb,
            None,
            1,
            "the alias buffer was deleted before it was fulfilled",
        );
    }
}
