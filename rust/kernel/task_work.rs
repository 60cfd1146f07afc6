// SPDX-License-Identifier: GPL-2.0

//! Work run by a task itself, before it returns to user space.
//!
//! C header: [`include/linux/task_work.h`](srctree/include/linux/task_work.h)
//!
//! A [`TaskWork`] is a `struct callback_head` queued on a task; the task
//! runs its function in process context (it may sleep and take page
//! faults) on its way back to user space, in `get_signal()`, or on exit.
//! The `callback_head` belongs to its owner, usually embedded in a larger
//! C structure: it must stay valid until its function has started or
//! [`TaskWork::cancel`] has removed it, and may not be queued twice.
//!
//! Why not binder's raw calls: 7.3's kernel crate has no task_work
//! abstraction (`drivers/android/binder/deferred_close.rs` calls
//! `init_task_work()` and `task_work_add()` through `bindings`), so this is
//! not a copy of one.  What is safe here is what a caller can be given
//! safely: the notification mode is chosen by context (no caller can pass
//! `TWA_RESUME` in NMI), and cancel takes a [`Task`].  Queueing stays
//! `unsafe`: that the `callback_head` is not queued already and outlives
//! its run is a property of where the caller embeds it (here, in
//! `task_struct`), which this type cannot see.
//!
//! # Examples
//!
//! ```ignore
//! use kernel::task_work::TaskWork;
//!
//! unsafe extern "C" fn run(_head: *mut kernel::bindings::callback_head) {}
//!
//! // `head` points to a `callback_head` that lives as long as the task,
//! // as `task_struct::unwind_info.work` does.
//! // SAFETY: Valid, not queued, and outlives the returned reference.
//! let work = unsafe { TaskWork::from_raw(head) };
//! // SAFETY: Not queued.
//! unsafe { work.init(run) };
//! // SAFETY: Not queued; valid until `run` starts or `cancel()` removes it.
//! unsafe { work.queue_on_current() }?;
//! // Safe: any task, any time.
//! work.cancel(current!());
//! ```

use crate::{bindings, error::to_result, prelude::*, task::Task, types::Opaque};

/// The function a [`TaskWork`] runs; gets the work's `callback_head`.
pub type TaskWorkFn = unsafe extern "C" fn(*mut bindings::callback_head);

/// A `struct callback_head`, queued with `task_work_add()`.
///
/// # Invariants
///
/// Only [`TaskWork::init`], `task_work_add()`, `task_work_cancel()` and
/// `task_work_run()` write the wrapped `callback_head`.
#[repr(transparent)]
pub struct TaskWork(Opaque<bindings::callback_head>);

// SAFETY: The `callback_head` is only changed through the task_work API,
// which serialises its users (the task's work list is updated with atomics
// and `task_work_cancel()` takes the task's `pi_lock`).
unsafe impl Sync for TaskWork {}

impl TaskWork {
    /// The `TaskWork` at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to a `callback_head` that is valid for `'a` and only
    /// used through the task_work API for `'a`.
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::callback_head) -> &'a Self {
        // SAFETY: `TaskWork` is a transparent wrapper of `callback_head`;
        // the caller guarantees validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// The raw `callback_head`.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::callback_head {
        self.0.get()
    }

    /// Set the function to run.
    ///
    /// # Safety
    ///
    /// The work is not queued, and nothing else uses it meanwhile.
    #[inline]
    pub unsafe fn init(&self, func: TaskWorkFn) {
        // SAFETY: Valid `callback_head`, not queued (caller's duty).
        unsafe { bindings::init_task_work(self.as_raw(), Some(func)) }
    }

    /// Queue the work on the current task.
    ///
    /// Fails with `ESRCH` if the task is exiting and runs no more work.
    /// May be called from any context, NMI included: the task is told with
    /// `TWA_NMI_CURRENT` in NMI context (`TWA_RESUME` is not NMI-safe) and
    /// with `TWA_RESUME` elsewhere; either way the work runs on the task's
    /// next return to user space.
    ///
    /// # Safety
    ///
    /// The work was initialised with [`TaskWork::init`], is not queued,
    /// and stays valid until its function has started or
    /// [`TaskWork::cancel`] has removed it.
    #[inline]
    pub unsafe fn queue_on_current(&self) -> Result {
        let mode = if crate::preempt::in_nmi() {
            bindings::task_work_notify_mode_TWA_NMI_CURRENT
        } else {
            bindings::task_work_notify_mode_TWA_RESUME
        };
        // SAFETY: `current` is a valid task; the work is the caller's to
        // queue (see above); `TWA_NMI_CURRENT` is used on current only,
        // `TWA_RESUME` only outside NMI context.
        let ret = unsafe { bindings::task_work_add(Task::current_raw(), self.as_raw(), mode) };
        // Success inline (this is on request paths, in NMIs too), the
        // error out of line.
        if ret == 0 {
            Ok(())
        } else {
            to_result(ret)
        }
    }

    /// Remove the work from `task`'s queue if it is still queued.
    ///
    /// Returns whether it was removed (then its function will not run).
    /// Any task, any process or interrupt context (not NMI: it takes the
    /// task's `pi_lock`).
    #[inline]
    pub fn cancel(&self, task: &Task) -> bool {
        // SAFETY: A `&Task` is a valid task.
        unsafe { self.cancel_raw(task.as_ptr()) }
    }

    /// [`TaskWork::cancel`] for a task the caller has only as a pointer
    /// (a task being freed, which no `&Task` may name any more).
    ///
    /// # Safety
    ///
    /// `task` is a valid `task_struct` for the duration of the call.
    #[inline]
    pub unsafe fn cancel_raw(&self, task: *mut bindings::task_struct) -> bool {
        // SAFETY: `task` is valid (caller's duty); the work is valid by
        // the type invariant.
        unsafe { bindings::task_work_cancel(task, self.as_raw()) }
    }
}
