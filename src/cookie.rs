// SPDX-License-Identifier: GPL-2.0

//! The context cookie of the current kernel entry.
//!
//! The format and the claim rule are in [`crate::logic::cookie`] (and
//! model-checked on the host).  The cookie lives in the task
//! (`unwind_info.id`, two 32-bit halves: `cpu` and `cnt`) from the first
//! request of a kernel entry until the return to user space, where the C
//! inline `unwind_reset_info()` zeroes it.  The count comes from a per-CPU
//! counter, `unwind_ctx_ctr`, defined in `shim.c`.
//!
//! Requests come from the task and from interrupts and NMIs on its CPU,
//! always with interrupts disabled, so the task stays on the CPU whose
//! counter it uses and only an NMI can run between two steps of the claim.

use crate::logic::cookie::{self as rule, Cell32};
use crate::task::{CurrentInfo, Info};
use kernel::{
    cpu::CpuId,
    interrupt::LocalInterruptDisabled,
    percpu::{ExternStaticPerCpuSymbol, StaticPerCpu},
    sync::atomic::{Atomic, Relaxed},
};

// `DEFINE_PER_CPU(u32, unwind_ctx_ctr)` in shim.c (hidden from bindgen,
// which would make it a plain `u32`).
kernel::declare_extern_per_cpu!(unwind_ctx_ctr: u32);

/// The per-CPU count of the last cookie made on each CPU.
// SAFETY: `unwind_ctx_ctr` is `DEFINE_PER_CPU(u32, ...)` in shim.c, zero on
// every CPU at boot and never freed; `Atomic<u32>` has the layout of `u32`.
static CTX_CTR: StaticPerCpu<Atomic<u32>> =
    unsafe { StaticPerCpu::new(ExternStaticPerCpuSymbol::ptr(&raw const unwind_ctx_ctr).cast()) };

/// The cells are only shared between a task and the interrupts and NMIs
/// of its own CPU (and the task itself after migrating, which implies full
/// barriers): relaxed atomics are enough, as upstream's plain accesses and
/// `try_cmpxchg()` are.
impl Cell32 for Atomic<u32> {
    #[inline]
    fn load(&self) -> u32 {
        Atomic::load(self, Relaxed)
    }
    #[inline]
    fn store(&self, v: u32) {
        Atomic::store(self, v, Relaxed)
    }
    #[inline]
    fn cmpxchg(&self, old: u32, new: u32) -> bool {
        Atomic::cmpxchg(self, old, new, Relaxed).is_ok()
    }
}

/// The halves of `unwind_info.id`, as atomics, for as long as `'a`.
fn halves<'a>(info: Info<'a>) -> (&'a Atomic<u32>, &'a Atomic<u32>) {
    let id = info.id();
    // SAFETY: `id` points into the `unwind_info` (a union of two `u32`s and
    // a `u64`) of a task alive for `'a` (type invariant of `Info`); the
    // halves are aligned `u32`s.  Rust accesses them only atomically.  The
    // C inline `unwind_reset_info()` zeroes the whole `id` with a plain
    // store on the way back to user space; that runs on the task's own CPU
    // with interrupts off, and the only other users of the cells (the
    // task, and interrupts and NMIs of that CPU) never overlap with it: an
    // NMI runs to completion between two of the task's instructions.
    unsafe {
        (
            Atomic::from_ptr(&raw mut (*id).__bindgen_anon_1.cpu),
            Atomic::from_ptr(&raw mut (*id).__bindgen_anon_1.cnt),
        )
    }
}

/// The current entry's cookie of the current task, made if it has none.
pub(crate) fn get(current: CurrentInfo<'_>, irq_off: &LocalInterruptDisabled) -> u64 {
    get_for(current.info(), irq_off)
}

/// [`get`] on any `unwind_task_info` that only this context uses:
/// `rule::get` itself, the function loom checks on the host.
fn get_for(info: Info<'_>, irq_off: &LocalInterruptDisabled) -> u64 {
    let (cpu, cnt) = halves(info);
    // Interrupts are off: the CPU cannot change while its counter is used.
    rule::get(cpu, cnt, || {
        (CTX_CTR.this_cpu(irq_off), CpuId::current().as_u32())
    })
}

/// The task's cookie as it stands (0: none in this entry).
pub(crate) fn read(current: CurrentInfo<'_>) -> u64 {
    let (cpu, cnt) = halves(current.info());
    rule::read(cpu, cnt)
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(unwind_rust_cookie)]
mod tests {
    use super::*;
    use kernel::interrupt::with_local_interrupt_disabled;

    #[test]
    fn made_once_per_entry_and_unique() {
        // A task_info that is not current's: only its `id` is used here.
        let mut ti = kernel::bindings::unwind_task_info::default();
        // SAFETY: `ti` outlives every use of `info` in this test.
        let info = unsafe { Info::from_raw(&mut ti) };
        let (cpu, cnt) = halves(info);
        assert_eq!(rule::read(cpu, cnt), 0);
        let (c1, again, c2, this) = with_local_interrupt_disabled(|irq| {
            let c1 = get_for(info, irq);
            let again = get_for(info, irq);
            // Next entry (what unwind_reset_info() does): the next count
            // of this CPU's counter.
            cpu.store(0, Relaxed);
            cnt.store(0, Relaxed);
            let c2 = get_for(info, irq);
            (c1, again, c2, CpuId::current().as_u32())
        });
        assert_ne!(c1, 0);
        assert_eq!(rule::cpu(c1), Some(this));
        assert_eq!(rule::count(c1) & 1, 1);
        // Same entry: same cookie.
        assert_eq!(again, c1);
        assert_eq!(rule::count(c2), rule::next_count(rule::count(c1)));
        assert_eq!(rule::read(cpu, cnt), c2);
    }
}
