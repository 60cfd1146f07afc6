// SPDX-License-Identifier: GPL-2.0

//! Execution context queries.
//!
//! C header: [`include/linux/preempt.h`](srctree/include/linux/preempt.h)
//!
//! Disabling interrupts is [`crate::interrupt`]'s: [`local_interrupt_disable`], and, from code
//! that may run in NMI context, [`with_local_interrupt_disabled`].
//!
//! [`local_interrupt_disable`]: crate::interrupt::local_interrupt_disable
//! [`with_local_interrupt_disabled`]: crate::interrupt::with_local_interrupt_disabled

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
