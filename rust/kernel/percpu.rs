// SPDX-License-Identifier: GPL-2.0

//! Per-CPU variables defined in C.
//!
//! C header: [`include/linux/percpu-defs.h`](srctree/include/linux/percpu-defs.h)
//!
//! A variable defined with `DEFINE_PER_CPU()` (or allocated with
//! `alloc_percpu()` and never freed) has one instance per possible CPU.
//! [`PerCpu`] names such a variable; [`PerCpu::this_cpu`] gives the
//! instance of the CPU the caller runs on, for as long as interrupts stay
//! disabled (so the caller cannot migrate to another CPU).  Interrupt and
//! NMI handlers on the same CPU may still use the same instance, so `T`
//! must be [`Sync`]: use atomics for values they also change.
//!
//! # Examples
//!
//! ```ignore
//! use kernel::{percpu::PerCpu, preempt::with_irqs_disabled, sync::atomic::{Atomic, Relaxed}};
//!
//! // C: DEFINE_PER_CPU(u32, my_counter);
//! // SAFETY: `my_counter` is a `DEFINE_PER_CPU(u32, ...)`, zero at boot,
//! // never freed; `Atomic<u32>` has the layout of `u32`.
//! static COUNTER: PerCpu<Atomic<u32>> =
//!     unsafe { PerCpu::from_raw((&raw const bindings::my_counter).cast_mut().cast()) };
//!
//! // From any context, NMI included.
//! let n = with_irqs_disabled(|irq_off| COUNTER.this_cpu(irq_off).fetch_add(1, Relaxed));
//! ```

use crate::{bindings, interrupt::LocalInterruptDisabled};
use core::{ffi::c_void, marker::PhantomData};

/// A per-CPU variable with instances of type `T`.
///
/// # Invariants
///
/// `ptr` is a `__percpu` pointer to a `T` that is valid and initialised on
/// every possible CPU for the rest of the kernel's life.
pub struct PerCpu<T: Sync> {
    ptr: *mut c_void,
    _t: PhantomData<T>,
}

// SAFETY: `PerCpu` only hands out shared references to `T: Sync`, each to
// the instance of the CPU the caller runs on.
unsafe impl<T: Sync> Sync for PerCpu<T> {}
// SAFETY: The pointer is a per-CPU offset, meaningful on every CPU.
unsafe impl<T: Sync> Send for PerCpu<T> {}

impl<T: Sync> PerCpu<T> {
    /// Name the per-CPU variable at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `__percpu` address of a variable of type `T`
    /// (`&var` of a `DEFINE_PER_CPU(T, var)`, or the result of
    /// `alloc_percpu(T)`), initialised on every possible CPU and never
    /// freed.
    pub const unsafe fn from_raw(ptr: *mut T) -> Self {
        // INVARIANT: Guaranteed by the caller.
        Self {
            ptr: ptr.cast(),
            _t: PhantomData,
        }
    }

    /// The instance of the current CPU.
    ///
    /// Interrupts are disabled for at least as long as the reference lives,
    /// so the current CPU does not change.
    #[inline]
    pub fn this_cpu<'a>(&'a self, _irq_off: &'a LocalInterruptDisabled) -> &'a T {
        // SAFETY: By the type invariant `ptr` is a valid `__percpu` pointer,
        // so `raw_cpu_ptr()` gives an initialised instance of `T` that
        // lives forever, and others only ever get shared references to it,
        // with `T: Sync`.  (That it is this CPU's instance for all of `'a`,
        // as interrupts stay off, is what makes it useful, not sound.)
        unsafe { &*bindings::raw_cpu_ptr(self.ptr).cast::<T>() }
    }
}
