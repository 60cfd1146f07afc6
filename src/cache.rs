// SPDX-License-Identifier: GPL-2.0

//! The per-task unwind cache and `unwind_user_faultable()`.
//!
//! One page per task, allocated the first time the task is unwound in a
//! faultable context and freed with the task.  It holds the trace of the
//! current kernel entry, so that every request of the entry (from any
//! callback) is answered from one walk, and a bitmask of the callbacks that
//! already got it.  On the way back to user space the C inline
//! `unwind_reset_info()` zeroes `nr_entries` and `unwind_completed`, which
//! is why the layout is upstream's `struct unwind_cache`.

use crate::logic::mask;
use crate::task::{self, Info};
use crate::walk;
use core::mem::{offset_of, size_of};
use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Entries that fit in one page after the header, as upstream.
pub(crate) const MAX_ENTRIES: usize =
    (4096 - size_of::<bindings::unwind_cache>()) / size_of::<u64>();

/// `struct unwind_cache` with its flexible array sized to fill a page.
#[repr(C)]
pub(crate) struct Cache {
    /// Callbacks that already got this entry's trace (`unwind_completed`).
    pub(crate) completed: usize,
    /// Entries of this entry's trace; 0 if not walked yet (`nr_entries`).
    pub(crate) nr: u32,
    /// The trace.
    pub(crate) entries: [u64; MAX_ENTRIES],
}

// The C header must read the same fields at the same places, and an
// `unsigned long` entry is a `u64` (CONFIG_UNWIND_USER_RUST is 64-bit only).
const _: () = {
    assert!(size_of::<usize>() == size_of::<u64>());
    assert!(offset_of!(Cache, completed) == offset_of!(bindings::unwind_cache, unwind_completed));
    assert!(offset_of!(Cache, nr) == offset_of!(bindings::unwind_cache, nr_entries));
    assert!(offset_of!(Cache, entries) == size_of::<bindings::unwind_cache>());
    assert!(size_of::<Cache>() == 4096);
};

/// A trace handed to callbacks: `nr` entries at `entries` (null if none).
pub(crate) struct Trace {
    pub(crate) entries: *mut usize,
    pub(crate) nr: u32,
}

/// The current task's cache, allocated on first use.
///
/// # Safety
///
/// Must be called by the task itself, in a context that may sleep.
unsafe fn current_cache(info: Info) -> Result<&'static mut Cache> {
    let mut p = info.cache_ptr().cast::<Cache>();
    if p.is_null() {
        let mut b = KBox::<Cache>::new_uninit(GFP_KERNEL)?;
        // SAFETY: All fields are integers, so zero bytes are a valid
        // `Cache`, and `write_bytes` initialises all of it.
        let b = unsafe {
            core::ptr::write_bytes(b.as_mut_ptr(), 0, 1);
            b.assume_init()
        };
        p = KBox::into_raw(b);
        // SAFETY: Only current writes its own cache pointer (caller's duty).
        unsafe { info.set_cache_ptr(p.cast()) };
    }
    // SAFETY: `p` was allocated above or by an earlier call as a `Cache`, is
    // freed only by `free()` when the task is gone, and only current uses it
    // mutably (the C return path only writes two header fields while no
    // Rust code of this task runs).
    Ok(unsafe { &mut *p })
}

/// `unwind_user_faultable()`: the current task's user trace for this entry,
/// walked at most once per entry.
///
/// Errors: `EINVAL` if current has no mm, `ENOMEM` if the cache cannot be
/// allocated (the trace is then empty).
pub(crate) fn user_faultable() -> Result<Trace> {
    if !task::current_has_mm() {
        return Err(EINVAL);
    }
    let info = Info::current();
    // SAFETY: This is current, in faultable context (the caller's duty
    // stated in the C API).
    let cache = unsafe { current_cache(info)? };
    if cache.nr == 0 {
        let (n, _) = walk::unwind_current(&mut cache.entries);
        cache.nr = n as u32;
        // Have the return to user space reset the cache.
        mask::mark_used(&info.mask());
    }
    Ok(Trace {
        entries: cache.entries.as_mut_ptr().cast(),
        nr: cache.nr,
    })
}

/// The callbacks that already got this entry's trace: the cache's
/// `unwind_completed` bitmap, changed with atomic bit operations because
/// cancel clears bits in it from other CPUs.
///
/// # Invariants
///
/// `0` points to the `unwind_completed` word of a live cache.
#[derive(Clone, Copy)]
pub(crate) struct Completed(*mut usize);

impl Completed {
    /// The bitmap of `info`'s cache, if it has one.
    ///
    /// # Safety
    ///
    /// The task must stay alive while the result is used.
    pub(crate) unsafe fn of(info: Info) -> Option<Self> {
        let p = info.cache_ptr();
        // INVARIANT: A non-null cache lives until the task is freed.
        // SAFETY: `p` is a valid cache; only the field address is taken.
        (!p.is_null()).then(|| Completed(unsafe { &raw mut (*p).unwind_completed }))
    }

    /// The bitmap's value.
    pub(crate) fn get(self) -> usize {
        // SAFETY: By the type invariant the word is valid and aligned; all
        // concurrent writers use atomic operations.
        unsafe { Atomic::from_ptr(self.0) }.load(Relaxed)
    }

    /// Set bit `nr`.
    pub(crate) fn set(self, nr: u32) {
        // SAFETY: By the type invariant the word is valid; `nr` < 64 is
        // the caller's bit number, within the word.
        unsafe { bindings::set_bit(nr as usize, self.0) }
    }

    /// Clear bit `nr`.
    pub(crate) fn clear(self, nr: u32) {
        // SAFETY: As for `set`.
        unsafe { bindings::clear_bit(nr as usize, self.0) }
    }
}

/// Free a task's cache.
///
/// # Safety
///
/// The task is being freed: nothing uses its state any more.
pub(crate) unsafe fn free(info: Info) {
    let p = info.cache_ptr().cast::<Cache>();
    if !p.is_null() {
        // SAFETY: `p` came from `KBox::into_raw` in `current_cache()`, and
        // nothing else refers to it (caller's duty).
        drop(unsafe { KBox::from_raw(p) });
        // SAFETY: Exclusive access (caller's duty).
        unsafe { info.set_cache_ptr(core::ptr::null_mut()) };
    }
}
