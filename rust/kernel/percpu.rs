// SPDX-License-Identifier: GPL-2.0

//! Per-CPU variables defined in C.
//!
//! C header: [`include/linux/percpu-defs.h`](srctree/include/linux/percpu-defs.h)
//!
//! A variable defined with `DEFINE_PER_CPU()` has one instance per possible
//! CPU.  Its address is a `__percpu` pointer, an offset into every CPU's
//! per-CPU area, not the address of any instance: it is a [`PerCpuPtr`],
//! never a `*mut T`, and the symbol itself is declared with
//! [`declare_extern_per_cpu!`] as an [`ExternStaticPerCpuSymbol`], which
//! cannot be read (bindgen would declare it as a plain `T` that can).
//! [`StaticPerCpu::this_cpu`] gives the instance of the CPU the caller runs
//! on, for as long as interrupts stay disabled (so the caller cannot
//! migrate to another CPU).  Interrupt and NMI handlers on the same CPU may
//! still use the same instance, so `T` must be [`Sync`]: use atomics for
//! values they also change.
//!
//! The names and the pointer type follow the in-flight `kernel::percpu`
//! series (Mitchell Levy, "rust: percpu: introduce a rust API for static
//! per-CPU variables", v4, November 2025): [`PerCpuPtr`],
//! [`ExternStaticPerCpuSymbol`], [`declare_extern_per_cpu!`],
//! [`StaticPerCpu`].  What differs, and why the series' accessors do not
//! serve here:
//!
//! - access is by `&T` with `T: Sync` under a [`LocalInterruptDisabled`],
//!   not by the series' `CheckedPerCpu::get()` under a preemption guard:
//!   the series lets a `Cell` or `RefCell` be changed through a shared
//!   reference with only preemption disabled, which an interrupt or NMI on
//!   the same CPU, using the same instance, would race with; and `get()`
//!   takes `&mut self`, which a `static` cannot give;
//! - [`PerCpuPtr::get_ptr`] is C's `raw_cpu_ptr()` (a helper, inlined with
//!   `CONFIG_RUST_INLINE_HELPERS`), for every architecture, where the
//!   series reads `this_cpu_off` with x86-64 assembly.
//!
//! When the series is merged, this module is replaced by it, with the
//! `T: Sync`, interrupts-disabled accessor added to it.
//!
//! # Examples
//!
//! ```ignore
//! use kernel::{
//!     interrupt::with_local_interrupt_disabled,
//!     percpu::{ExternStaticPerCpuSymbol, StaticPerCpu},
//!     sync::atomic::{Atomic, Relaxed},
//! };
//!
//! // C: DEFINE_PER_CPU(u32, my_counter);
//! kernel::declare_extern_per_cpu!(my_counter: u32);
//!
//! // SAFETY: `my_counter` is a `DEFINE_PER_CPU(u32, ...)`, zero at boot,
//! // never freed; `Atomic<u32>` has the layout of `u32`.
//! static COUNTER: StaticPerCpu<Atomic<u32>> =
//!     unsafe { StaticPerCpu::new(ExternStaticPerCpuSymbol::ptr(&raw const my_counter).cast()) };
//!
//! // From any context, NMI included.
//! let n = with_local_interrupt_disabled(|irq_off| COUNTER.this_cpu(irq_off).fetch_add(1, Relaxed));
//! ```

use crate::{bindings, interrupt::LocalInterruptDisabled};
use core::{marker::PhantomData, mem::MaybeUninit};

/// A `__percpu` pointer: an offset into every CPU's per-CPU area.
///
/// Not a smart pointer and not dereferenceable: [`PerCpuPtr::get_ptr`]
/// gives the address of the current CPU's instance.
#[repr(transparent)]
pub struct PerCpuPtr<T>(*mut MaybeUninit<T>);

impl<T> PerCpuPtr<T> {
    /// Makes a [`PerCpuPtr`] from a raw `__percpu` pointer.
    ///
    /// Using it is only meaningful while `ptr` is a live per-CPU
    /// allocation, sized and aligned for a `T`; the functions that
    /// dereference it require that.
    #[inline]
    pub const fn new(ptr: *mut MaybeUninit<T>) -> Self {
        Self(ptr)
    }

    /// The same per-CPU allocation, as one of type `U`.
    #[inline]
    pub const fn cast<U>(self) -> PerCpuPtr<U> {
        PerCpuPtr(self.0.cast())
    }

    /// The address of the current CPU's instance (C's `raw_cpu_ptr()`).
    ///
    /// Unless the caller cannot migrate (preemption or interrupts
    /// disabled), the CPU may have changed by the time the pointer is used.
    #[inline]
    pub fn get_ptr(&self) -> *mut MaybeUninit<T> {
        // SAFETY: `raw_cpu_ptr()` only adds the current CPU's per-CPU
        // offset to the pointer; it dereferences nothing.
        unsafe { bindings::raw_cpu_ptr(self.0.cast()).cast() }
    }
}

impl<T> Clone for PerCpuPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for PerCpuPtr<T> {}

// SAFETY: A `__percpu` pointer names one instance on each CPU; sending it
// to another thread makes it name that thread's CPU's instance.
unsafe impl<T> Send for PerCpuPtr<T> {}
// SAFETY: As above: each user reaches its own CPU's instance.
unsafe impl<T> Sync for PerCpuPtr<T> {}

/// A per-CPU variable defined in C, as declared by
/// [`declare_extern_per_cpu!`].
///
/// The symbol is an offset, not an object: its field is private, so it
/// cannot be read; [`ExternStaticPerCpuSymbol::ptr`] makes a [`PerCpuPtr`]
/// of its address.
#[repr(transparent)]
pub struct ExternStaticPerCpuSymbol<T>(T);

impl<T> ExternStaticPerCpuSymbol<T> {
    /// The [`PerCpuPtr`] of the per-CPU variable at `ptr`
    /// (`&raw const symbol`).
    #[inline]
    pub const fn ptr(ptr: *const Self) -> PerCpuPtr<T> {
        PerCpuPtr::new(ptr.cast_mut().cast())
    }
}

/// Declares a per-CPU variable defined in C (`DEFINE_PER_CPU(type, name)`)
/// as an [`ExternStaticPerCpuSymbol`].
#[macro_export]
macro_rules! declare_extern_per_cpu {
    ($id:ident: $ty:ty) => {
        extern "C" {
            #[allow(non_upper_case_globals)]
            static $id: $crate::percpu::ExternStaticPerCpuSymbol<$ty>;
        }
    };
}

/// A statically allocated per-CPU variable with instances of type `T`.
///
/// # Invariants
///
/// `ptr` is a [`PerCpuPtr`] to a `T` that is valid and initialised on
/// every possible CPU for the rest of the kernel's life.
pub struct StaticPerCpu<T: Sync> {
    ptr: PerCpuPtr<T>,
    _t: PhantomData<T>,
}

impl<T: Sync> StaticPerCpu<T> {
    /// Name the per-CPU variable at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a per-CPU variable of type `T` (a
    /// `DEFINE_PER_CPU(T, var)`, or the result of `alloc_percpu(T)`),
    /// initialised on every possible CPU and never freed.
    pub const unsafe fn new(ptr: PerCpuPtr<T>) -> Self {
        // INVARIANT: Guaranteed by the caller.
        Self {
            ptr,
            _t: PhantomData,
        }
    }

    /// The instance of the current CPU.
    ///
    /// Interrupts are disabled for at least as long as the reference lives,
    /// so the current CPU does not change.
    #[inline]
    pub fn this_cpu<'a>(&'a self, _irq_off: &'a LocalInterruptDisabled) -> &'a T {
        // SAFETY: By the type invariant the per-CPU variable is valid and
        // initialised on every CPU, so the current CPU's instance is an
        // initialised `T` that lives forever, and others only ever get
        // shared references to it, with `T: Sync`.  (That it is this CPU's
        // instance for all of `'a`, as interrupts stay off, is what makes
        // it useful, not sound.)
        unsafe { &*self.ptr.get_ptr().cast::<T>() }
    }
}
