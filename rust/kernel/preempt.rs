// SPDX-License-Identifier: GPL-2.0

//! Execution context queries.
//!
//! C header: [`include/linux/preempt.h`](srctree/include/linux/preempt.h)

/// Whether the current CPU is handling a non-maskable interrupt.
///
/// Code that may be called from NMI context uses this to choose what it
/// may do (no locks, only NMI-safe atomics, `task_work` with
/// `TWA_NMI_CURRENT`).
#[inline]
pub fn in_nmi() -> bool {
    // SAFETY: `in_nmi()` only reads the current CPU's preempt count.
    unsafe { crate::bindings::in_nmi() }
}
