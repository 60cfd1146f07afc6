// SPDX-License-Identifier: GPL-2.0

//! Deferred unwind requests: a callback asks, from any context including
//! NMI, for the current task's user stack; the task walks it once, in task
//! context just before it returns to user space, and hands the same trace
//! and cookie to every callback that asked during that kernel entry.
//!
//! - Registration gives each callback one bit of the per-task mask (see
//!   [`crate::logic::mask`]), at most `BITS_PER_LONG` minus the reserved
//!   bits.  The bit is also the callback's index in [`WORKS`], so the
//!   task_work finds the callbacks to call from the bits alone, without a
//!   list walk.
//! - A request sets its bit and, if it is the first of the entry, queues
//!   the task's `callback_head` (`TWA_NMI_CURRENT` from NMI, else
//!   `TWA_RESUME`).
//! - The task_work clears PENDING, takes the trace from the cache
//!   ([`crate::cache`]) and calls each requested callback that did not get
//!   this entry's trace yet, inside an SRCU read section, so callbacks may
//!   sleep and cancel can wait for them.
//! - Cancel unpublishes the callback, waits for SRCU readers and clears its
//!   bit in every thread and cache.
//! - A task that exits with a request pending runs it from
//!   `unwind_deferred_task_exit()`, while it still has its mm.
//!
//! Deliberate differences from `kernel/unwind/deferred.c`:
//! - a request already pending or done returns exactly 1 (upstream returns
//!   the work's bit value, documented as 1, which truncates to 0 for bits
//!   above 31);
//! - a request by a cancelled or never-registered work returns `-EINVAL`
//!   without a WARN (a request racing with cancel is legitimate);
//! - callbacks run in bit order, not newest-registered first.

use crate::cache::{self, Completed, Trace};
use crate::cookie;
use crate::logic::mask::{self, Request, RESERVED};
use crate::task::{self, Info};
use kernel::{
    bindings,
    interrupt::local_interrupt_disable,
    preempt::in_nmi,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        srcu::Srcu,
    },
    task::Task,
    task_work::{self, NotifyMode},
};

const NR_BITS: usize = usize::BITS as usize;

/// The registered callbacks, indexed by bit; null where none.  Written
/// under [`CallbackLock`], read by the task_work under [`srcu()`].
static WORKS: [Atomic<*mut bindings::unwind_work>; NR_BITS] =
    [const { Atomic::new(core::ptr::null_mut()) }; NR_BITS];

/// The bits given out (and the reserved bits).  Under [`CallbackLock`].
static REGISTERED: Atomic<usize> = Atomic::new(RESERVED);

/// `unwind_srcu` from shim.c.
fn srcu() -> &'static Srcu {
    // SAFETY: `unwind_srcu` is a `DEFINE_STATIC_SRCU()`, initialised at
    // build time and never cleaned up; `Srcu` is a transparent wrapper of
    // `srcu_struct`.
    unsafe { &*(&raw const bindings::unwind_srcu).cast::<Srcu>() }
}

/// Holds `unwind_callback_mutex` from shim.c.
struct CallbackLock;

impl CallbackLock {
    fn lock() -> Self {
        // SAFETY: `unwind_callback_mutex` is a static `DEFINE_MUTEX()`,
        // valid forever.  Only `init()` and `cancel()` take it, which the C
        // API restricts to process context, so sleeping here is allowed;
        // the guard unlocks it in `drop` in this same task.
        unsafe { bindings::mutex_lock(&raw mut bindings::unwind_callback_mutex) };
        CallbackLock
    }
}

impl Drop for CallbackLock {
    fn drop(&mut self) {
        // SAFETY: Locked by `lock()` in this task.
        unsafe { bindings::mutex_unlock(&raw mut bindings::unwind_callback_mutex) };
    }
}

/// The bit of `work`, or `None` if it has none (cancelled: -1, or never
/// registered: a reserved bit).
fn bit_of(work: *mut bindings::unwind_work) -> Option<u32> {
    // SAFETY: `work` is a valid `unwind_work` (caller's duty in the C API);
    // `bit` is an aligned `int`, written with atomics by init and cancel.
    let bit = unsafe { Atomic::from_ptr(&raw mut (*work).bit) }.load(Relaxed);
    let bit = u32::try_from(bit)
        .ok()
        .filter(|&b| (b as usize) < NR_BITS)?;
    (1usize << bit & RESERVED == 0).then_some(bit)
}

/// `unwind_deferred_init()`.
pub(crate) fn init(work: *mut bindings::unwind_work, func: bindings::unwind_callback_t) -> Result {
    // SAFETY: `work` is valid for writes and not registered (caller's duty).
    unsafe {
        work.write(bindings::unwind_work::default());
        let list = &raw mut (*work).list;
        (*list).next = list;
        (*list).prev = list;
        (*work).func = func;
    }
    let _lock = CallbackLock::lock();
    let mut used = REGISTERED.load(Relaxed);
    let bit = mask::alloc_bit(&mut used).ok_or(EBUSY)?;
    REGISTERED.store(used, Relaxed);
    // SAFETY: As in `bit_of`.
    unsafe { Atomic::from_ptr(&raw mut (*work).bit) }.store(bit as i32, Relaxed);
    // Publish last: the task_work may call `func` as soon as it sees it.
    WORKS[bit as usize].store(work, Release);
    Ok(())
}

/// `unwind_deferred_request()`: 0 if queued, 1 if already requested in
/// this entry, or an error; `cookie` is set to the entry's cookie on
/// success.
pub(crate) fn request(work: *mut bindings::unwind_work, cookie_out: &mut u64) -> Result<i32> {
    *cookie_out = 0;
    // SAFETY: `unwind_user_from_user_mode()` has no preconditions: it only
    // reads current's saved entry registers, which every task has (a
    // kernel thread's are not user mode), and takes no lock (NMI-safe).
    if task::current_refuses_work() || !unsafe { bindings::unwind_user_from_user_mode() } {
        return Err(EINVAL);
    }
    let mode = if in_nmi() {
        if !cfg!(CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG) {
            return Err(EINVAL);
        }
        NotifyMode::NmiCurrent
    } else {
        NotifyMode::Resume
    };
    let bit = bit_of(work).ok_or(EINVAL)?;

    let irq = local_interrupt_disable();
    let info = Info::current();
    *cookie_out = cookie::get(info, &irq);
    match mask::request(&info.mask(), 1 << bit) {
        Request::AlreadyRequested => Ok(1),
        Request::Joined => Ok(0),
        Request::QueueTaskWork => {
            // SAFETY: `info.work()` was initialised by `task_init()`, is
            // not queued (PENDING was clear), and lives as long as the
            // task; the task is current, as NMI mode requires.
            match unsafe { task_work::add(Task::current_raw(), info.work(), mode) } {
                Ok(()) => Ok(0),
                Err(e) => {
                    // Cannot happen: current is not exiting.
                    kernel::warn_on!(true);
                    mask::queue_failed(&info.mask());
                    Err(e)
                }
            }
        }
    }
}

/// Run the requested callbacks of `task`, which is current.
fn process(task: *mut bindings::task_struct) {
    // SAFETY: `task` is current.
    let info = unsafe { Info::of(task) };
    let Some(mut bits) = mask::take_pending(&info.mask()) else {
        kernel::warn_on!(true);
        return;
    };
    // From here on every requested callback is called, with an empty trace
    // if the walk failed.
    let trace = cache::user_faultable().unwrap_or(Trace {
        entries: core::ptr::null_mut(),
        nr: 0,
    });
    // SAFETY: `task` is current, alive throughout.
    let completed = unsafe { Completed::of(info) };
    if let Some(c) = completed {
        bits &= !c.get();
    }
    let cookie = cookie::read(info);
    let mut st = bindings::unwind_stacktrace {
        nr: trace.nr,
        entries: trace.entries,
    };

    let _srcu = srcu().read_lock();
    while bits != 0 {
        let bit = bits.trailing_zeros();
        bits &= bits - 1;
        let work = WORKS[bit as usize].load(Acquire);
        if work.is_null() {
            continue;
        }
        // SAFETY: A published work stays valid until its cancel returns,
        // and cancel unpublishes it, then waits for this SRCU section.
        if let Some(func) = unsafe { (*work).func } {
            // SAFETY: `func` is the callback registered with `work`; `st`
            // is a valid trace for the duration of the call.
            unsafe { func(work, &mut st, cookie) };
        }
        if let Some(c) = completed {
            c.set(bit);
        }
    }
}

/// The task_work callback.
///
/// # Safety
///
/// Called only by `task_work_run()`, in the task that queued it.
unsafe extern "C" fn task_work_fn(_head: *mut bindings::callback_head) {
    process(Task::current_raw());
}

/// `unwind_deferred_task_exit()`: called by an exiting task, before it
/// loses its mm, to run a pending request.
pub(crate) fn task_exit(task: *mut bindings::task_struct) {
    let info = Info::current();
    if !mask::is_pending(&info.mask()) {
        return;
    }
    process(task);
    // SAFETY: `task` is current; its `callback_head` is valid.
    unsafe { task_work::cancel(task, info.work()) };
}

/// `unwind_deferred_cancel()`.
pub(crate) fn cancel(work: *mut bindings::unwind_work) {
    if work.is_null() {
        return;
    }
    let _lock = CallbackLock::lock();
    let Some(bit) = bit_of(work) else {
        return;
    };
    if WORKS[bit as usize].load(Relaxed) != work {
        return;
    }
    WORKS[bit as usize].store(core::ptr::null_mut(), Relaxed);
    // No more requests from this work.
    // SAFETY: As in `bit_of`.
    unsafe { Atomic::from_ptr(&raw mut (*work).bit) }.store(-1, Relaxed);
    // Wait for task_works that may have seen the work.
    srcu().synchronize();
    clear_bit_everywhere(bit);
    // Only now may the bit be given to a new callback.
    let mut used = REGISTERED.load(Relaxed);
    mask::free_bit(&mut used, bit);
    REGISTERED.store(used, Relaxed);
}

/// Clear `bit` from every thread's mask and cache.
fn clear_bit_everywhere(bit: u32) {
    /// # Safety
    ///
    /// `t` is a live thread and the caller holds the RCU read lock.
    unsafe extern "C" fn clear(t: *mut bindings::task_struct, data: *mut c_void) {
        let bit = data as usize as u32;
        // SAFETY: `unwind_user_visit_threads()` passes only threads from
        // `for_each_process_thread()` inside its RCU read section, so `t`
        // stays valid (its `task_struct` is RCU-freed) during this call.
        let info = unsafe { Info::of(t) };
        mask::cancel(&info.mask(), 1 << bit);
        // SAFETY: As above.
        if let Some(c) = unsafe { Completed::of(info) } {
            c.clear(bit);
        }
    }
    // SAFETY: `clear` does not sleep.
    unsafe { bindings::unwind_user_visit_threads(Some(clear), bit as usize as *mut c_void) };
}

/// `unwind_task_init()`: a new task's state.
///
/// # Safety
///
/// `task` is being created: nothing else uses it yet.
pub(crate) unsafe fn task_init(task: *mut bindings::task_struct) {
    // SAFETY: Exclusive access (caller's duty).
    unsafe {
        let info = Info::of(task);
        info.as_ptr().write(bindings::unwind_task_info::default());
        task_work::init(info.work(), Some(task_work_fn));
    }
}

/// `unwind_task_free()`: free a task's state.
///
/// # Safety
///
/// `task` is being freed: nothing else uses it any more.
pub(crate) unsafe fn task_free(task: *mut bindings::task_struct) {
    // SAFETY: Exclusive access (caller's duty).
    unsafe {
        let info = Info::of(task);
        cache::free(info);
        task_work::cancel(task, info.work());
    }
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kunit_tests(unwind_rust_deferred)]
mod tests {
    //! Registration, requests and cancel, from the KUnit kernel thread.
    //! (Requests from user tasks are covered by the selftests.)
    use super::*;
    use crate::logic::mask::{MaskWord, PENDING};

    static CALLS: Atomic<u32> = Atomic::new(0);
    static LAST_NR: Atomic<u32> = Atomic::new(u32::MAX);

    /// # Safety
    ///
    /// Called as an unwind callback: `trace` is valid during the call.
    unsafe extern "C" fn count_calls(
        _w: *mut bindings::unwind_work,
        trace: *mut bindings::unwind_stacktrace,
        _cookie: u64,
    ) {
        CALLS.fetch_add(1, Relaxed);
        // SAFETY: `trace` is valid during the callback.
        LAST_NR.store(unsafe { (*trace).nr }, Relaxed);
    }

    fn new_work() -> Result<KBox<bindings::unwind_work>> {
        Ok(KBox::new(bindings::unwind_work::default(), GFP_KERNEL)?)
    }

    fn registered() -> u32 {
        REGISTERED.load(Relaxed).count_ones()
    }

    #[test]
    fn request_from_kernel_thread_is_refused() -> Result {
        let mut w = new_work()?;
        init(&mut *w, Some(count_calls))?;
        let mut cookie = 1;
        assert_eq!(request(&mut *w, &mut cookie), Err(EINVAL));
        assert_eq!(cookie, 0);
        cancel(&mut *w);
        Ok(())
    }

    #[test]
    fn registration_limit_and_bit_reuse() -> Result {
        let before = REGISTERED.load(Relaxed);
        let mut works = KVec::new();
        loop {
            let mut w = new_work()?;
            match init(&mut *w, Some(count_calls)) {
                Ok(()) => works.push(w, GFP_KERNEL)?,
                Err(e) => {
                    assert_eq!(e, EBUSY);
                    break;
                }
            }
        }
        // BITS_PER_LONG minus the 2 reserved bits, minus those already
        // registered (perf has one).
        assert_eq!(works.len() as u32, usize::BITS - before.count_ones());
        assert_eq!(REGISTERED.load(Relaxed), usize::MAX);
        // A cancelled bit is given to the next registration.
        let bit = bit_of(&mut *works[5]).ok_or(EINVAL)?;
        cancel(&mut *works[5]);
        let mut w = new_work()?;
        init(&mut *w, Some(count_calls))?;
        assert_eq!(bit_of(&mut *w), Some(bit));
        cancel(&mut *w);
        for w in works.iter_mut() {
            cancel(&mut **w);
        }
        assert_eq!(REGISTERED.load(Relaxed), before);
        Ok(())
    }

    #[test]
    fn cancel_clears_the_bit_everywhere() -> Result {
        let mut w = new_work()?;
        init(&mut *w, Some(count_calls))?;
        let bit = bit_of(&mut *w).ok_or(EINVAL)?;
        let n = registered();
        let m = Info::current().mask();
        m.fetch_or(1 << bit);
        cancel(&mut *w);
        assert_eq!(m.load() & (1 << bit), 0);
        assert_eq!(bit_of(&mut *w), None);
        assert!(WORKS[bit as usize].load(Relaxed).is_null());
        assert_eq!(registered(), n - 1);
        // A cancelled work cannot request, and a second cancel is harmless.
        let mut cookie = 1;
        assert_eq!(request(&mut *w, &mut cookie), Err(EINVAL));
        cancel(&mut *w);
        assert_eq!(registered(), n - 1);
        Ok(())
    }

    #[test]
    fn request_states_on_a_task_mask() {
        // The bitmask rules on a real `atomic_long_t`, with the kernel's
        // atomics: queue, join, already requested, task_work, reset.
        let mut ti = bindings::unwind_task_info::default();
        // SAFETY: `ti` outlives `info`.
        let info = unsafe { Info::from_raw(&mut ti) };
        let m = info.mask();
        let (a, b) = (1usize << 2, 1usize << 40);
        assert_eq!(mask::request(&m, a), Request::QueueTaskWork);
        assert_eq!(mask::request(&m, a), Request::AlreadyRequested);
        assert_eq!(mask::request(&m, b), Request::Joined);
        assert!(!mask::reset(&m));
        assert_eq!(mask::take_pending(&m), Some(a | b));
        assert_eq!(mask::request(&m, b), Request::AlreadyRequested);
        assert!(mask::reset(&m));
        assert_eq!(m.load(), 0);
        assert_eq!(mask::request(&m, b), Request::QueueTaskWork);
    }

    #[test]
    fn pending_callback_runs_once_even_without_a_trace() -> Result {
        let mut w = new_work()?;
        init(&mut *w, Some(count_calls))?;
        let bit = bit_of(&mut *w).ok_or(EINVAL)?;
        let m = Info::current().mask();
        let saved = m.load();
        CALLS.store(0, Relaxed);
        // As if a request had been made: PENDING and the work's bit.
        m.fetch_or(PENDING | 1 << bit);
        process(Task::current_raw());
        // A kernel thread has no user stack: the callback gets an empty
        // trace, but it is called, exactly once.
        assert_eq!(CALLS.load(Relaxed), 1);
        assert_eq!(LAST_NR.load(Relaxed), 0);
        assert_eq!(m.load() & PENDING, 0);
        assert_ne!(m.load() & (1 << bit), 0);
        m.store(saved);
        cancel(&mut *w);
        Ok(())
    }
}
