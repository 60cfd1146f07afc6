// SPDX-License-Identifier: GPL-2.0

//! Execution context queries, and interrupts disabled from any context.
//!
//! C header: [`include/linux/preempt.h`](srctree/include/linux/preempt.h),
//! [`include/linux/irqflags.h`](srctree/include/linux/irqflags.h)

use crate::interrupt::LocalInterruptDisabled;
use core::marker::PhantomData;

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

/// Whether local interrupts are disabled on the current CPU.
///
/// Always true in hardirq and NMI context.
#[inline]
pub fn irqs_disabled() -> bool {
    // SAFETY: `irqs_disabled()` only reads the CPU's interrupt flag.
    unsafe { crate::bindings::irqs_disabled() }
}

/// Call `f` with local interrupts disabled, from any context, NMI included.
///
/// If interrupts are already disabled (hardirq and NMI context, or a
/// caller that disabled them), `f` runs as it is and nothing is changed;
/// otherwise (task or softirq context) they are disabled for the call with
/// `local_irq_disable()` and enabled again after it.  Unlike
/// [`local_interrupt_disable`](crate::interrupt::local_interrupt_disable),
/// which must not be called in NMI context (it `WARN`s, and the flags it
/// saves in a per-CPU slot would clobber those of the code the NMI
/// interrupted), this never touches the interrupt state of an NMI.  And
/// it costs what C's `local_irq_save()` does: the region does not nest
/// (an interrupt-disabling lock taken inside `f` finds interrupts
/// disabled and leaves them so), so the nesting count
/// `local_interrupt_disable()` keeps in the preempt count and its per-CPU
/// slot are not needed.
///
/// # Examples
///
/// ```
/// use kernel::preempt::{irqs_disabled, with_irqs_disabled};
///
/// let was = irqs_disabled();
/// let inside = with_irqs_disabled(|_token| irqs_disabled());
/// assert!(inside);
/// assert_eq!(irqs_disabled(), was);
/// ```
// Always inlined: it is a branch around its caller's code.
#[inline(always)]
pub fn with_irqs_disabled<R>(f: impl FnOnce(&LocalInterruptDisabled) -> R) -> R {
    // Interrupts enabled means neither NMI nor hardirq context; already
    // disabled, nothing is changed.  (One call site of `f`, so that it is
    // inlined here.)
    let _disabled = if irqs_disabled() {
        None
    } else {
        Some(IrqsOffUntilDrop::new())
    };
    // SAFETY: Interrupts are disabled now, until `f` returns: either they
    // were, and this context is the only one that could enable them again
    // (an interrupt or NMI restores the flags it interrupted), or
    // `_disabled` disabled them and enables them only when it is dropped,
    // after `f` returned.  `f` must not enable them or sleep, as for any
    // holder of a `LocalInterruptDisabled`; an interrupt-disabling lock
    // taken and released inside `f` leaves them disabled (its
    // `local_interrupt_enable()` restores the flags it found, disabled).
    // Nothing here touches the interrupt state in NMI context.
    f(unsafe { LocalInterruptDisabled::assume_disabled() })
}

/// Local interrupts disabled by [`IrqsOffUntilDrop::new`] from a context
/// where they were enabled, and enabled again when it is dropped.
///
/// Neither `Send` nor `Sync`: it belongs to the CPU and the context that
/// created it.
struct IrqsOffUntilDrop(PhantomData<*mut ()>);

impl IrqsOffUntilDrop {
    /// Disable local interrupts; they must be enabled (task or softirq
    /// context, not NMI).
    #[inline(always)]
    fn new() -> Self {
        // SAFETY: `local_irq_disable()` can be called in any context but
        // NMI; interrupts are enabled here, so this is not NMI (nor
        // hardirq) context.  `drop()` enables them again, the state this
        // context had.
        unsafe { crate::bindings::local_irq_disable() };
        Self(PhantomData)
    }
}

impl Drop for IrqsOffUntilDrop {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: `new()` disabled interrupts in this context, where they
        // had been enabled; nothing in between may enable them (see
        // `with_irqs_disabled`).  Enabling them restores that state.
        unsafe { crate::bindings::local_irq_enable() };
    }
}
