// SPDX-License-Identifier: GPL-2.0

//! The context cookie: a system-wide unique, never-zero name for one kernel
//! entry of one task, under which its user stack trace is reported.
//!
//! Layout (the ABI of upstream's `union unwind_task_id` on little-endian
//! 64-bit): the low 32 bits are the CPU number plus one, so never zero; the
//! high 32 bits are a per-CPU count, advanced by two and with the least
//! significant bit set, for each new cookie made on that CPU.  A cookie is
//! made on demand, by the first request of a kernel entry, and kept for the
//! whole entry.

/// Compose a cookie from the CPU it was made on and its count.
#[inline]
pub const fn compose(cpu: u32, cnt: u32) -> u64 {
    ((cnt as u64) << 32) | (cpu as u64 + 1) & 0xffff_ffff
}

/// The CPU number a cookie was made on.
#[inline]
pub const fn cpu(cookie: u64) -> Option<u32> {
    (cookie as u32).checked_sub(1)
}

/// The per-CPU count of a cookie.
#[inline]
pub const fn count(cookie: u64) -> u32 {
    (cookie >> 32) as u32
}

/// The count for the next cookie on a CPU whose last count was `prev`:
/// advanced by two and odd, so that it is never zero (a zero count means
/// "no cookie yet" in the task).
#[inline]
pub const fn next_count(prev: u32) -> u32 {
    prev.wrapping_add(2) | 1
}
