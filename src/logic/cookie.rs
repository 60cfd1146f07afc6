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

/// A 32-bit cell of the cookie state: a half of the task's
/// `unwind_task_id`, or a CPU's counter (`u32`s written with the kernel's
/// atomics; `AtomicU32` or loom's on the host).
pub trait Cell32 {
    /// Read the value.
    fn load(&self) -> u32;
    /// Write the value.
    fn store(&self, v: u32);
    /// Replace `old` with `new` if the cell holds `old`, atomically;
    /// whether it did.
    fn cmpxchg(&self, old: u32, new: u32) -> bool;
}

/// A borrowed cell is a cell (a CPU's counter, as [`get`]'s `this_cpu`
/// hands it out).
impl<T: Cell32 + ?Sized> Cell32 for &T {
    #[inline]
    fn load(&self) -> u32 {
        (**self).load()
    }
    #[inline]
    fn store(&self, v: u32) {
        (**self).store(v)
    }
    #[inline]
    fn cmpxchg(&self, old: u32, new: u32) -> bool {
        (**self).cmpxchg(old, new)
    }
}

/// The task's cookie as it stands: 0 if it has none in this kernel entry.
#[inline]
pub fn read(cpu: &impl Cell32, cnt: &impl Cell32) -> u64 {
    with_cpu(cpu.load(), cnt)
}

/// The cookie whose `cpu` half was read as `cpu1` (the CPU number plus
/// one, so 0: no cookie): that half as it is in the low 32 bits, the
/// count read now in the high ones (what [`compose`] makes of them).
#[inline]
fn with_cpu(cpu1: u32, cnt: &impl Cell32) -> u64 {
    if cpu1 == 0 {
        return 0;
    }
    (u64::from(cnt.load()) << 32) | u64::from(cpu1)
}

/// The cookie of the task's current kernel entry (`cpu`, `cnt`: the halves
/// of its `unwind_task_id`), made if the task has none yet from the counter
/// and number of the CPU it runs on, which `this_cpu` gives (asked for only
/// then: the common case, a cookie made earlier in the entry, is two loads).
///
/// Called on the task's own CPU by the task or by an interrupt or NMI that
/// hit it, with interrupts disabled, so only an NMI can run between two
/// steps, and only the task's `unwind_info` and this CPU's counter are
/// shared with it.  The count is claimed with one compare-and-exchange from
/// zero: whoever claims it also advances the CPU's counter; a context that
/// loses the claim (an IRQ interrupted by an NMI that claimed first, or an
/// NMI that hit after the IRQ's claim but before its counter update)
/// adopts the claimed count.  Both then store the same CPU, so every
/// caller of one entry gets one cookie, and no two entries on a CPU get
/// the same count (until the 31-bit count wraps).  The kernel runs this
/// function as it is; the host model-checks it with loom.
#[inline]
pub fn get<C: Cell32>(
    cpu: &impl Cell32,
    cnt: &impl Cell32,
    this_cpu: impl FnOnce() -> (C, u32),
) -> u64 {
    // One load of the `cpu` half decides and is the cookie's low half: a
    // set half stays as it is until the entry ends, and so does the count
    // stored before it.
    let cpu1 = cpu.load();
    if cpu1 != 0 {
        return with_cpu(cpu1, cnt);
    }
    let (ctr, this) = this_cpu();
    claim(cpu, cnt, &ctr, this);
    read(cpu, cnt)
}

/// The making step of [`get`], for a task whose `cpu` half was found 0:
/// claim a count or adopt the one claimed in between, then store the CPU.
#[inline]
fn claim(cpu: &impl Cell32, cnt: &impl Cell32, ctr: &impl Cell32, this_cpu: u32) {
    let new = next_count(ctr.load());
    if cnt.cmpxchg(0, new) {
        ctr.store(new);
    }
    // Interrupts are off: the CPU is the one whose counter was used.
    cpu.store(this_cpu.wrapping_add(1));
}
