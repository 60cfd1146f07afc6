// SPDX-License-Identifier: GPL-2.0

//! The cookie format and the request bitmask, single-threaded.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use unwind_logic::cookie::{self, Cell32};
use unwind_logic::mask::{self, MaskWord, Request, PENDING, RESERVED, USED};

mask_word!(W, AtomicUsize);
cell32!(C, AtomicU32);

/// A task's `unwind_task_id` halves: (cpu, cnt).
fn task_id() -> (C, C) {
    (C(AtomicU32::new(0)), C(AtomicU32::new(0)))
}

#[test]
fn cookie_format() {
    // The layout upstream's perf tool sees: 0x<cnt>000000<cpu+1>.
    assert_eq!(cookie::compose(0, 9), 0x9_0000_0001);
    assert_eq!(cookie::compose(3, 0xb), 0xb_0000_0004);
    assert_eq!(cookie::cpu(0xb_0000_0004), Some(3));
    assert_eq!(cookie::count(0xb_0000_0004), 0xb);
    assert_eq!(cookie::cpu(0), None);
}

#[test]
fn cookie_counts_are_odd_unique_and_never_zero() {
    let mut seen = std::collections::HashSet::new();
    let mut c = 0u32;
    for _ in 0..100_000 {
        c = cookie::next_count(c);
        assert_eq!(c & 1, 1);
        assert!(seen.insert(c));
        assert_ne!(cookie::compose(7, c), 0);
    }
    assert_eq!(cookie::next_count(0), 3);
    assert_eq!(cookie::next_count(3), 5);
    // Wrap-around stays odd and non-zero.
    assert_eq!(cookie::next_count(u32::MAX), 1);
    assert_eq!(cookie::next_count(u32::MAX - 1), 1);
}

#[test]
fn cookie_get_claims_once_per_entry() {
    let (cpu, cnt) = task_id();
    let ctr = C(AtomicU32::new(0));
    // No cookie before the first request of the entry.
    assert_eq!(cookie::read(&cpu, &cnt), 0);
    let c1 = cookie::get(&cpu, &cnt, || (&ctr, 3));
    assert_eq!(c1, cookie::compose(3, 3));
    assert_eq!(cookie::cpu(c1), Some(3));
    assert_eq!(cookie::count(c1), cookie::next_count(0));
    // The CPU's counter advanced to the claimed count; the task holds the
    // CPU plus one and the count.
    assert_eq!(ctr.load(), 3);
    assert_eq!((cpu.load(), cnt.load()), (4, 3));
    // Same entry: same cookie, the counter is not touched again (nor is
    // the CPU asked for: the cookie is the entry's).
    assert_eq!(cookie::get(&cpu, &cnt, || (&ctr, 3)), c1);
    assert_eq!(
        cookie::get(&cpu, &cnt, || -> (&C, u32) {
            panic!("the CPU asked for again")
        }),
        c1
    );
    assert_eq!(cookie::read(&cpu, &cnt), c1);
    assert_eq!(ctr.load(), 3);
    // Next entry (unwind_reset_info() zeroes the id): the next count.
    cpu.store(0);
    cnt.store(0);
    let c2 = cookie::get(&cpu, &cnt, || (&ctr, 3));
    assert_eq!(c2, cookie::compose(3, 5));
    assert_eq!(ctr.load(), 5);
    // Another task on the same CPU: the count after that.
    let (cpu2, cnt2) = task_id();
    assert_eq!(
        cookie::get(&cpu2, &cnt2, || (&ctr, 3)),
        cookie::compose(3, 7)
    );
    // Another CPU's counter is independent.
    let (cpu3, cnt3) = task_id();
    let ctr1 = C(AtomicU32::new(0));
    assert_eq!(
        cookie::get(&cpu3, &cnt3, || (&ctr1, 1)),
        cookie::compose(1, 3)
    );
    assert_eq!(ctr.load(), 7);
}

#[test]
fn cookie_get_adopts_a_claimed_count() {
    // An NMI that hits after an interrupted context claimed the count but
    // before it stored the CPU: the count is adopted, the counter (already
    // advanced by the claimer) is left alone.
    let (cpu, cnt) = task_id();
    let ctr = C(AtomicU32::new(9));
    cnt.store(9);
    assert_eq!(cookie::get(&cpu, &cnt, || (&ctr, 2)), cookie::compose(2, 9));
    assert_eq!(ctr.load(), 9);
    // The same with a counter that another claim moved on meanwhile.
    let (cpu, cnt) = task_id();
    cnt.store(9);
    let ctr = C(AtomicU32::new(11));
    assert_eq!(cookie::get(&cpu, &cnt, || (&ctr, 2)), cookie::compose(2, 9));
    assert_eq!(ctr.load(), 11);
}

#[test]
fn cookie_counter_wraps_to_an_odd_count() {
    let (cpu, cnt) = task_id();
    let ctr = C(AtomicU32::new(u32::MAX));
    let c = cookie::get(&cpu, &cnt, || (&ctr, 0));
    assert_eq!(c, cookie::compose(0, 1));
    assert_ne!(c, 0);
    assert_eq!(ctr.load(), 1);
}

#[test]
fn request_states() {
    let m = W(AtomicUsize::new(0));
    let (a, b) = (1 << 2, 1 << 3);
    assert_eq!(mask::request(&m, a), Request::QueueTaskWork);
    assert_eq!(m.load(), PENDING | a);
    assert_eq!(mask::request(&m, a), Request::AlreadyRequested);
    assert_eq!(mask::request(&m, b), Request::Joined);
    assert!(mask::is_pending(&m));
    // Return to user is refused while the task_work is pending.
    assert!(!common::unwind_reset_info(&m));
    assert_eq!(mask::take_pending(&m), Some(a | b));
    assert_eq!(mask::take_pending(&m), None);
    mask::mark_used(&m);
    // After the callbacks ran, the same entry answers "already".
    assert_eq!(mask::request(&m, a), Request::AlreadyRequested);
    assert!(common::unwind_reset_info(&m));
    assert_eq!(m.load(), 0);
    assert!(!common::unwind_reset_info(&m));
    // New entry: queue again.
    assert_eq!(mask::request(&m, b), Request::QueueTaskWork);
    mask::queue_failed(&m);
    assert_eq!(m.load(), 0);
    assert_eq!(m.load() & USED, 0);
}

#[test]
fn cancel_clears_only_its_bit() {
    let m = W(AtomicUsize::new(0));
    let (a, b) = (1 << 2, 1 << 63);
    mask::request(&m, a);
    mask::request(&m, b);
    mask::cancel(&m, b);
    assert_eq!(mask::take_pending(&m), Some(a));
}

#[test]
fn bit_registry() {
    let mut used = RESERVED;
    let mut bits = vec![];
    while let Some(b) = mask::alloc_bit(&mut used) {
        bits.push(b);
    }
    // BITS_PER_LONG minus the two reserved bits.
    assert_eq!(bits.len(), usize::BITS as usize - 2);
    assert_eq!(bits[0], 2);
    assert_eq!(used, usize::MAX);
    mask::free_bit(&mut used, 5);
    assert_eq!(mask::alloc_bit(&mut used), Some(5));
    // Reserved bits are never freed.
    mask::free_bit(&mut used, 0);
    mask::free_bit(&mut used, 1);
    mask::free_bit(&mut used, 99);
    assert_eq!(used, usize::MAX);
}
