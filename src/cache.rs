// SPDX-License-Identifier: GPL-2.0

//! The per-task unwind cache and `unwind_user_faultable()`.
//!
//! One page per task (upstream's `struct unwind_cache` with its flexible
//! array filling the page), allocated the first time the task is unwound
//! in a faultable context and freed with the task.  It holds the trace of
//! the current kernel entry, so that every request of the entry (from any
//! callback) is answered from one walk, and `unwind_completed`, the
//! callbacks that already got it.  On the way back to user space the C
//! inline `unwind_reset_info()` zeroes `nr_entries` and `unwind_completed`.
//!
//! The entries and `nr_entries` belong to the task alone; cancel clears
//! bits of `unwind_completed` from other CPUs, so that word is only ever
//! accessed with atomic operations, and no reference to the whole cache is
//! ever made.

use crate::logic::mask;
use crate::task::{self, CurrentInfo, Info};
use crate::walk;
use core::alloc::Layout;
use core::{marker::PhantomData, mem::size_of, ptr::NonNull};
use kernel::{
    alloc::{
        allocator::Kmalloc,
        flags::{__GFP_ZERO, GFP_KERNEL},
        Allocator, NumaNode,
    },
    bindings,
    bitmap::Bitmap,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    task::CurrentTask,
};

/// Entries that fit in one page after the header, as upstream.
pub(crate) const MAX_ENTRIES: usize =
    (4096 - size_of::<bindings::unwind_cache>()) / size_of::<u64>();

/// Size of a cache: one page.
const CACHE_SIZE: usize = size_of::<bindings::unwind_cache>() + MAX_ENTRIES * size_of::<u64>();

/// With `CONFIG_UNWIND_USER_RUST_POISON`, the byte a new cache's entries are
/// filled with (the slab poison byte), so that an entry no walk wrote shows
/// up as `0x6b6b6b6b6b6b6b6b` in any record that carries it.
const POISON_BYTE: u8 = 0x6b;

/// How a cache is allocated and freed: one page of words.
const CACHE_LAYOUT: Layout = Layout::new::<[u64; CACHE_SIZE / size_of::<u64>()]>();

// An `unsigned long` entry is a `u64` (CONFIG_UNWIND_USER_RUST is 64-bit
// only), and the cache is exactly the page upstream allocates.
const _: () = assert!(size_of::<usize>() == size_of::<u64>() && CACHE_SIZE == 4096);

/// The current task's cache, for as long as `'a`.
///
/// # Invariants
///
/// `ptr` is the cache of the task that is current for `'a`, allocated by
/// [`CurrentCache::get`] and freed only when the task is.
pub(crate) struct CurrentCache<'a> {
    ptr: NonNull<bindings::unwind_cache>,
    _task: PhantomData<&'a CurrentTask>,
}

impl<'a> CurrentCache<'a> {
    /// The current task's cache, allocated on first use.
    ///
    /// May sleep (allocation).
    fn get(current: CurrentInfo<'a>) -> Result<Self> {
        let mut p = current.info().cache_ptr();
        if p.is_null() {
            // Zeroed bytes are a valid empty cache: all fields are integers.
            let page = Kmalloc::alloc(CACHE_LAYOUT, GFP_KERNEL | __GFP_ZERO, NumaNode::NO_NODE)?;
            p = page.as_ptr().cast();
            if cfg!(CONFIG_UNWIND_USER_RUST_POISON) {
                // SAFETY: `p` is a fresh allocation of `CACHE_LAYOUT`, whose
                // flexible array holds `MAX_ENTRIES` words after the header;
                // nothing else refers to it yet.
                unsafe {
                    core::ptr::write_bytes(
                        (&raw mut (*p).entries).cast::<u64>(),
                        POISON_BYTE,
                        MAX_ENTRIES,
                    )
                };
            }
            current.set_cache_ptr(p);
        }
        // INVARIANT: `p` is current's cache, non-null.
        Ok(CurrentCache {
            ptr: NonNull::new(p).ok_or(ENOMEM)?,
            _task: PhantomData,
        })
    }

    /// Entries of this entry's trace; 0 if not walked yet.
    fn nr(&self) -> u32 {
        // SAFETY: By the type invariant the cache is valid; only the task
        // itself (this code, and `unwind_reset_info()` on its way to user
        // space) writes `nr_entries`.
        unsafe { (*self.ptr.as_ptr()).nr_entries }
    }

    fn set_nr(&mut self, nr: u32) {
        // SAFETY: As in `nr()`.
        unsafe { (*self.ptr.as_ptr()).nr_entries = nr }
    }

    /// All entry slots.
    fn entries(&mut self) -> &mut [u64] {
        // SAFETY: By the type invariant the cache is one page, whose
        // flexible array holds `MAX_ENTRIES` words after the header (the
        // pointer is derived from the whole allocation, not from a
        // reference to the zero-sized field).  Only the task itself, in
        // task context, reads or writes the entries, and no other slice of
        // them is alive while this one is: `user_faultable()` only makes
        // one to fill the cache, and hands out a raw pointer.
        unsafe {
            core::slice::from_raw_parts_mut(
                (&raw mut (*self.ptr.as_ptr()).entries).cast::<u64>(),
                MAX_ENTRIES,
            )
        }
    }
}

/// `unwind_user_faultable()`: the current task's user trace for this entry,
/// walked at most once per entry, and the cache it lives in.
///
/// Errors: `EINVAL` if current has no mm, `ENOMEM` if the cache cannot be
/// allocated.  May fault user pages in and sleep.
pub(crate) fn user_faultable<'a>(
    task: &'a CurrentTask,
) -> Result<(bindings::unwind_stacktrace, CurrentCache<'a>)> {
    // Only ever called where it may fault (upstream's annotation too).
    kernel::task::might_fault();
    if !task::has_mm(task) {
        return Err(EINVAL);
    }
    let current = CurrentInfo::new(task);
    let mut cache = CurrentCache::get(current)?;
    if cache.nr() == 0 {
        let (n, _) = walk::unwind_current_faultable(task, cache.entries());
        cache.set_nr(n as u32);
        // Have the return to user space reset the cache.
        mask::mark_used(&current.info().mask());
    }
    let nr = cache.nr();
    let entries = cache.entries().as_mut_ptr().cast();
    Ok((bindings::unwind_stacktrace { nr, entries }, cache))
}

/// The current task's `unwind_completed` bitmap, if it has a cache.
pub(crate) fn completed(current: CurrentInfo<'_>) -> Option<Completed<'_>> {
    Completed::of(current.info())
}

/// A cache's `unwind_completed` bitmap, changed with atomic bit operations
/// because cancel clears bits in it from other CPUs.
///
/// # Invariants
///
/// `0` points to the `unwind_completed` word of a cache that is alive for
/// `'a`.
#[derive(Clone, Copy)]
pub(crate) struct Completed<'a>(*mut usize, PhantomData<&'a ()>);

impl<'a> Completed<'a> {
    /// The bitmap of `info`'s cache, if it has one.
    pub(crate) fn of(info: Info<'a>) -> Option<Self> {
        let p = info.cache_ptr();
        // INVARIANT: A non-null cache lives until the task is freed, and
        // the task is alive for `'a` (type invariant of `Info`).
        // SAFETY: `p` is a valid cache; only the field address is taken.
        (!p.is_null()).then(|| Completed(unsafe { &raw mut (*p).unwind_completed }, PhantomData))
    }

    /// The bitmap's value.
    pub(crate) fn get(self) -> usize {
        // SAFETY: By the type invariant the word is valid and aligned; all
        // concurrent writers use atomic operations.
        unsafe { Atomic::from_ptr(self.0) }.load(Relaxed)
    }

    /// The word as the kernel crate's [`Bitmap`], for its atomic bit
    /// operations.
    fn bitmap(self) -> &'a Bitmap {
        // SAFETY: By the type invariant the word is a valid, initialised
        // `unsigned long` (`usize::BITS` bits, far below `i32::MAX`) that
        // outlives `'a`; Rust changes it only with atomic operations (the
        // C inline `unwind_reset_info()` zeroes it on the task's own return
        // to user space, as upstream does).
        unsafe { Bitmap::from_raw(self.0, usize::BITS as usize) }
    }

    /// Set bit `nr`; nothing if it is not a bit of the word.
    pub(crate) fn set(self, nr: u32) {
        if nr < usize::BITS {
            self.bitmap().set_bit_atomic(nr as usize);
        }
    }

    /// Clear bit `nr`; nothing if it is not a bit of the word.
    pub(crate) fn clear(self, nr: u32) {
        if nr < usize::BITS {
            self.bitmap().clear_bit_atomic(nr as usize);
        }
    }
}

/// Free a task's cache.
///
/// # Safety
///
/// The task is being freed: nothing uses its state any more.
pub(crate) unsafe fn free(info: Info<'_>) {
    let p = info.cache_ptr();
    if !p.is_null() {
        // SAFETY: `p` came from `Kmalloc::alloc(CACHE_LAYOUT)` in
        // `CurrentCache::get()`, and nothing else refers to it (caller's
        // duty).
        unsafe { Kmalloc::free(NonNull::new_unchecked(p.cast()), CACHE_LAYOUT) };
        // SAFETY: Exclusive access (caller's duty).
        unsafe { info.clear_cache_ptr() };
    }
}
