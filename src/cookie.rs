// SPDX-License-Identifier: GPL-2.0

//! The context cookie of the current kernel entry.
//!
//! The format is in [`crate::logic::cookie`].  The cookie lives in the
//! task (`unwind_info.id`, two 32-bit halves: `cpu` and `cnt`) from the
//! first request of a kernel entry until the return to user space, where
//! the C inline `unwind_reset_info()` zeroes it.  The count comes from a
//! per-CPU counter, `unwind_ctx_ctr`, defined in `shim.c`.
//!
//! Requests come from interrupts and NMIs on the task's own CPU, with
//! interrupts disabled.  An NMI may hit between any two steps below, so the
//! count is claimed with a compare-and-exchange from zero: the first
//! context to claim it also advances the per-CPU counter, the other one
//! adopts the claimed count.  Both then store the same CPU number, so the
//! cookie is the same for every caller of the entry.

use crate::logic::cookie;
use crate::task::Info;
use kernel::{
    bindings,
    cpu::CpuId,
    interrupt::LocalInterruptDisabled,
    percpu::PerCpu,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// The per-CPU count of the last cookie made on each CPU.
// SAFETY: `unwind_ctx_ctr` is `DEFINE_PER_CPU(u32, ...)` in shim.c, zero on
// every CPU at boot and never freed; `Atomic<u32>` has the layout of `u32`.
static CTX_CTR: PerCpu<Atomic<u32>> =
    unsafe { PerCpu::from_raw((&raw const bindings::unwind_ctx_ctr).cast_mut().cast()) };

/// The halves of `unwind_info.id`, as atomics.
fn halves(info: Info) -> (&'static Atomic<u32>, &'static Atomic<u32>) {
    let id = info.id();
    // SAFETY: `id` points into a live task's `unwind_info` (a union of two
    // `u32`s and a `u64`); the halves are aligned `u32`s that live as long
    // as the task, which outlives every caller here (the task is current,
    // or the caller holds it).  All accesses from Rust are atomic.
    unsafe {
        (
            Atomic::from_ptr(&raw mut (*id).__bindgen_anon_1.cpu),
            Atomic::from_ptr(&raw mut (*id).__bindgen_anon_1.cnt),
        )
    }
}

/// The current entry's cookie of the task `info`, made if it has none.
/// `info` must be current's.
pub(crate) fn get(info: Info, irq_off: &LocalInterruptDisabled) -> u64 {
    let (cpu, cnt) = halves(info);
    if cpu.load(Relaxed) != 0 {
        return read(info);
    }
    let ctr = CTX_CTR.this_cpu(irq_off);
    let new = cookie::next_count(ctr.load(Relaxed));
    if cnt.cmpxchg(0, new, Relaxed).is_ok() {
        ctr.store(new, Relaxed);
    }
    // Interrupts are off: the CPU is the one whose counter was used.
    cpu.store(CpuId::current().as_u32() + 1, Relaxed);
    read(info)
}

/// The task's cookie as it stands (0: none in this entry).
pub(crate) fn read(info: Info) -> u64 {
    let (cpu, cnt) = halves(info);
    let (cpu, cnt) = (cpu.load(Relaxed), cnt.load(Relaxed));
    match cpu.checked_sub(1) {
        Some(c) => cookie::compose(c, cnt),
        None => 0,
    }
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kunit_tests(unwind_rust_cookie)]
mod tests {
    use super::*;
    use kernel::interrupt::local_interrupt_disable;

    #[test]
    fn made_once_per_entry_and_unique() {
        // A task_info that is not current's: only its `id` is used here.
        let mut ti = bindings::unwind_task_info::default();
        // SAFETY: `ti` outlives every use of `info` in this test.
        let info = unsafe { Info::from_raw(&mut ti) };
        assert_eq!(read(info), 0);
        let irq = local_interrupt_disable();
        let c1 = get(info, &irq);
        assert_ne!(c1, 0);
        assert_eq!(
            crate::logic::cookie::cpu(c1),
            Some(CpuId::current().as_u32())
        );
        assert_eq!(crate::logic::cookie::count(c1) & 1, 1);
        // Same entry: same cookie.
        assert_eq!(get(info, &irq), c1);
        assert_eq!(read(info), c1);
        // Next entry (what unwind_reset_info() does): the next count of
        // this CPU's counter.
        // SAFETY: `info.id()` points into `ti`, which is alive.
        unsafe { (*info.id()).id = 0 };
        let c2 = get(info, &irq);
        drop(irq);
        assert_eq!(
            crate::logic::cookie::count(c2),
            crate::logic::cookie::next_count(crate::logic::cookie::count(c1))
        );
    }
}
