// SPDX-License-Identifier: GPL-2.0

//! Model checking, with loom, of a callback's bit being given to a new
//! callback after cancel: `src/deferred.rs`'s request, task_work, cancel
//! and init, with the kernel's synchronisation made of loom primitives.
//!
//! The model:
//!
//! - `WORKS`: the table of registered works, one slot per callback bit
//!   (here two slots, bits 2 and 3; a loom `AtomicUsize` holding a work id,
//!   0 for none);
//! - each work's `bit` (a loom `AtomicI32`, -1 once cancelled);
//! - the registry word of the bits given out (`mask::alloc_bit()` /
//!   `mask::free_bit()` under a loom `Mutex`, the callback mutex); every
//!   bit but 2 and 3 is taken from the start, so the model has two works;
//! - one task: its request mask (`MaskWord` over a loom `AtomicUsize`, as
//!   in `loom_mask.rs`) and its cache's completed word;
//! - RCU: a loom `RwLock`; a read-side section (in the kernel, the
//!   request's interrupts-off region, which `synchronize_rcu()` waits for
//!   like an `rcu_read_lock()` section) holds a read guard, and
//!   `synchronize_rcu()` takes and drops the write lock, so it waits for
//!   every reader that started before it.  (A reader that starts during the
//!   grace period here waits for its end instead of running alongside, which
//!   loses no behaviour: the updater does nothing while it waits.)
//! - SRCU, `unwind_srcu`: another `RwLock`, the same way.
//!
//! The scenario: work A is registered with bit 2.  The task requests A
//! and, if the request queued the task_work, runs it (`process()`).  At
//! the same time another CPU cancels A, then registers a new work B,
//! which gets bit 2 again.  B never requests.  In every interleaving:
//!
//! 1. B is never called (a cancelled work's pending bit must not call the
//!    work that inherited the bit);
//! 2. A is called at most once;
//! 3. no call of A starts after `cancel(A)` has returned;
//! 4. at the end, bit 2 is neither in the task's mask nor in its completed
//!    word (it would answer B's first request "already requested", or skip
//!    B's call, in this kernel entry).
//!
//! The calls are recorded with std atomics, outside the model, at the call
//! itself: they are bookkeeping, not protocol, and add no interleavings.
//!
//! The order that keeps these properties, checked below
//! ([`correct_order_never_calls_the_new_work`]), is:
//!
//! - `request()`: RCU read section around reading the work's bit and
//!   setting it in the mask;
//! - `process()`: SRCU read section around taking the pending bits *and*
//!   calling the works;
//! - `cancel()`: unpublish the work, set its bit to -1, `synchronize_rcu()`
//!   (no request can set the bit any more), clear the bit in the task's
//!   mask, *then* `synchronize_srcu()` (every task_work that took the bit
//!   before it was cleared has finished), clear it in the completed word
//!   (after SRCU: a running task_work marks it completed after its call)
//!   and free it.
//!
//! Each of these steps is needed: the tests `#[should_panic]` below remove
//! or move one and require loom to find a spurious call of B.  In
//! particular, clearing the mask *after* `synchronize_srcu()` (the order
//! first proposed for `src/deferred.rs`) is not enough: a task_work whose
//! SRCU section starts just after `synchronize_srcu()` returned, takes the
//! pending bit before cancel clears it, and reads `WORKS[2]` after `init(B)`
//! published B, calls B.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test
//! loom_registry`.  Exhaustive for the correct order and the counterexample
//! tests (two threads; see each test's count).
#![cfg(loom)]

#[macro_use]
mod common;

use loom::sync::atomic::{AtomicI32, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex, RwLock};
use loom::thread;
use std::sync::atomic::{
    AtomicBool as StdBool, AtomicUsize as StdAtomic, Ordering::SeqCst as StdSeqCst,
};
use unwind_logic::mask::{self, Request, RESERVED};

mask_word!(W, AtomicUsize);

/// Work ids (0: no work).
const A: usize = 1;
const B: usize = 2;
/// The callback bits of the model: `WORKS` slot `i` is bit `FIRST + i`.
const FIRST: u32 = 2;
const NR_SLOTS: usize = 2;

/// Where the steps of the protocol are, to check the correct order and
/// to show what each step is for.
#[derive(Clone, Copy, Debug)]
struct Order {
    /// `request()` reads the bit and sets it in an RCU read section.
    request_under_rcu: bool,
    /// `cancel()` calls `synchronize_rcu()` after setting the bit to -1.
    cancel_syncs_rcu: bool,
    /// `process()` takes the pending bits inside its SRCU read section
    /// (else before it, as `src/deferred.rs` did before, and upstream C
    /// still does).
    take_pending_under_srcu: bool,
    /// `cancel()` clears the bit in the task's mask before
    /// `synchronize_srcu()` (else after it).
    clear_mask_before_srcu: bool,
    /// `cancel()` clears the bit in the task's completed word after
    /// `synchronize_srcu()` (else before it, with the mask).
    clear_completed_after_srcu: bool,
}

/// The order that keeps the properties: `src/deferred.rs`'s.
const CORRECT: Order = Order {
    request_under_rcu: true,
    cancel_syncs_rcu: true,
    take_pending_under_srcu: true,
    clear_mask_before_srcu: true,
    clear_completed_after_srcu: true,
};

/// The whole system: the registry, one task, the calls made.
struct Sys {
    order: Order,
    /// `WORKS`.
    works: [AtomicUsize; NR_SLOTS],
    /// `unwind_work::bit` of A and B (index: id - 1).
    bit: [AtomicI32; 2],
    /// `unwind_callback_mutex` and the registry word it protects.
    registered: Mutex<usize>,
    /// RCU.
    rcu: RwLock<()>,
    /// `unwind_srcu`.
    srcu: RwLock<()>,
    /// The task's `unwind_mask`.
    mask: W,
    /// The task's `cache->unwind_completed`.
    completed: AtomicUsize,
    // Bookkeeping, outside the model.
    /// `cancel(A)` has returned.
    cancel_returned: StdBool,
    /// Calls of A and B.
    calls: [StdAtomic; 2],
    /// The steps taken, in order, for the counterexample's message.
    steps: std::sync::Mutex<Vec<&'static str>>,
}

fn slot(bit: u32) -> usize {
    (bit - FIRST) as usize
}

impl Sys {
    /// Work A registered with bit 2; bit 3 free, every other bit taken.
    fn new(order: Order) -> Self {
        Sys {
            order,
            works: [AtomicUsize::new(A), AtomicUsize::new(0)],
            bit: [AtomicI32::new(FIRST as i32), AtomicI32::new(-1)],
            registered: Mutex::new(!(1 << (FIRST + 1)) | RESERVED),
            rcu: RwLock::new(()),
            srcu: RwLock::new(()),
            mask: W(AtomicUsize::new(0)),
            completed: AtomicUsize::new(0),
            cancel_returned: StdBool::new(false),
            calls: [StdAtomic::new(0), StdAtomic::new(0)],
            steps: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A work's bit, if it has a valid one (`bit_of()` in deferred.rs).
    fn bit_of(&self, work: usize) -> Option<u32> {
        let b = u32::try_from(self.bit[work - 1].load(SeqCst)).ok()?;
        (b >= FIRST && slot(b) < NR_SLOTS).then_some(b)
    }

    /// `synchronize_rcu()`.
    fn synchronize_rcu(&self) {
        drop(self.rcu.write().unwrap());
    }

    /// `synchronize_srcu(&unwind_srcu)`.
    fn synchronize_srcu(&self) {
        drop(self.srcu.write().unwrap());
    }

    /// Note a step (loom switches threads only at its own operations, so
    /// the steps are noted in the order they are taken).
    fn step(&self, s: &'static str) {
        self.steps.lock().unwrap().push(s);
    }

    /// The work's callback.
    fn call(&self, work: usize) {
        let steps = || self.steps.lock().unwrap().join("; ");
        assert!(work != B, "spurious call of B after: {}", steps());
        assert!(
            !self.cancel_returned.load(StdSeqCst),
            "call of A after cancel(A) returned, after: {}",
            steps()
        );
        self.calls[work - 1].fetch_add(1, StdSeqCst);
    }

    /// `unwind_deferred_request()` (deferred.rs `request()`), from the
    /// task's context: `Err(())` is `-EINVAL`.
    fn unwind_deferred_request(&self, work: usize) -> Result<Request, ()> {
        let _rcu = self
            .order
            .request_under_rcu
            .then(|| self.rcu.read().unwrap());
        let bit = self.bit_of(work).ok_or(())?;
        self.step("task: request(A) reads bit 2");
        let r = mask::request(&self.mask, 1 << bit);
        self.step("task: request(A) sets bit 2");
        Ok(r)
    }

    /// The task_work: `process()` in deferred.rs (upstream's
    /// `process_unwind_deferred()`).
    fn process(&self) {
        let mut srcu = None;
        if self.order.take_pending_under_srcu {
            srcu = Some(self.srcu.read().unwrap());
            self.step("task_work: enters SRCU");
        }
        let bits = mask::take_pending(&self.mask).expect("task_work without PENDING");
        self.step(if bits != 0 {
            "task_work: takes bit 2"
        } else {
            "task_work: takes no bit"
        });
        if srcu.is_none() {
            srcu = Some(self.srcu.read().unwrap());
        }
        if !self.order.take_pending_under_srcu {
            self.step("task_work: enters SRCU");
        }
        let mut bits = bits & !self.completed.load(SeqCst);
        while bits != 0 {
            let bit = bits.trailing_zeros();
            bits &= bits - 1;
            let w = self.works[slot(bit)].load(SeqCst);
            if w != 0 {
                self.step(if w == A {
                    "task_work: reads A in WORKS[2]"
                } else {
                    "task_work: reads B in WORKS[2]"
                });
                self.call(w);
                self.completed.fetch_or(1 << bit, SeqCst);
                self.step("task_work: marks bit 2 completed");
            }
        }
        drop(srcu);
    }

    /// `unwind_deferred_cancel()` (deferred.rs `cancel()`).
    fn unwind_deferred_cancel(&self, work: usize) {
        let mut registered = self.registered.lock().unwrap();
        let Some(bit) = self.bit_of(work) else {
            return;
        };
        if self.works[slot(bit)].load(SeqCst) != work {
            return;
        }
        self.works[slot(bit)].store(0, SeqCst);
        self.bit[work - 1].store(-1, SeqCst);
        self.step("cancel: unpublishes A, bit -1");
        if self.order.cancel_syncs_rcu {
            self.synchronize_rcu();
            self.step("cancel: synchronize_rcu() returns");
        }
        // `cancel()`: the first `for_each_thread()` pass, on the masks.
        if self.order.clear_mask_before_srcu {
            mask::cancel(&self.mask, 1 << bit);
            self.step("cancel: clears bit 2 in the mask");
        }
        if !self.order.clear_completed_after_srcu {
            self.completed.fetch_and(!(1 << bit), SeqCst);
            self.step("cancel: clears bit 2 in completed");
        }
        self.synchronize_srcu();
        self.step("cancel: synchronize_srcu() returns");
        if !self.order.clear_mask_before_srcu {
            mask::cancel(&self.mask, 1 << bit);
            self.step("cancel: clears bit 2 in the mask");
        }
        // The completed half, after SRCU: a task_work still running could
        // set it again.
        if self.order.clear_completed_after_srcu {
            self.completed.fetch_and(!(1 << bit), SeqCst);
            self.step("cancel: clears bit 2 in completed");
        }
        mask::free_bit(&mut registered, bit);
    }

    /// `unwind_deferred_init()` (deferred.rs `init()`).
    fn unwind_deferred_init(&self, work: usize) -> Option<u32> {
        let mut registered = self.registered.lock().unwrap();
        let bit = mask::alloc_bit(&mut registered)?;
        self.bit[work - 1].store(bit as i32, SeqCst);
        self.works[slot(bit)].store(work, SeqCst);
        self.step("init(B): publishes B with bit 2");
        Some(bit)
    }
}

/// Run the scenario in every interleaving (exhaustively: no preemption
/// bound).  Returns how the executions ended, to show that the search
/// reaches each outcome: the request refused (A already cancelled), A
/// called, the task_work run without calling A (slot already empty).
fn model(order: Order) -> [usize; 3] {
    let outcomes = std::sync::Arc::new([const { StdAtomic::new(0) }; 3]);
    let counts = outcomes.clone();
    loom::model(move || {
        let sys = Arc::new(Sys::new(order));
        let other_cpu = {
            let sys = sys.clone();
            thread::spawn(move || {
                sys.unwind_deferred_cancel(A);
                sys.cancel_returned.store(true, StdSeqCst);
                // B inherits A's bit.
                assert_eq!(sys.unwind_deferred_init(B), Some(FIRST));
            })
        };
        // The task.
        let r = sys.unwind_deferred_request(A);
        if r == Ok(Request::QueueTaskWork) {
            sys.process();
        }
        other_cpu.join().unwrap();
        let outcome = match (r, sys.calls[A - 1].load(StdSeqCst)) {
            (Err(()), _) => 0,
            (_, 0) => 2,
            _ => 1,
        };
        counts[outcome].fetch_add(1, StdSeqCst);
        assert!(sys.calls[A - 1].load(StdSeqCst) <= 1, "A called twice");
        assert_eq!(sys.calls[B - 1].load(StdSeqCst), 0);
        // Nothing of A is left for B in the task: bit 2 set in the mask
        // would answer B's first request "already requested", in completed
        // it would skip B's call.
        let left = (sys.mask.0.load(SeqCst) | sys.completed.load(SeqCst)) & 1 << FIRST;
        let steps = sys.steps.lock().unwrap().join("; ");
        assert!(left == 0, "bit 2 left in the task after: {steps}");
    });
    outcomes.each_ref().map(|o| o.load(StdSeqCst))
}

fn timed(what: &str, order: Order) {
    let t = std::time::Instant::now();
    let o = model(order);
    let n: usize = o.iter().sum();
    println!(
        "loom: registry, {what}: {n} executions ({} refused, {} calling A, \
         {} not calling A), {:?}",
        o[0],
        o[1],
        o[2],
        t.elapsed()
    );
    assert!(n > 1);
    // The model reaches every outcome.
    assert!(o.iter().all(|&k| k > 0), "outcomes {o:?}");
}

/// The properties hold with the correct order, exhaustively.
#[test]
fn correct_order_never_calls_the_new_work() {
    timed("correct order", CORRECT);
}

/// The order first proposed for `src/deferred.rs`: everything as in
/// [`CORRECT`] but the task's mask cleared after `synchronize_srcu()`.
/// Counterexample: the task requests A (bit 2 and PENDING set); cancel
/// unpublishes A, waits for RCU and SRCU (no reader yet); the task_work
/// enters its SRCU section and takes bit 2; cancel clears the mask (too
/// late), frees bit 2, and init(B) publishes B in slot 2; the task_work
/// reads `WORKS[2]` and calls B.
#[test]
#[should_panic(expected = "spurious call of B")]
fn mask_cleared_after_srcu_calls_the_new_work() {
    model(Order {
        clear_mask_before_srcu: false,
        ..CORRECT
    });
}

/// The pending bits taken before the SRCU section (as upstream C does): a task_work
/// that took bit 2 before cancel cleared it, and entered SRCU after
/// `synchronize_srcu()`, sees B.
#[test]
#[should_panic(expected = "spurious call of B")]
fn pending_bits_taken_before_srcu_call_the_new_work() {
    model(Order {
        take_pending_under_srcu: false,
        ..CORRECT
    });
}

/// No RCU section in the request: a request that read bit 2 before cancel
/// set it to -1 sets it in the mask after cancel cleared it.
#[test]
#[should_panic(expected = "spurious call of B")]
fn request_outside_rcu_calls_the_new_work() {
    model(Order {
        request_under_rcu: false,
        ..CORRECT
    });
}

/// No `synchronize_rcu()` in cancel: the same, the RCU section is waited
/// for by nobody.
#[test]
#[should_panic(expected = "spurious call of B")]
fn cancel_without_synchronize_rcu_calls_the_new_work() {
    model(Order {
        cancel_syncs_rcu: false,
        ..CORRECT
    });
}

/// The order `src/deferred.rs` had before, and upstream C's
/// `kernel/unwind/deferred.c` has: no RCU, bits taken before SRCU, the mask
/// cleared after it.
#[test]
#[should_panic(expected = "spurious call of B")]
fn current_order_calls_the_new_work() {
    model(Order {
        request_under_rcu: false,
        cancel_syncs_rcu: false,
        take_pending_under_srcu: false,
        clear_mask_before_srcu: false,
        clear_completed_after_srcu: true,
    });
}

/// The completed word cleared before `synchronize_srcu()`: a task_work
/// that was calling A marks bit 2 completed again after the clear, so B,
/// should it request in this kernel entry, would not be called.
#[test]
#[should_panic(expected = "bit 2 left in the task")]
fn completed_cleared_before_srcu_leaves_the_bit() {
    model(Order {
        clear_completed_after_srcu: false,
        ..CORRECT
    });
}
