// SPDX-License-Identifier: GPL-2.0

//! Model checking of the request bitmask protocol with loom: every
//! interleaving (up to loom's bounds) of
//!
//! - an interrupt (or NMI) on the task's CPU making requests,
//! - the task running its task_work and returning to user space
//!   (`reset`), possibly several kernel entries in a row,
//! - `unwind_deferred_cancel()` of one callback on another CPU,
//!
//! is explored (exhaustively with two threads; with cancel as a third
//! thread, every interleaving with up to three preemptions), and in each
//! one:
//!
//! 1. every request answered "queued" (`QueueTaskWork` or `Joined`) gets
//!    its callback called exactly once, unless that callback was cancelled
//!    (then at most once);
//! 2. a request answered "already requested" was preceded by a call or a
//!    queued request of the same callback in the same entry;
//! 3. the task_work is queued once per PENDING, never twice at a time;
//! 4. the return to user space never clears a word with PENDING set, and
//!    leaves the word zero when it clears it.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test loom_mask`.
#![cfg(loom)]

#[macro_use]
mod common;

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::AtomicUsize as StdAtomic;
use unwind_logic::mask::{self, MaskWord, Request, PENDING};

mask_word!(W, AtomicUsize);

const A: usize = 1 << 2;
const B: usize = 1 << 3;

/// Shared state of one task.
struct Task {
    mask: W,
    /// `cache->unwind_completed`.
    completed: AtomicUsize,
    /// Task_works queued and not yet started (0 or 1).
    queued: AtomicUsize,
    /// Calls per callback: [A, B].
    calls: [AtomicUsize; 2],
    /// Requests answered "queued" per callback.
    promised: [AtomicUsize; 2],
}

fn idx(bit: usize) -> usize {
    if bit == A {
        0
    } else {
        1
    }
}

impl Task {
    fn request(&self, bit: usize) {
        match mask::request(&self.mask, bit) {
            Request::QueueTaskWork => {
                // Property 3: never queued twice at a time.
                assert_eq!(
                    self.queued.fetch_add(1, SeqCst),
                    0,
                    "task_work queued twice"
                );
                self.promised[idx(bit)].fetch_add(1, SeqCst);
            }
            Request::Joined => {
                self.promised[idx(bit)].fetch_add(1, SeqCst);
            }
            Request::AlreadyRequested => {
                // Property 2: the bit is set only by a request of this
                // entry, which was promised (or the callback already ran).
                let p = self.promised[idx(bit)].load(SeqCst);
                let c = self.calls[idx(bit)].load(SeqCst);
                assert!(p + c > 0, "already-requested without a request");
            }
        }
    }

    /// The task_work, if one is queued.
    fn run_task_work(&self) {
        if self.queued.load(SeqCst) == 0 {
            return;
        }
        self.queued.fetch_sub(1, SeqCst);
        let Some(bits) = mask::take_pending(&self.mask) else {
            panic!("task_work ran without PENDING");
        };
        let todo = bits & !self.completed.load(SeqCst);
        for bit in [A, B] {
            if todo & bit != 0 {
                self.calls[idx(bit)].fetch_add(1, SeqCst);
                self.completed.fetch_or(bit, SeqCst);
            }
        }
    }

    /// The return to user space: `unwind_reset_info()`.
    fn return_to_user(&self) {
        let before = self.mask.load();
        if common::unwind_reset_info(&self.mask) {
            // Property 4.
            self.completed.store(0, SeqCst);
        } else if before & PENDING != 0 {
            assert_ne!(self.mask.load() & PENDING, 0, "PENDING lost");
        }
    }
}

fn model(cancel_b: bool, nmi_second_request: bool) -> usize {
    // Counted per call: the tests run in parallel threads.
    let executions = std::sync::Arc::new(StdAtomic::new(0));
    let count = executions.clone();
    let mut builder = loom::model::Builder::new();
    // With three threads, bound the preemptions so that the search ends in
    // seconds (every interleaving with up to 3 preemptions is explored).
    builder.preemption_bound = if cancel_b { Some(3) } else { None };
    builder.check(move || {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let t = Arc::new(Task {
            mask: W(AtomicUsize::new(0)),
            completed: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            calls: [AtomicUsize::new(0), AtomicUsize::new(0)],
            promised: [AtomicUsize::new(0), AtomicUsize::new(0)],
        });

        let irq = {
            let t = t.clone();
            thread::spawn(move || {
                t.request(A);
                t.request(B);
                if nmi_second_request {
                    t.request(A);
                }
            })
        };
        let cancel = cancel_b.then(|| {
            let t = t.clone();
            thread::spawn(move || {
                // unwind_deferred_cancel(): after SRCU, clear the bit in
                // the task's mask and cache.
                mask::cancel(&t.mask, B);
                t.completed.fetch_and(!B, SeqCst);
            })
        });
        // The task: run task_work and return to user space, twice.
        for _ in 0..2 {
            t.run_task_work();
            t.return_to_user();
        }
        irq.join().unwrap();
        if let Some(c) = cancel {
            c.join().unwrap();
        }
        // Whatever is still queued runs before the task gets to user space.
        t.run_task_work();
        t.return_to_user();

        // Property 1.
        let (pa, ca) = (t.promised[0].load(SeqCst), t.calls[0].load(SeqCst));
        assert!(ca >= 1 && ca <= pa, "A: {pa} promised, {ca} calls");
        let (pb, cb) = (t.promised[1].load(SeqCst), t.calls[1].load(SeqCst));
        if cancel_b {
            assert!(cb <= pb, "B: {pb} promised, {cb} calls");
        } else {
            assert!(cb >= 1 && cb <= pb, "B: {pb} promised, {cb} calls");
        }
        // Nothing left pending, and the word is clear.
        assert_eq!(t.queued.load(SeqCst), 0);
        assert_eq!(t.mask.load(), 0);
    });
    executions.load(std::sync::atomic::Ordering::SeqCst)
}

#[test]
fn requests_race_task_work_and_return_to_user() {
    let n = model(false, false);
    println!("loom: requests vs task_work vs reset: {n} executions");
    assert!(n > 1);
}

#[test]
fn repeated_request_in_one_entry() {
    let n = model(false, true);
    println!("loom: repeated request: {n} executions");
    assert!(n > 1);
}

#[test]
fn cancel_races_everything() {
    let n = model(true, false);
    println!("loom: with cancel: {n} executions");
    assert!(n > 1);
}
