// SPDX-License-Identifier: GPL-2.0

//! The per-task bitmask that says which deferred-unwind callbacks a task
//! owes before it returns to user space.
//!
//! One word per task, `task_struct::unwind_info.unwind_mask`, is the only
//! source of truth.  Its two low bits are reserved:
//!
//! - [`PENDING`]: the task_work is queued and has not started yet;
//! - [`USED`]: the unwind cache was filled during this kernel entry;
//!
//! and every other bit belongs to one registered callback: set when that
//! callback was requested during this kernel entry, and kept set after it
//! ran, so a second request in the same entry is answered "already done"
//! without queueing anything.  The word is cleared on the way back to user
//! space, unless a task_work is still pending: that is the C inline
//! `unwind_reset_info()` of `include/linux/unwind_deferred.h`, which both
//! implementations share (the host model checker runs a transcription of
//! it, `host/tests/common/mod.rs`).
//!
//! Who touches it: the task itself (the task_work and the return to user
//! space), interrupts and NMIs on the task's CPU (requests), and
//! `cancel` on any CPU (clearing one callback's bit in every task).  Every
//! change is one atomic read-modify-write, so there is no lock; the model
//! checker in the host tests explores their interleavings.

/// The task_work is queued and has not started.
pub const PENDING: usize = 1 << 0;
/// The unwind cache holds this entry's trace.
pub const USED: usize = 1 << 1;
/// Bits that are never given to a callback.
pub const RESERVED: usize = PENDING | USED;

/// The atomic word operations the protocol needs (`atomic_long_t` in the
/// kernel, `AtomicUsize` or loom's on the host).  Orderings are those of
/// the kernel's `atomic_long_*()` of the same name: full barriers for the
/// value-returning read-modify-writes, none for plain reads and `andnot`.
pub trait MaskWord {
    /// `atomic_long_read()`.
    fn load(&self) -> usize;
    /// `atomic_long_set()`.
    fn store(&self, v: usize);
    /// `atomic_long_fetch_or()`: returns the old value.
    fn fetch_or(&self, bits: usize) -> usize;
    /// `atomic_long_fetch_andnot()`: returns the old value.
    fn fetch_andnot(&self, bits: usize) -> usize;
    /// `atomic_long_try_cmpxchg()`: on failure, `old` is updated.
    fn try_cmpxchg(&self, old: &mut usize, new: usize) -> bool;
}

/// What a request must do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// This callback was already requested in this entry (pending or run):
    /// nothing to do, report 1.
    AlreadyRequested,
    /// A task_work is already queued and will run this callback too:
    /// report 0.
    Joined,
    /// This request set PENDING: the caller must queue the task_work (and
    /// call [`queue_failed`] if that fails), then report 0.
    QueueTaskWork,
}

/// Mark callback `bit` (a single bit, not reserved) as requested.
///
/// Called with interrupts disabled (or in NMI) on the task's own CPU.
pub fn request(mask: &impl MaskWord, bit: usize) -> Request {
    // Cheap check first: the common case of many samples in one entry.
    if is_requested(mask, bit) {
        return Request::AlreadyRequested;
    }
    let bits = PENDING | bit;
    let old = mask.fetch_or(bits);
    if old & bit != 0 {
        // Set by an NMI that hit between the load and the fetch_or.
        return Request::AlreadyRequested;
    }
    if old & PENDING != 0 {
        return Request::Joined;
    }
    Request::QueueTaskWork
}

/// Whether callback `bit` was already requested in this entry: the first
/// step of [`request`], which a caller may take apart to keep its common
/// case (many samples in one entry) short.  Same context as [`request`].
#[inline]
pub fn is_requested(mask: &impl MaskWord, bit: usize) -> bool {
    mask.load() & bit != 0
}

/// Queueing the task_work failed after [`request`] said to queue it: forget
/// this entry's requests so that nothing waits for a task_work that will
/// never run (upstream does the same).
pub fn queue_failed(mask: &impl MaskWord) {
    mask.store(0);
}

/// The task_work starts: clear PENDING and return the callback bits to run
/// (the caller removes the bits of callbacks that already ran in this
/// entry).  Requests made from now on in this entry see their bit set and
/// are answered from the cache.
pub fn take_pending(mask: &impl MaskWord) -> Option<usize> {
    let old = mask.fetch_andnot(PENDING);
    if old & PENDING == 0 {
        return None;
    }
    Some(old & !RESERVED)
}

/// Note that the unwind cache was filled in this entry.
pub fn mark_used(mask: &impl MaskWord) {
    mask.fetch_or(USED);
}

/// Whether a task_work is pending.
pub fn is_pending(mask: &impl MaskWord) -> bool {
    mask.load() & PENDING != 0
}

/// `unwind_deferred_cancel()` on one task: the callback's bit is cleared.
pub fn cancel(mask: &impl MaskWord, bit: usize) {
    mask.fetch_andnot(bit);
}

/// The registry of callback bits: `used` has a bit set for every callback
/// registered (and always the reserved bits).  Protected by a mutex in the
/// kernel.  Returns the bit number given to a new callback.
pub fn alloc_bit(used: &mut usize) -> Option<u32> {
    let free = !*used;
    if free == 0 {
        return None;
    }
    let bit = free.trailing_zeros();
    *used |= 1 << bit;
    Some(bit)
}

/// Give a callback's bit back (after cancel).
pub fn free_bit(used: &mut usize, bit: u32) {
    if let Some(b) = 1usize.checked_shl(bit) {
        if b & RESERVED == 0 {
            *used &= !b;
        }
    }
}
