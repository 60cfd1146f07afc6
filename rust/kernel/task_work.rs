// SPDX-License-Identifier: GPL-2.0

//! Work run by a task itself, before it returns to user space.
//!
//! C header: [`include/linux/task_work.h`](srctree/include/linux/task_work.h)
//!
//! A `callback_head` is queued on a task with [`add`]; the task runs it in
//! process context (it may sleep and take page faults) on its way back to
//! user space, in `get_signal()`, or on exit.  The `callback_head` belongs
//! to the caller: it must stay valid until the callback has started or
//! [`cancel`] has removed it, and may not be queued twice.

use crate::{bindings, error::to_result, prelude::*};

/// How the task is told that work is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum NotifyMode {
    /// Run on the next return to user space (`TWA_RESUME`).
    Resume = bindings::task_work_notify_mode_TWA_RESUME,
    /// Like [`NotifyMode::Resume`], queued from NMI context on the current
    /// task (`TWA_NMI_CURRENT`).
    NmiCurrent = bindings::task_work_notify_mode_TWA_NMI_CURRENT,
}

/// Initialise `work` to call `func`.
///
/// # Safety
///
/// `work` must be valid for writes and not queued.
#[inline]
pub unsafe fn init(work: *mut bindings::callback_head, func: bindings::task_work_func_t) {
    // SAFETY: Guaranteed by the caller.
    unsafe { bindings::init_task_work(work, func) }
}

/// Queue `work` on `task`.
///
/// Fails with `ESRCH` if the task is exiting and no longer runs work.
///
/// # Safety
///
/// `task` must be a valid task.  `work` must have been initialised with
/// [`init`], must not be queued already, and must stay valid until its
/// callback has started or [`cancel`] has returned `true` for it.  With
/// [`NotifyMode::NmiCurrent`], `task` must be the current task.
#[inline]
pub unsafe fn add(
    task: *mut bindings::task_struct,
    work: *mut bindings::callback_head,
    mode: NotifyMode,
) -> Result {
    // SAFETY: Guaranteed by the caller.
    to_result(unsafe {
        bindings::task_work_add(task, work, mode as bindings::task_work_notify_mode)
    })
}

/// Remove `work` from `task`'s queue if it is still queued.
///
/// Returns whether it was removed (then its callback will not run).
///
/// # Safety
///
/// `task` must be a valid task and `work` a valid `callback_head`.
#[inline]
pub unsafe fn cancel(task: *mut bindings::task_struct, work: *mut bindings::callback_head) -> bool {
    // SAFETY: Guaranteed by the caller.
    unsafe { bindings::task_work_cancel(task, work) }
}
