// SPDX-License-Identifier: GPL-2.0

//! Access to the current task's `struct unwind_task_info`.

use crate::logic::mask::MaskWord;
use kernel::{bindings, task::Task};

/// `PF_KTHREAD | PF_EXITING`.
const NO_USER_WORK: u32 = bindings::PF_KTHREAD | bindings::PF_EXITING;

/// The unwind state of one task: `&task->unwind_info`.
///
/// # Invariants
///
/// `0` points to the `unwind_info` of a task that outlives this value.
#[derive(Clone, Copy)]
pub(crate) struct Info(*mut bindings::unwind_task_info);

impl Info {
    /// The current task's state.
    #[inline]
    pub(crate) fn current() -> Self {
        let t = Task::current_raw();
        // INVARIANT: `current` outlives anything its own code creates.
        // SAFETY: `t` is the valid current task; only the field address is
        // taken.
        Info(unsafe { &raw mut (*t).unwind_info })
    }

    /// The state of `task`.
    ///
    /// # Safety
    ///
    /// `task` must be valid for the lifetime of the returned value.
    #[inline]
    pub(crate) unsafe fn of(task: *mut bindings::task_struct) -> Self {
        // INVARIANT: Guaranteed by the caller.
        // SAFETY: `task` is valid; only the field address is taken.
        Info(unsafe { &raw mut (*task).unwind_info })
    }

    /// The state at `p`.
    ///
    /// # Safety
    ///
    /// `p` must be valid for the lifetime of the returned value.
    #[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
    #[inline]
    pub(crate) unsafe fn from_raw(p: *mut bindings::unwind_task_info) -> Self {
        // INVARIANT: Guaranteed by the caller.
        Info(p)
    }

    /// Raw pointer, for the C API.
    #[inline]
    pub(crate) fn as_ptr(self) -> *mut bindings::unwind_task_info {
        self.0
    }

    /// The request bitmask, `unwind_mask`.
    #[inline]
    pub(crate) fn mask(self) -> Mask {
        // INVARIANT: The field lives as long as the task.
        // SAFETY: By the type invariant `self.0` is valid.
        Mask(unsafe { &raw mut (*self.0).unwind_mask })
    }

    /// The task's unwind cache, or null.
    #[inline]
    pub(crate) fn cache_ptr(self) -> *mut bindings::unwind_cache {
        // SAFETY: By the type invariant `self.0` is valid.  Only the task
        // itself (and `unwind_task_init/free`, when nothing else can run)
        // writes the pointer.
        unsafe { (*self.0).cache }
    }

    /// Set the task's unwind cache pointer.
    ///
    /// # Safety
    ///
    /// Called by the task itself on its own state, or when no other code can
    /// look at the task.
    #[inline]
    pub(crate) unsafe fn set_cache_ptr(self, cache: *mut bindings::unwind_cache) {
        // SAFETY: By the type invariant `self.0` is valid; exclusive access
        // is guaranteed by the caller.
        unsafe { (*self.0).cache = cache }
    }

    /// The task's `callback_head` for the deferred task_work.
    #[inline]
    pub(crate) fn work(self) -> *mut bindings::callback_head {
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

/// Whether current may not get deferred work: a kernel thread, or a task
/// that is exiting (its task_work may never run again).
#[inline]
pub(crate) fn current_refuses_work() -> bool {
    // SAFETY: `current` is valid; `flags` of current is only changed by
    // current itself.
    unsafe { (*Task::current_raw()).flags & NO_USER_WORK != 0 }
}

/// Whether current has an mm (user memory to read).
#[inline]
pub(crate) fn current_has_mm() -> bool {
    // SAFETY: `current->mm` is only changed by current itself.
    unsafe { !(*Task::current_raw()).mm.is_null() }
}

/// A task's `atomic_long_t unwind_mask`, with the kernel's atomic ops.
///
/// # Invariants
///
/// `0` points to a valid `atomic_long_t` that outlives this value.
#[derive(Clone, Copy)]
pub(crate) struct Mask(*mut bindings::atomic_long_t);

impl MaskWord for Mask {
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
