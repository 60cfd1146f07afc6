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
//! 2. a request answered "already requested" was preceded by a queued
//!    request of the same callback in the same entry (a mutation whose
//!    reset ends the entry but keeps the bits must fail it);
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
    /// Kernel entries ended so far: returns to user space that reset the
    /// word.
    entry: AtomicUsize,
    /// Per callback, the entry count read just after its last request
    /// answered "queued" (by the one requesting thread).
    promised_in: [AtomicUsize; 2],
    /// The model's mutation: a reset that ends the entry but keeps the
    /// callback bits (property 2 must catch it).
    reset_keeps_bits: bool,
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
        let entry = self.entry.load(SeqCst);
        match mask::request(&self.mask, bit) {
            Request::QueueTaskWork => {
                // Property 3: never queued twice at a time.
                assert_eq!(
                    self.queued.fetch_add(1, SeqCst),
                    0,
                    "task_work queued twice"
                );
                self.promised[idx(bit)].fetch_add(1, SeqCst);
                self.promised_in[idx(bit)].store(self.entry.load(SeqCst), SeqCst);
            }
            Request::Joined => {
                self.promised[idx(bit)].fetch_add(1, SeqCst);
                self.promised_in[idx(bit)].store(self.entry.load(SeqCst), SeqCst);
            }
            Request::AlreadyRequested => {
                // Property 2: the bit is set only by a request of this
                // entry, which was promised.  The requests of this model
                // all come from one thread, in order, so that request is
                // an earlier one of this thread, and no entry ended
                // between the entry count it read after its answer and the
                // one this request read before its own: a reset that ends
                // the entry clears the bit first.
                let p = self.promised[idx(bit)].load(SeqCst);
                assert!(p > 0, "already-requested without a request");
                assert_eq!(
                    self.promised_in[idx(bit)].load(SeqCst),
                    entry,
                    "already-requested without a request in this entry"
                );
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
        let reset = if self.reset_keeps_bits {
            // The mutation: PENDING and USED handled, callback bits kept.
            before & PENDING == 0 && before != 0 && {
                self.mask.fetch_andnot(mask::RESERVED);
                true
            }
        } else {
            common::unwind_reset_info(&self.mask)
        };
        if reset {
            // The entry ends.
            self.entry.fetch_add(1, SeqCst);
            if self.reset_keeps_bits {
                return;
            }
            // Property 4.
            self.completed.store(0, SeqCst);
        } else if before & PENDING != 0 {
            assert_ne!(self.mask.load() & PENDING, 0, "PENDING lost");
        }
    }
}

fn model(cancel_b: bool, nmi_second_request: bool) -> usize {
    model_with(cancel_b, nmi_second_request, false)
}

fn model_with(cancel_b: bool, nmi_second_request: bool, reset_keeps_bits: bool) -> usize {
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
            entry: AtomicUsize::new(0),
            promised_in: [AtomicUsize::new(0), AtomicUsize::new(0)],
            reset_keeps_bits,
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
        // Nothing left pending, and the word is clear (not so with the
        // mutation, which keeps bits: there only property 2 is judged).
        assert_eq!(t.queued.load(SeqCst), 0);
        if !reset_keeps_bits {
            assert_eq!(t.mask.load(), 0);
        }
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

/// Property 2 catches a return to user space that ends the entry but
/// keeps the callback bits: the next entry's request is answered "already
/// requested" although no request of that entry was made.
#[test]
#[should_panic(expected = "already-requested without a request in this entry")]
fn reset_that_keeps_bits_is_caught() {
    model_with(false, true, true);
}
