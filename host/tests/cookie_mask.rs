// SPDX-License-Identifier: GPL-2.0

//! The cookie format and the request bitmask, single-threaded.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use unwind_logic::cookie;
use unwind_logic::mask::{self, MaskWord, Request, PENDING, RESERVED, USED};

mask_word!(W, AtomicUsize);

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
