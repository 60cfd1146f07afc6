// SPDX-License-Identifier: GPL-2.0

//! The C API: the functions of `include/linux/unwind_user.h` and
//! `include/linux/unwind_deferred.h`, implemented over the safe code of
//! the other modules.  Each states what its C caller must guarantee; the
//! contracts are upstream's.  The signatures are checked against the C
//! prototypes (through `bindings`) at compile time, at the end of the file.

use crate::deferred::{self, Work};
use crate::{cache, walk};
use core::ffi::{c_int, c_uint};
use kernel::{bindings, prelude::*};

/// `unwind_user()`: fill `trace` with the current task's user stack, at
/// most `max_entries` entries.  Returns 0 (an empty trace for a kernel
/// thread or a task not from user mode), or `-EINVAL` if `max_entries` is 0.
///
/// # Safety
///
/// `trace` must be valid, and `trace->entries` valid for writing
/// `max_entries` words.  May fault user pages in unless page faults are
/// disabled.
#[no_mangle]
pub unsafe extern "C" fn unwind_user(
    trace: *mut bindings::unwind_stacktrace,
    max_entries: c_uint,
) -> c_int {
    // SAFETY: `trace` is valid (caller's duty).
    let trace = unsafe { &mut *trace };
    trace.nr = 0;
    if max_entries == 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: `entries` holds `max_entries` words (caller's duty);
    // `unsigned long` is `u64` on 64-bit, the only kind this builds for.
    let out = unsafe {
        core::slice::from_raw_parts_mut(trace.entries.cast::<u64>(), max_entries as usize)
    };
    let (n, _) = walk::unwind_current(out);
    trace.nr = n as c_uint;
    0
}

/// `unwind_user_faultable()`: the current task's user stack for this kernel
/// entry, walked once per entry into the task's cache.  Returns 0, or
/// `-EINVAL` (no mm) or `-ENOMEM` (no cache); `trace` then points into the
/// cache until the task returns to user space.
///
/// # Safety
///
/// `trace` must be valid.  Must be called by the task itself, in a context
/// that may fault and sleep.
#[no_mangle]
pub unsafe extern "C" fn unwind_user_faultable(trace: *mut bindings::unwind_stacktrace) -> c_int {
    match cache::user_faultable(current!()) {
        Ok((t, _cache)) => {
            // SAFETY: `trace` is valid (caller's duty).  `t.entries` points
            // into the task's cache, which lives until the task is freed
            // and holds this trace until the task returns to user space.
            unsafe { trace.write(t) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `unwind_deferred_init()`: register `work` with callback `func`.  Returns
/// 0, or `-EBUSY` when all callback bits are taken or `work` is registered
/// already.
///
/// # Safety
///
/// `work` must be valid, not registered, and stay valid until
/// [`unwind_deferred_cancel`] has returned for it.  Process context.
#[no_mangle]
pub unsafe extern "C" fn unwind_deferred_init(
    work: *mut bindings::unwind_work,
    func: bindings::unwind_callback_t,
) -> c_int {
    // SAFETY: `work` is valid until it is cancelled (caller's duty), which
    // is also what `init` requires.
    match unsafe { deferred::init(Work::from_raw(work), func) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `unwind_deferred_request()`: ask for the current task's user stack
/// before it returns to user space.  Returns 0 if the callback was queued,
/// 1 if it was already requested or already ran in this kernel entry, and
/// `-EINVAL` for a kernel thread, an exiting task, a task not from user
/// mode, or a cancelled work.  On success `*cookie` is the entry's cookie,
/// else 0.
///
/// # Safety
///
/// `work` must be a valid `unwind_work` (registered, or cancelled) and
/// `cookie` valid for writes.  Any context, NMI included.
#[no_mangle]
pub unsafe extern "C" fn unwind_deferred_request(
    work: *mut bindings::unwind_work,
    cookie: *mut u64,
) -> c_int {
    // SAFETY: `work` is valid for the call (caller's duty).
    let r = deferred::request(current!(), unsafe { Work::from_raw(work) });
    let (c, ret) = match r {
        Ok(r) => (r.cookie, c_int::from(r.already)),
        Err(e) => (0, e.to_errno()),
    };
    // SAFETY: `cookie` is valid (caller's duty).
    unsafe { cookie.write(c) };
    ret
}

/// `unwind_deferred_cancel()`: unregister `work`.  Waits for running
/// callbacks; afterwards `work`'s callback is never called again and its
/// bit is cleared in every task.  Cancelling twice, or a null `work`, is
/// harmless.
///
/// # Safety
///
/// `work` must be null or valid.  Process context (sleeps).
#[no_mangle]
pub unsafe extern "C" fn unwind_deferred_cancel(work: *mut bindings::unwind_work) {
    if !work.is_null() {
        // SAFETY: `work` is valid for the call (caller's duty).
        deferred::cancel(unsafe { Work::from_raw(work) })
    }
}

/// `unwind_deferred_task_exit()`: run a pending request of the exiting
/// current task.
///
/// # Safety
///
/// `task` must be current, exiting, and still have its mm.
#[no_mangle]
pub unsafe extern "C" fn unwind_deferred_task_exit(task: *mut bindings::task_struct) {
    let current = current!();
    if kernel::warn_on_once!(current.as_ptr() != task) {
        return;
    }
    deferred::task_exit(current)
}

/// `unwind_task_init()`: initialise a new task's unwind state.
///
/// # Safety
///
/// `task` must be valid and not yet visible to anyone else.
#[no_mangle]
pub unsafe extern "C" fn unwind_task_init(task: *mut bindings::task_struct) {
    // SAFETY: Guaranteed by the caller.
    unsafe { deferred::task_init(task) }
}

/// `unwind_task_free()`: free a task's unwind state.
///
/// # Safety
///
/// `task` must be valid and no longer used by anyone else.
#[no_mangle]
pub unsafe extern "C" fn unwind_task_free(task: *mut bindings::task_struct) {
    // SAFETY: Guaranteed by the caller.
    unsafe { deferred::task_free(task) }
}

/// Create debugfs `unwind_user/stats`; called once, by a late initcall
/// in `shim.c`.  Returns 0 or a negative errno.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[no_mangle]
pub extern "C" fn unwind_user_tables_debugfs_init() -> c_int {
    match crate::tables::debugfs_init() {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Make the registry of rows compiled from files ready; called once, by
/// the initcall in `shim.c` that registers the shrinker, before it does.
///
/// # Safety
///
/// Called once.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[no_mangle]
pub unsafe extern "C" fn unwind_user_tables_files_init() {
    // SAFETY: Called once (caller's duty).
    unsafe { crate::tables::files_init() }
}

/// Drop rows compiled from files for the shrinker (`shim.c`), never
/// waiting for a lock; the bytes freed.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[no_mangle]
pub extern "C" fn unwind_user_tables_shrink_files(goal: usize) -> usize {
    crate::tables::shrink_files(goal)
}

/// Free `mm`'s compiled unwind rows; called by `__mmput()`.
///
/// # Safety
///
/// `mm` must be valid, and no task may use it any more.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[no_mangle]
pub unsafe extern "C" fn unwind_user_mm_exit(mm: *mut bindings::mm_struct) {
    // SAFETY: The caller's duties are `mm_exit`'s.
    unsafe { crate::tables::mm_exit(mm) }
}

/// Pages' worth of compiled rows in every mm's cache: the count of
/// `shim.c`'s shrinker.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[no_mangle]
pub extern "C" fn unwind_user_tables_pages() -> usize {
    crate::tables::pages()
}

/// Drop the rows of the cache linked at `link` unless a walk holds it;
/// the bytes freed. `shim.c`'s shrinker calls it for each cache.
///
/// # Safety
///
/// `link` must be a cache's link on the shrinker's list, under the list's
/// lock.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[no_mangle]
pub unsafe extern "C" fn unwind_user_tables_shrink(link: *mut bindings::list_head) -> usize {
    // SAFETY: The caller's duties are `shrink`'s.
    unsafe { crate::tables::shrink(link) }
}

// Each function has the type of its C prototype.
const _: () = {
    type User = unsafe extern "C" fn(*mut bindings::unwind_stacktrace, c_uint) -> c_int;
    let _: [User; 2] = [unwind_user, bindings::unwind_user];
    type Faultable = unsafe extern "C" fn(*mut bindings::unwind_stacktrace) -> c_int;
    let _: [Faultable; 2] = [unwind_user_faultable, bindings::unwind_user_faultable];
    type Init =
        unsafe extern "C" fn(*mut bindings::unwind_work, bindings::unwind_callback_t) -> c_int;
    let _: [Init; 2] = [unwind_deferred_init, bindings::unwind_deferred_init];
    type Req = unsafe extern "C" fn(*mut bindings::unwind_work, *mut u64) -> c_int;
    let _: [Req; 2] = [unwind_deferred_request, bindings::unwind_deferred_request];
    type Work = unsafe extern "C" fn(*mut bindings::unwind_work);
    let _: [Work; 2] = [unwind_deferred_cancel, bindings::unwind_deferred_cancel];
    type TaskFn = unsafe extern "C" fn(*mut bindings::task_struct);
    let _: [TaskFn; 4] = [
        unwind_deferred_task_exit,
        bindings::unwind_deferred_task_exit,
        unwind_task_init,
        bindings::unwind_task_init,
    ];
    let _: [TaskFn; 2] = [unwind_task_free, bindings::unwind_task_free];
    #[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
    {
        let _: extern "C" fn() -> c_int = unwind_user_tables_debugfs_init;
        let _: unsafe extern "C" fn() -> c_int = bindings::unwind_user_tables_debugfs_init;
        type MmExit = unsafe extern "C" fn(*mut bindings::mm_struct);
        let _: [MmExit; 2] = [unwind_user_mm_exit, bindings::unwind_user_mm_exit];
        // `unsigned long` is `usize` in the kernel's bindings.
        let _: extern "C" fn() -> usize = unwind_user_tables_pages;
        let _: unsafe extern "C" fn() -> usize = bindings::unwind_user_tables_pages;
        let _: [unsafe extern "C" fn(); 2] = [
            unwind_user_tables_files_init,
            bindings::unwind_user_tables_files_init,
        ];
        let _: extern "C" fn(usize) -> usize = unwind_user_tables_shrink_files;
        let _: [unsafe extern "C" fn(usize) -> usize; 2] = [
            unwind_user_tables_shrink_files,
            bindings::unwind_user_tables_shrink_files,
        ];
        type Shrink = unsafe extern "C" fn(*mut bindings::list_head) -> usize;
        let _: [Shrink; 2] = [
            unwind_user_tables_shrink,
            bindings::unwind_user_tables_shrink,
        ];
    }
};
