// SPDX-License-Identifier: GPL-2.0

//! Access to a task's `struct unwind_task_info`.
//!
//! Who touches what, and how:
//!
//! - `unwind_mask`: the task, interrupts and NMIs on its CPU (requests), and
//!   cancel on any CPU; every access is an atomic operation ([`Mask`]);
//! - `id` (the cookie): the task and interrupts and NMIs on its CPU, with
//!   atomics (see [`crate::cookie`]); zeroed by the return to user space;
//! - `cache`: the pointer is written by the task itself (first use) and by
//!   `unwind_task_free()`; in the cache, `nr_entries` and the entries are
//!   the task's alone, `unwind_completed` is also cleared by cancel on
//!   other CPUs, with atomic bit operations (see [`crate::cache`]);
//! - `work`: the task_work API.
//!
//! [`Info`] names the state of any task and gives only what is safe for
//! any CPU to do with it; [`CurrentInfo`] is the state of the current task,
//! borrowed for no longer than the code runs in that task.

use crate::logic::mask::MaskWord;
use core::marker::PhantomData;
use kernel::{
    bindings,
    sync::atomic::{Acquire, Atomic, Release},
    task::CurrentTask,
    task_work::TaskWork,
};

/// The unwind state of one task, `&task->unwind_info`, for `'a`.
///
/// # Invariants
///
/// `0` points to the `unwind_info` of a task that is alive for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct Info<'a>(*mut bindings::unwind_task_info, PhantomData<&'a ()>);

impl<'a> Info<'a> {
    /// The state of `task`.
    ///
    /// # Safety
    ///
    /// `task` must be valid for `'a`.
    #[inline]
    pub(crate) unsafe fn of(task: *mut bindings::task_struct) -> Self {
        // INVARIANT: Guaranteed by the caller.
        // SAFETY: `task` is valid; only the field address is taken.
        Info(unsafe { &raw mut (*task).unwind_info }, PhantomData)
    }

    /// The state at `p`, which need not be in a task (tests).
    ///
    /// # Safety
    ///
    /// `p` must be valid for the lifetime of the returned value.
    #[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
    #[inline]
    pub(crate) unsafe fn from_raw(p: *mut bindings::unwind_task_info) -> Self {
        // INVARIANT: Guaranteed by the caller.
        Info(p, PhantomData)
    }

    /// Raw pointer, for the C API.
    #[inline]
    pub(crate) fn as_ptr(self) -> *mut bindings::unwind_task_info {
        self.0
    }

    /// The request bitmask, `unwind_mask`.
    #[inline]
    pub(crate) fn mask(self) -> Mask<'a> {
        // INVARIANT: The field lives as long as the task, for `'a`.
        // SAFETY: By the type invariant `self.0` is valid.
        Mask(unsafe { &raw mut (*self.0).unwind_mask }, PhantomData)
    }

    /// The `cache` pointer, as an atomic: the task sets it (once, from null
    /// to a cache that then lives until the task is freed) while cancel
    /// reads it from other CPUs; `unwind_task_free()` clears it when no
    /// one else looks at the task.
    fn cache_cell(self) -> &'a Atomic<*mut bindings::unwind_cache> {
        // SAFETY: By the type invariant the field is valid for `'a`; it is
        // an aligned pointer, accessed only atomically from Rust (the C
        // inline `unwind_reset_info()` only reads it, on the task itself).
        unsafe { Atomic::from_ptr(&raw mut (*self.0).cache) }
    }

    /// The task's unwind cache, or null.
    #[inline]
    pub(crate) fn cache_ptr(self) -> *mut bindings::unwind_cache {
        self.cache_cell().load(Acquire)
    }

    /// Clear the cache pointer.
    ///
    /// # Safety
    ///
    /// The task is being freed: no one else looks at it.
    pub(crate) unsafe fn clear_cache_ptr(self) {
        self.cache_cell().store(core::ptr::null_mut(), Release)
    }

    /// The task's `callback_head` for the deferred task_work.
    #[inline]
    pub(crate) fn work_ptr(self) -> *mut bindings::callback_head {
        // SAFETY: By the type invariant `self.0` is valid.
        unsafe { &raw mut (*self.0).work }
    }

    /// The cookie fields (`id.cpu`, `id.cnt`).
    #[inline]
    pub(crate) fn id(self) -> *mut bindings::unwind_task_id {
        // SAFETY: By the type invariant `self.0` is valid.
        unsafe { &raw mut (*self.0).id }
    }
}

/// The current task's unwind state, for as long as `'a`: the lifetime of
/// a borrow of the [`CurrentTask`], so it cannot leave the task's context.
#[derive(Clone, Copy)]
pub(crate) struct CurrentInfo<'a> {
    info: Info<'a>,
    _task: PhantomData<&'a CurrentTask>,
}

impl<'a> CurrentInfo<'a> {
    /// The state of `task`, the current task.
    #[inline]
    pub(crate) fn new(task: &'a CurrentTask) -> Self {
        // INVARIANT: A `&CurrentTask` is only valid in the task's context,
        // where the task is alive.
        // SAFETY: As above, `task` is valid for `'a`.
        let info = unsafe { Info::of(task.as_ptr()) };
        CurrentInfo {
            info,
            _task: PhantomData,
        }
    }

    /// What any CPU may use.
    #[inline]
    pub(crate) fn info(self) -> Info<'a> {
        self.info
    }

    /// The task's `callback_head` for the deferred task_work.
    #[inline]
    pub(crate) fn work(self) -> &'a TaskWork {
        // SAFETY: The field lives as long as the task, which is current for
        // `'a`; it is used only through the task_work API.
        unsafe { TaskWork::from_raw(self.info.work_ptr()) }
    }

    /// Set the task's cache pointer (from null, once).
    #[inline]
    pub(crate) fn set_cache_ptr(self, cache: *mut bindings::unwind_cache) {
        // Release: cancel on another CPU that sees the pointer sees the
        // zeroed cache behind it.
        self.info.cache_cell().store(cache, Release)
    }
}

/// `PF_KTHREAD | PF_EXITING`.
const NO_USER_WORK: u32 = bindings::PF_KTHREAD | bindings::PF_EXITING;

/// Whether `task` (current) may not get deferred work: a kernel thread, or
/// a task that is exiting (its task_work may never run again).
#[inline]
pub(crate) fn refuses_work(task: &CurrentTask) -> bool {
    // SAFETY: `task` is current and valid; only current changes its own
    // `flags` (besides atomic flag updates of unrelated bits by others,
    // which a plain read of the word tolerates as upstream's does).
    unsafe { (*task.as_ptr()).flags & NO_USER_WORK != 0 }
}

/// Whether `task` (current) has an mm (user memory to read).
#[inline]
pub(crate) fn has_mm(task: &CurrentTask) -> bool {
    // SAFETY: `task` is current; only current changes its own `mm`.
    unsafe { !(*task.as_ptr()).mm.is_null() }
}

/// A task's `atomic_long_t unwind_mask`, with the kernel's atomic ops.
///
/// Why not `kernel::sync::atomic::Atomic<i64>`, as the other fields use:
/// 7.3's `Atomic` has no `fetch_or()` or `fetch_andnot()` (nor public
/// `try_cmpxchg()`), which the request and take-pending rules need; the
/// `atomic64_*()` calls are the crate's own helpers (`rust/helpers/atomic.c`).
///
/// # Invariants
///
/// `0` points to a valid `atomic_long_t` for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct Mask<'a>(*mut bindings::atomic_long_t, PhantomData<&'a ()>);

impl MaskWord for Mask<'_> {
    #[inline]
    fn load(&self) -> usize {
        // SAFETY: By the type invariant the atomic is valid.
        unsafe { bindings::atomic64_read(self.0) as usize }
    }
    #[inline]
    fn store(&self, v: usize) {
        // SAFETY: As above.
        unsafe { bindings::atomic64_set(self.0, v as i64) }
    }
    #[inline]
    fn fetch_or(&self, bits: usize) -> usize {
        // SAFETY: As above.
        unsafe { bindings::atomic64_fetch_or(bits as i64, self.0) as usize }
    }
    #[inline]
    fn fetch_andnot(&self, bits: usize) -> usize {
        // SAFETY: As above.
        unsafe { bindings::atomic64_fetch_andnot(bits as i64, self.0) as usize }
    }
    #[inline]
    fn try_cmpxchg(&self, old: &mut usize, new: usize) -> bool {
        let mut o = *old as i64;
        // SAFETY: As above; `o` is a valid `s64`.
        let ok = unsafe { bindings::atomic64_try_cmpxchg(self.0, &mut o, new as i64) };
        *old = o as usize;
        ok
    }
}
