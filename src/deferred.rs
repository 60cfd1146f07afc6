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
//!   `TWA_RESUME`).  It runs in NMI, hardirq or task context and takes no
//!   lock: the mask is changed with atomics, the cookie is claimed with one
//!   compare-and-exchange, interrupts are disabled only where they are not
//!   already (never in NMI), and that interrupts-off region is the RCU
//!   read-side section cancel waits for.
//! - The task_work enters an SRCU read-side section, clears PENDING, takes
//!   the trace from the cache ([`crate::cache`]) and calls each requested
//!   callback that did not get this entry's trace yet.  Callbacks may
//!   sleep; cancel waits for them.
//! - Cancel unpublishes the callback, waits for requests in flight (RCU),
//!   clears the bit in every task's mask, waits for task_works that may
//!   have taken it (SRCU), then clears it in every cache; only then may
//!   the bit be reused.
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

use crate::cache::{self, Completed};
use crate::cookie;
use crate::logic::mask::{self, Request, RESERVED};
use crate::task::{self, CurrentInfo, Info};
use kernel::{
    bindings,
    interrupt::with_local_interrupt_disabled,
    preempt::in_nmi,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        rcu,
        srcu::Srcu,
        Mutex,
    },
    task::CurrentTask,
    task_work::TaskWork,
    types::Opaque,
};

const NR_BITS: usize = usize::BITS as usize;

/// A deferred-unwind callback: C's `struct unwind_work`.
///
/// # Invariants
///
/// `bit` is only ever accessed atomically.  `list` and `func` are written
/// only by [`init`] while the work is not in [`WORKS`], before it is
/// published there (release), and read only after it was found there
/// (acquire).
#[repr(transparent)]
pub(crate) struct Work(Opaque<bindings::unwind_work>);

// SAFETY: See the type invariants: shared fields are atomics or written
// before publication; registration is serialised by [`callback_lock()`].
unsafe impl Sync for Work {}

impl Work {
    /// A work to be registered with [`init`], for a `static`.
    pub(crate) const fn new() -> Self {
        Work(Opaque::zeroed())
    }

    /// The work at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to an `unwind_work` valid for `'a`, accessed by the C
    /// side only through this module's functions.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::unwind_work) -> &'a Self {
        // SAFETY: `Work` is a transparent wrapper; validity for `'a` is the
        // caller's duty.
        unsafe { &*ptr.cast() }
    }

    fn as_raw(&self) -> *mut bindings::unwind_work {
        self.0.get()
    }

    /// The work's `bit`: its callback bit, or -1 once cancelled.
    fn bit_cell(&self) -> &Atomic<i32> {
        // SAFETY: `bit` is an aligned `int` of this valid work, accessed
        // atomically (type invariant) for as long as `self` is borrowed.
        unsafe { Atomic::from_ptr(&raw mut (*self.as_raw()).bit) }
    }

    /// The work's bit, or `None` if it has none (cancelled: -1, or never
    /// registered: a reserved bit).  Acquire: pairs with [`init`]'s
    /// release, so whoever sees the bit finds the work in [`WORKS`].
    fn bit(&self) -> Option<u32> {
        let bit = u32::try_from(self.bit_cell().load(Acquire))
            .ok()
            .filter(|&b| (b as usize) < NR_BITS)?;
        (1usize << bit & RESERVED == 0).then_some(bit)
    }
}

/// The mask of callback bit `bit` (< `BITS_PER_LONG`, as [`Work::bit`]
/// gives it); no shift that could overflow, so no panic path.
#[inline]
fn bit_mask(bit: u32) -> usize {
    1usize.checked_shl(bit).unwrap_or(0)
}

/// The registered callbacks, indexed by bit; null where none.  Written
/// under [`callback_lock()`], read by the task_work under [`srcu()`].
static WORKS: [Atomic<*mut bindings::unwind_work>; NR_BITS] =
    [const { Atomic::new(core::ptr::null_mut()) }; NR_BITS];

/// The bits given out (and the reserved bits).  Under [`callback_lock()`].
static REGISTERED: Atomic<usize> = Atomic::new(RESERVED);

/// `unwind_srcu` from shim.c.
///
/// Why a C `DEFINE_SRCU()` and `Srcu::from_raw()`, not `Srcu::new()`:
/// `new()` initialises at run time into pinned memory, which a `static`
/// could only get from an initcall, and the state must be ready before
/// any task_work can run; `DEFINE_SRCU()` is initialised at build time.
fn srcu() -> &'static Srcu {
    // SAFETY: `unwind_srcu` is a `DEFINE_SRCU()`, initialised at build
    // time, never cleaned up, and used only through `Srcu`.
    unsafe { Srcu::from_raw(&raw mut bindings::unwind_srcu) }
}

/// `unwind_callback_mutex` from shim.c, which serialises registering and
/// cancelling callbacks.
///
/// Why a C `DEFINE_MUTEX()` and `Mutex::from_raw()` (7.3's `Lock::from_raw()`), not
/// `kernel::sync::global_lock!`: a global lock must be `init()`ed at run
/// time before its first use, and the first use is `perf_event_init()`
/// registering perf's callback from `start_kernel()`, before any initcall
/// of this built-in object could run; `DEFINE_MUTEX()` is initialised at
/// build time.  It guards no data of its own (the registry is atomics),
/// so `Mutex<()>` is all `global_lock!` would give anyway.
fn callback_lock() -> &'static Mutex<()> {
    // SAFETY: `unwind_callback_mutex` is a static `DEFINE_MUTEX()`, valid
    // and initialised forever.
    unsafe { Mutex::<()>::from_raw(&raw mut bindings::unwind_callback_mutex) }
}

/// `unwind_deferred_init()`: register `work` to call `func`.
///
/// Fails with `EBUSY` when every callback bit is taken, or when `work` is
/// registered already (it is left as it is).
///
/// # Safety
///
/// `work` stays valid until [`cancel`] has returned for it.
pub(crate) unsafe fn init(work: &Work, func: bindings::unwind_callback_t) -> Result {
    let _lock = callback_lock().lock();
    let raw = work.as_raw();
    // A registered work is in the table; re-initialising it would lose
    // its bit while tasks may still have it set.
    if WORKS.iter().any(|w| w.load(Relaxed) == raw) {
        return Err(EBUSY);
    }
    let mut used = REGISTERED.load(Relaxed);
    let bit = mask::alloc_bit(&mut used).ok_or(EBUSY)?;
    // No bit until published (a request of a cancelled work may be
    // reading it: the C API allows that).
    work.bit_cell().store(-1, Relaxed);
    // SAFETY: `work` is valid (caller's duty) and not in `WORKS`, so no
    // task_work reads `list` or `func`; `bit` is only written atomically.
    unsafe {
        bindings::INIT_LIST_HEAD(&raw mut (*raw).list);
        (&raw mut (*raw).func).write(func);
    }
    REGISTERED.store(used, Relaxed);
    // Publish the work, then its bit: the task_work may call `func` as soon
    // as it finds the work, and a request that sees the bit finds it.
    WORKS[bit as usize].store(raw, Release);
    work.bit_cell().store(bit as i32, Release);
    Ok(())
}

/// A successful request.
pub(crate) struct Requested {
    /// The kernel entry's cookie.
    pub(crate) cookie: u64,
    /// Already requested in this entry (pending, or called): the C API's 1.
    pub(crate) already: bool,
}

/// `unwind_deferred_request()` for the current task `task`: its user stack
/// will be handed to `work`'s callback before it returns to user space.
///
/// Any context: NMI, hardirq, softirq or task.  Fails with `EINVAL` for a
/// kernel thread, an exiting task, a task not entered from user mode, or a
/// cancelled work.
// Inlined into the C entry point, which is then a leaf function on the
// common path.
#[inline(always)]
pub(crate) fn request(task: &CurrentTask, work: &Work) -> Result<Requested> {
    // SAFETY: `unwind_user_from_user_mode()` has no preconditions: it only
    // reads current's saved entry registers, which every task has (a
    // kernel thread's are not user mode), and takes no lock (NMI-safe).
    if task::refuses_work(task) || !unsafe { bindings::unwind_user_from_user_mode() } {
        return Err(EINVAL);
    }
    // The cookie claim is a cmpxchg, which NMI context needs to be safe.
    if !cfg!(CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG) && kernel::warn_on_once!(in_nmi()) {
        return Err(EINVAL);
    }
    let current = CurrentInfo::new(task);

    // Interrupts are off from here to the end (they are in NMI and
    // hardirq context already), and a region with interrupts disabled is
    // an RCU read-side critical section: `synchronize_rcu()` waits for it
    // (RCU flavours are consolidated).  The work's bit is read and set in
    // it, so once `cancel()` has stored -1 and waited for a grace period,
    // no request can set the bit any more, and a new work given the bit is
    // never called for a request of the old one.  (An explicit
    // `rcu_read_lock()` would say the same with two more calls.)
    with_local_interrupt_disabled(|irq_off| {
        let bit = bit_mask(work.bit().ok_or(EINVAL)?);
        let cookie = cookie::get(current, irq_off);
        // The common case, a repeat in the same entry, stays short; the
        // first request of the entry queues the task_work, out of line.
        let already =
            mask::is_requested(&current.info().mask(), bit) || first_request(current, bit)?;
        Ok(Requested { cookie, already })
    })
}

/// The rest of [`request`] for a callback not yet requested in this entry
/// (interrupts disabled): set its bit and queue the task_work if no one
/// has.  Whether it was already requested after all (by an NMI in
/// between).
#[inline(never)]
fn first_request(current: CurrentInfo<'_>, bit: usize) -> Result<bool> {
    match mask::request(&current.info().mask(), bit) {
        Request::AlreadyRequested => Ok(true),
        Request::Joined => Ok(false),
        Request::QueueTaskWork => {
            // SAFETY: The task's `callback_head` was initialised by
            // `task_init()` and lives as long as the task.  It is not
            // queued: PENDING was clear, and it is set only here, just
            // before queueing, and cleared by the task_work after
            // `task_work_run()` took it off the list (the exit path cancels
            // it while PF_EXITING, which refuses requests, is set).
            if let Err(e) = unsafe { current.work().queue_on_current() } {
                // Cannot happen: current is not exiting.
                kernel::warn_on_once!(true);
                mask::queue_failed(&current.info().mask());
                return Err(e);
            }
            Ok(false)
        }
    }
}

/// Run the requested callbacks of the current task `task`.
///
/// # Safety
///
/// Called from the task's task_work (its `callback_head` is off the task
/// work list), or by the exiting task (`PF_EXITING` set: no request can
/// queue the `callback_head` again while it is still on the list).
unsafe fn process(task: &CurrentTask) {
    let current = CurrentInfo::new(task);
    if kernel::warn_on_once!(!mask::is_pending(&current.info().mask())) {
        return;
    }
    // The walk first, outside the SRCU section: it may fault pages in and
    // block for as long as user space makes it (FUSE, userfaultfd), and
    // cancel must not wait for that.  From here on every requested
    // callback is called, with an empty trace if the walk failed.
    let (st, _cache) = match cache::user_faultable(task) {
        Ok((st, cache)) => (st, Some(cache)),
        Err(_) => (
            bindings::unwind_stacktrace {
                nr: 0,
                entries: core::ptr::null_mut(),
            },
            None,
        ),
    };
    // SAFETY: `st` is the trace of the walk just done (its entries are in
    // the cache, alive until the task is freed); the caller's promise is
    // this function's.
    unsafe { call_works(current, st) };
}

/// [`process`]'s second half: call each requested work with the trace
/// `st`.  Out of line: its frame (the SRCU section, the bits) is not
/// under the walk's.
///
/// # Safety
///
/// As [`process`]; `st` is a valid trace for as long as this runs.
#[inline(never)]
unsafe fn call_works(current: CurrentInfo<'_>, mut st: bindings::unwind_stacktrace) {
    // Enter the read-side section before taking the bits: a bit taken
    // here may belong to a work that `cancel()` is removing, and cancel
    // gives the bit to a new work only after this section ends, so the
    // new work is never called for the old one's request.
    let _srcu = srcu().read_lock();
    let Some(mut bits) = mask::take_pending(&current.info().mask()) else {
        kernel::warn_on_once!(true);
        return;
    };
    let completed = cache::completed(current);
    if let Some(c) = completed {
        bits &= !c.get();
    }
    let cookie = cookie::read(current);

    while bits != 0 {
        let bit = bits.trailing_zeros();
        bits &= bits - 1;
        let work = WORKS[bit as usize].load(Acquire);
        if work.is_null() {
            continue;
        }
        // SAFETY: A published work stays valid until its cancel returns,
        // and cancel unpublishes it, then waits for this SRCU section.  Its
        // `func` was written before it was published (type invariant of
        // `Work`), and the acquire load above pairs with that release.
        if let Some(func) = unsafe { (*work).func } {
            // SAFETY: `func` is the callback registered with `work`; `st`
            // is a valid trace for the duration of the call (its entries
            // are in the cache, which lives until the task is freed).
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
    // SAFETY: Called from the task_work: its `callback_head` is off the
    // list (`task_work_run()` takes it off before calling this).
    unsafe { process(current!()) };
}

/// `unwind_deferred_task_exit()`: the exiting current task `task` runs a
/// pending request while it still has its mm.
pub(crate) fn task_exit(task: &CurrentTask) {
    let current = CurrentInfo::new(task);
    // SAFETY: `task` is current; only current changes its own `flags`
    // (others only set unrelated bits atomically).
    let exiting = unsafe { (*task.as_ptr()).flags } & bindings::PF_EXITING != 0;
    if kernel::warn_on_once!(!exiting) || !mask::is_pending(&current.info().mask()) {
        return;
    }
    // SAFETY: `PF_EXITING` is set (checked above).
    unsafe { process(task) };
    current.work().cancel(task);
}

/// `unwind_deferred_cancel()`: unregister `work`.  Process context.
pub(crate) fn cancel(work: &Work) {
    let _lock = callback_lock().lock();
    let Some(bit) = work.bit() else {
        return;
    };
    if WORKS[bit as usize].load(Relaxed) != work.as_raw() {
        return;
    }
    WORKS[bit as usize].store(core::ptr::null_mut(), Relaxed);
    // No more requests from this work ...
    work.bit_cell().store(-1, Relaxed);
    // ... once those in flight are done (they read the bit under RCU):
    // from now on nothing sets the bit in a task's mask.
    rcu::synchronize_rcu();
    // Clear it before waiting for the task_works: one that takes the bits
    // after this does not see it, one that took it before is waited for.
    for_each_thread(bit, |info, bit| mask::cancel(&info.mask(), bit_mask(bit)));
    srcu().synchronize();
    // No task_work that may mark the bit completed is running any more.
    for_each_thread(bit, |info, bit| {
        if let Some(c) = Completed::of(info) {
            c.clear(bit);
        }
    });
    // Only now may the bit be given to a new callback.  (The host model
    // checker, `host/tests/loom_registry.rs`, shows each step is needed.)
    let mut used = REGISTERED.load(Relaxed);
    mask::free_bit(&mut used, bit);
    REGISTERED.store(used, Relaxed);
}

/// Call `f(thread's state, bit)` on every thread, under RCU; `f` must not
/// sleep.
fn for_each_thread(bit: u32, f: for<'t> fn(Info<'t>, u32)) {
    struct Visit {
        f: for<'t> fn(Info<'t>, u32),
        bit: u32,
    }
    /// # Safety
    ///
    /// `t` is a live thread, the caller holds the RCU read lock, and
    /// `data` is the `Visit` below.
    unsafe extern "C" fn visit(t: *mut bindings::task_struct, data: *mut c_void) {
        // SAFETY: `data` is `v`, alive for the whole visit.
        let v = unsafe { &*data.cast::<Visit>() };
        // SAFETY: `unwind_user_visit_threads()` passes only threads from
        // `for_each_process_thread()` inside its RCU read section, so `t`
        // stays valid (its `task_struct` is RCU-freed) during this call.
        (v.f)(unsafe { Info::of(t) }, v.bit);
    }
    let v = Visit { f, bit };
    // SAFETY: `visit` does not sleep (nor does `f`); `v` outlives the call.
    unsafe { bindings::unwind_user_visit_threads(Some(visit), (&raw const v).cast_mut().cast()) };
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
        TaskWork::from_raw(info.work_ptr()).init(task_work_fn);
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
        TaskWork::from_raw(info.work_ptr()).cancel_raw(task);
    }
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kunit_tests(unwind_rust_deferred)]
mod tests {
    //! Registration, requests and cancel, from the KUnit kernel thread.
    //! (Requests from user tasks, in NMI, hardirq and task context, are
    //! covered by the selftests through CONFIG_UNWIND_DEFERRED_TEST.)
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

    /// A registered work, cancelled when dropped (before it is freed).
    struct Registered(KBox<Work>);

    impl Registered {
        fn new() -> Result<Self> {
            let w = KBox::new(Work::new(), GFP_KERNEL)?;
            // SAFETY: `w` is boxed and cancelled in `drop` before it is
            // freed.
            unsafe { init(&w, Some(count_calls)) }?;
            Ok(Registered(w))
        }
    }

    impl Drop for Registered {
        fn drop(&mut self) {
            cancel(&self.0);
        }
    }

    fn registered() -> u32 {
        REGISTERED.load(Relaxed).count_ones()
    }

    #[test]
    fn request_from_kernel_thread_is_refused() -> Result {
        let task = current!();
        let w = Registered::new()?;
        assert!(matches!(request(task, &w.0), Err(e) if e == EINVAL));
        Ok(())
    }

    #[test]
    fn registration_limit_and_bit_reuse() -> Result {
        let before = REGISTERED.load(Relaxed);
        let mut works = KVec::new();
        loop {
            match Registered::new() {
                Ok(w) => works.push(w, GFP_KERNEL)?,
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
        // A registered work cannot be registered again.
        // SAFETY: `works[0]` is registered and stays valid.
        assert_eq!(unsafe { init(&works[0].0, Some(count_calls)) }, Err(EBUSY));
        // A cancelled bit is given to the next registration.
        let bit = works[5].0.bit().ok_or(EINVAL)?;
        works.remove(5)?;
        let w = Registered::new()?;
        assert_eq!(w.0.bit(), Some(bit));
        drop(w);
        works.clear();
        assert_eq!(REGISTERED.load(Relaxed), before);
        Ok(())
    }

    #[test]
    fn cancel_clears_the_bit_everywhere() -> Result {
        let w = KBox::new(Work::new(), GFP_KERNEL)?;
        // SAFETY: `w` is cancelled below, before it is freed.
        unsafe { init(&w, Some(count_calls)) }?;
        let bit = w.bit().ok_or(EINVAL)?;
        let n = registered();
        let task = current!();
        let m = CurrentInfo::new(task).info().mask();
        m.fetch_or(1 << bit);
        cancel(&w);
        assert_eq!(m.load() & (1 << bit), 0);
        assert_eq!(w.bit(), None);
        assert!(WORKS[bit as usize].load(Relaxed).is_null());
        assert_eq!(registered(), n - 1);
        // A cancelled work cannot request, and a second cancel is harmless.
        assert!(request(task, &w).is_err());
        cancel(&w);
        assert_eq!(registered(), n - 1);
        Ok(())
    }

    #[test]
    fn request_states_on_a_task_mask() {
        // The bitmask rules on a real `atomic_long_t`, with the kernel's
        // atomics: queue, join, already requested, task_work; then what
        // unwind_reset_info() does on the way to user space.
        let mut ti = bindings::unwind_task_info::default();
        // SAFETY: `ti` outlives `info`.
        let info = unsafe { Info::from_raw(&mut ti) };
        let m = info.mask();
        let (a, b) = (1usize << 2, 1usize << 40);
        assert_eq!(mask::request(&m, a), Request::QueueTaskWork);
        assert_eq!(mask::request(&m, a), Request::AlreadyRequested);
        assert_eq!(mask::request(&m, b), Request::Joined);
        assert_eq!(mask::take_pending(&m), Some(a | b));
        assert_eq!(mask::take_pending(&m), None);
        assert_eq!(mask::request(&m, b), Request::AlreadyRequested);
        m.store(0);
        assert_eq!(mask::request(&m, b), Request::QueueTaskWork);
    }

    #[test]
    fn pending_callback_runs_once_even_without_a_trace() -> Result {
        let w = Registered::new()?;
        let bit = w.0.bit().ok_or(EINVAL)?;
        let task = current!();
        let m = CurrentInfo::new(task).info().mask();
        let saved = m.load();
        CALLS.store(0, Relaxed);
        // As if a request had been made: PENDING and the work's bit.
        m.fetch_or(PENDING | 1 << bit);
        // SAFETY: A kernel thread's `callback_head` is never queued (its
        // requests are refused).
        unsafe { process(task) };
        // A kernel thread has no user stack: the callback gets an empty
        // trace, but it is called, exactly once.
        assert_eq!(CALLS.load(Relaxed), 1);
        assert_eq!(LAST_NR.load(Relaxed), 0);
        assert_eq!(m.load() & PENDING, 0);
        assert_ne!(m.load() & (1 << bit), 0);
        m.store(saved);
        Ok(())
    }
}
