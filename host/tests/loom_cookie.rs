// SPDX-License-Identifier: GPL-2.0

//! Model checking of the cookie claim rule (`cookie::get()`) with loom.
//!
//! In the kernel, the contexts that make a task's cookie are the task's
//! own: an interrupt on its CPU, and an NMI that hits that interrupt (or
//! the task) between any two of its steps.  Here they are two loom threads,
//! "irq" and "nmi", running fully concurrently on the same task cells and
//! the same CPU counter: every interleaving of their steps is explored,
//! which includes every point where an NMI can interrupt the IRQ (the NMI
//! running all its steps between two of the IRQ's), and more (the IRQ
//! running between two steps of the NMI, which cannot happen on one CPU).
//! Full concurrency is a superset of "NMI interrupts IRQ", so a property
//! that holds here holds for the kernel.
//!
//! The cells are loom `AtomicU32`s with SeqCst orderings; the kernel uses
//! relaxed atomics, which is enough there because every access is on one
//! CPU, where program order is the order every context sees.
//!
//! In each interleaving of a kernel entry:
//!
//! 1. both contexts get the same cookie, non-zero, made on the given CPU;
//! 2. its count is odd;
//! 3. the CPU counter ends equal to that count (the next cookie of the CPU
//!    gets a later count);
//!
//! and, after it, a second kernel entry (the task's id reset to 0, as
//! `unwind_reset_info()` does, or another task on the same CPU) gets a
//! different count, the CPU's next one.
//!
//! The second entry starts only once both contexts of the first are done:
//! on one CPU an NMI ends before the code it interrupted resumes, and the
//! task cannot be switched out with the IRQ half-way, so no context of the
//! first entry is still running when the next one claims.  (Full
//! concurrency across entries would not be a superset of anything real:
//! an NMI of the first entry left half-way while a second task claims
//! from the same counter is impossible on one CPU, and would give both
//! tasks one count.)  The second entry's claim is made by one context:
//! its race with an NMI is the first entry's again, and racing it too
//! multiplied the executions by about 700 (some 750,000, two minutes).
//!
//! Two mutated rules are checked too, to show that the assertions bite: a
//! claim by load-and-store instead of compare-and-exchange (two cookies in
//! one entry), and a loser that also writes the counter (the counter ends
//! past the cookie's count).  Loom must find a counterexample for each.
//!
//! Exhaustive (no preemption bound): two threads of up to five atomic
//! steps each.
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test loom_cookie`.
#![cfg(loom)]

#[macro_use]
mod common;

use loom::sync::atomic::{AtomicU32, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::AtomicUsize as StdAtomic;
use unwind_logic::cookie::{self, Cell32};

cell32!(C, AtomicU32);

/// The CPU the task runs on.
const CPU: u32 = 1;

/// One task's `unwind_task_id`: the halves `cpu` (CPU + 1) and `cnt`.
struct TaskId {
    cpu: C,
    cnt: C,
}

impl TaskId {
    fn new() -> Self {
        TaskId {
            cpu: C(AtomicU32::new(0)),
            cnt: C(AtomicU32::new(0)),
        }
    }

    /// `unwind_reset_info()`: the return to user space zeroes the id.
    fn reset(&self) {
        self.cpu.store(0);
        self.cnt.store(0);
    }
}

/// The claim rule under test.
#[derive(Clone, Copy)]
enum Rule {
    /// `cookie::get()`, unchanged.
    Real,
    /// Mutation: claim with a load and a store, no compare-and-exchange.
    LoadStore,
    /// Mutation: the context that loses the claim also stores its count
    /// into the CPU counter.
    LoserStoresCounter,
}

fn get(rule: Rule, t: &TaskId, ctr: &C) -> u64 {
    match rule {
        Rule::Real => cookie::get(&t.cpu, &t.cnt, || (ctr, CPU)),
        Rule::LoadStore => {
            if t.cpu.load() != 0 {
                return cookie::read(&t.cpu, &t.cnt);
            }
            if t.cnt.load() == 0 {
                let new = cookie::next_count(ctr.load());
                t.cnt.store(new);
                ctr.store(new);
            }
            t.cpu.store(CPU + 1);
            cookie::read(&t.cpu, &t.cnt)
        }
        Rule::LoserStoresCounter => {
            if t.cpu.load() != 0 {
                return cookie::read(&t.cpu, &t.cnt);
            }
            let new = cookie::next_count(ctr.load());
            t.cnt.cmpxchg(0, new);
            ctr.store(new);
            t.cpu.store(CPU + 1);
            cookie::read(&t.cpu, &t.cnt)
        }
    }
}

/// One kernel entry of task `t`: an IRQ and an NMI both ask for its
/// cookie.  Checks properties 1-3 and returns the cookie.
fn entry(rule: Rule, t: &Arc<TaskId>, ctr: &Arc<C>) -> u64 {
    let nmi = {
        let (t, ctr) = (t.clone(), ctr.clone());
        thread::spawn(move || get(rule, &t, &ctr))
    };
    // The IRQ runs on the model's main thread.
    let c_irq = get(rule, t, ctr);
    let c_nmi = nmi.join().unwrap();
    assert_eq!(c_irq, c_nmi, "two cookies in one entry");
    assert_ne!(c_irq, 0, "zero cookie");
    assert_eq!(cookie::cpu(c_irq), Some(CPU), "wrong CPU");
    let n = cookie::count(c_irq);
    assert_eq!(n & 1, 1, "even count");
    assert_eq!(ctr.load(), n, "counter is not the cookie's count");
    // Later requests of the entry read the same cookie.
    assert_eq!(cookie::read(&t.cpu, &t.cnt), c_irq);
    c_irq
}

/// Two entries on one CPU whose counter starts at `ctr0`: of the same task
/// (after a reset) if `same_task`, else of a second task.  Returns the
/// number of executions loom explored.
fn model(rule: Rule, ctr0: u32, same_task: bool) -> usize {
    let executions = std::sync::Arc::new(StdAtomic::new(0));
    let count = executions.clone();
    loom::model(move || {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ctr = Arc::new(C(AtomicU32::new(ctr0)));
        let t1 = Arc::new(TaskId::new());
        let c1 = entry(rule, &t1, &ctr);
        let t2 = if same_task {
            t1.reset();
            t1
        } else {
            Arc::new(TaskId::new())
        };
        let c2 = get(rule, &t2, &ctr);
        assert_eq!(ctr.load(), cookie::count(c2));
        assert_ne!(
            cookie::count(c1),
            cookie::count(c2),
            "two entries with one count"
        );
        assert_eq!(cookie::count(c2), cookie::next_count(cookie::count(c1)));
    });
    executions.load(std::sync::atomic::Ordering::SeqCst)
}

#[test]
fn irq_and_nmi_get_one_cookie_per_entry() {
    let t = std::time::Instant::now();
    let n = model(Rule::Real, 0, true);
    println!(
        "loom: cookie, IRQ vs NMI, two entries of a task: {n} executions, {:?}",
        t.elapsed()
    );
    assert!(n > 1);
}

/// The counter starts non-zero, two counts before its wrap: the first
/// task gets 0xffff_ffff, the second 1.
#[test]
fn second_task_on_the_cpu_gets_another_count() {
    let t = std::time::Instant::now();
    let n = model(Rule::Real, 0xffff_fffd, false);
    println!(
        "loom: cookie, IRQ vs NMI, two tasks on a CPU: {n} executions, {:?}",
        t.elapsed()
    );
    assert!(n > 1);
}

#[test]
#[should_panic(expected = "two cookies in one entry")]
fn mutated_load_store_claim_is_caught() {
    model(Rule::LoadStore, 0, true);
}

#[test]
#[should_panic(expected = "counter is not the cookie's count")]
fn mutated_loser_counter_store_is_caught() {
    model(Rule::LoserStoresCounter, 0, true);
}
