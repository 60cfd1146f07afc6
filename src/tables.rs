// SPDX-License-Identifier: GPL-2.0

//! Unwind tables for the deferred walk (`CONFIG_UNWIND_USER_RUST_TABLES`):
//! which object maps a pc, where its `.eh_frame_hdr` is, the switch and the
//! counters.
//!
//! Only the faultable walk (`unwind_user_faultable()`, in task_work) uses
//! tables: finding an object takes the mmap lock, and the tables are read
//! with `copy_from_user()`, which may fault pages in.  The walk itself and
//! the table format are [`crate::logic::walk::walk_tables`] and
//! [`crate::logic::cfi`], shared with the host tests.
//!
//! An object is found from the VMA of the pc: a file mapping's ELF header is
//! at the start of the same file's mapping of offset 0, which lies
//! `vm_pgoff` pages below (the ELF loader and the dynamic loader map every
//! segment at its file offset plus one bias); the vDSO's is at its base
//! (`mm->context.vdso`).  [`crate::logic::elf::locate`] reads the ELF and
//! program headers there, from user memory, for `PT_GNU_EH_FRAME`.  Every
//! byte comes from the task's memory, which the task controls: it is only
//! ever parsed by the bounded, fault-tolerant logic.
//!
//! Lookups are remembered per walk, per mapping ([`MEMO`] of them): a
//! stack passes through few objects, so a walk does one lookup per object
//! it meets, not one per frame (the `lookups` counter against
//! `table_frames` shows it).  Nothing is kept between walks, so nothing
//! needs invalidating on munmap or exec.
//!
//! Off at boot unless `unwind_user_tables=1`; debugfs
//! `unwind_user/tables` switches it, `unwind_user/stats` has the counters
//! (`shim.c`).

use crate::logic::{
    cfi::{self, Cause},
    elf,
    walk::{Stop, TableStats, Tables, WordSize},
};
use crate::walk::CurrentUserMemory;
use kernel::{
    bindings,
    mm::MmWithUser,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Lookups remembered by a walk.
pub(crate) const MEMO: usize = 4;

/// Whether deferred walks use tables now (`unwind_user_tables`).
pub(crate) fn enabled() -> bool {
    // SAFETY: A bool written by debugfs and the boot parameter; a racy
    // read gives either value, as READ_ONCE() would.
    unsafe { core::ptr::read_volatile(&raw const bindings::unwind_user_tables) }
}

/// A remembered lookup: the VMA `[start, end)` and its object's parsed
/// hdr, `None` if it has none.
#[derive(Clone, Copy)]
struct Memo {
    start: u64,
    end: u64,
    hdr: Option<cfi::Hdr>,
}

/// The tables of the objects of current's address space, as one walk
/// meets them.
pub(crate) struct TaskTables<'a> {
    mm: &'a MmWithUser,
    ws: WordSize,
    memo: [Option<Memo>; MEMO],
    next: usize,
    lookups: u32,
    no_object: u32,
    no_eh_frame: u32,
}

impl<'a> TaskTables<'a> {
    /// The tables of `mm`, the address space of current, whose word size
    /// is `ws`.
    pub(crate) fn new(mm: &'a MmWithUser, ws: WordSize) -> Self {
        TaskTables {
            mm,
            ws,
            memo: [None; MEMO],
            next: 0,
            lookups: 0,
            no_object: 0,
            no_eh_frame: 0,
        }
    }

    /// The VMA of `pc` and where its object's ELF header is mapped, if it
    /// is a file mapping or the vDSO; `None` if `pc` is not mapped.
    fn object_of(&self, pc: usize) -> Option<(u64, u64, Option<u64>)> {
        let mm = self.mm.mmap_read_lock();
        let vma = mm.vma_lookup(pc)?;
        let (start, end) = (vma.start(), vma.end());
        // SAFETY: The vma is valid and its fields stable while the mmap
        // read lock is held (the guard outlives this use).
        let (file, pgoff) = unsafe { ((*vma.as_ptr()).vm_file, (*vma.as_ptr()).vm_pgoff) };
        let base = if !file.is_null() {
            pgoff
                .checked_mul(bindings::PAGE_SIZE)
                .and_then(|off| start.checked_sub(off))
                .and_then(|base| {
                    let first = mm.vma_lookup(base)?;
                    // SAFETY: As above.
                    let (f, o) = unsafe { ((*first.as_ptr()).vm_file, (*first.as_ptr()).vm_pgoff) };
                    (first.start() == base && f == file && o == 0).then_some(base)
                })
        } else {
            // SAFETY: `context.vdso` is set at exec and stays while the
            // mm is in use; reading it under the mmap lock is not a race.
            let vdso = unsafe { (*self.mm.as_raw()).__bindgen_anon_1.context.vdso } as usize;
            (vdso == start).then_some(start)
        };
        Some((start as u64, end as u64, base.map(|b| b as u64)))
    }

    /// Count this walk's outcome (`stats`, the lookups, how it ended).
    pub(crate) fn account(&self, stats: &TableStats, stop: Stop) {
        let add = |i: usize, v: u64| {
            if let Some(c) = STATS.get(i) {
                c.add(v, Relaxed);
            }
        };
        add(WALKS, 1);
        add(TABLE_FRAMES, stats.table_frames.into());
        add(FP_FRAMES, stats.fp_frames.into());
        add(NO_TABLES, stats.no_tables.into());
        add(READS, stats.reads.into());
        add(LOOKUPS, self.lookups.into());
        add(NO_OBJECT, self.no_object.into());
        add(NO_EH_FRAME, self.no_eh_frame.into());
        add(BUDGET_EXHAUSTED, stats.budget_exhausted.into());
        add(END_OF_STACK, (stop == Stop::EndOfStack).into());
        add(FP_UNKNOWN, (stop == Stop::FpUnknown).into());
        for (i, &n) in stats.refused.iter().enumerate() {
            add(REFUSED + i, n.into());
        }
    }
}

impl Tables for TaskTables<'_> {
    fn find(&mut self, pc: u64) -> Option<cfi::Hdr> {
        if let Some(m) = self
            .memo
            .iter()
            .flatten()
            .find(|m| m.start <= pc && pc < m.end)
        {
            return m.hdr;
        }
        self.lookups = self.lookups.saturating_add(1);
        let (start, end, base) = self.object_of(usize::try_from(pc).ok()?)?;
        let hdr = match base {
            Some(base) => {
                let hdr = elf::locate(&mut CurrentUserMemory, base, self.ws).and_then(|at| {
                    cfi::read_hdr(&mut cfi::Reader::new(&mut CurrentUserMemory), at, self.ws).ok()
                });
                if hdr.is_none() {
                    self.no_eh_frame = self.no_eh_frame.saturating_add(1);
                }
                hdr
            }
            None => {
                self.no_object = self.no_object.saturating_add(1);
                None
            }
        };
        if let Some(slot) = self.memo.get_mut(self.next) {
            *slot = Some(Memo { start, end, hdr });
        }
        self.next = (self.next + 1) % MEMO;
        hdr
    }
}

// The counters, in the order of `NAMES`.
const WALKS: usize = 0;
const TABLE_FRAMES: usize = 1;
const FP_FRAMES: usize = 2;
const NO_TABLES: usize = 3;
const READS: usize = 4;
const LOOKUPS: usize = 5;
const NO_OBJECT: usize = 6;
const NO_EH_FRAME: usize = 7;
const BUDGET_EXHAUSTED: usize = 8;
const END_OF_STACK: usize = 9;
const FP_UNKNOWN: usize = 10;
const REFUSED: usize = 11;
const NR_STATS: usize = REFUSED + Cause::COUNT;

/// The counters' names, as debugfs `unwind_user/stats` prints them.
const NAMES: [&CStr; NR_STATS] = [
    c"walks",
    c"table_frames",
    c"fp_frames",
    c"no_tables",
    c"reads",
    c"lookups",
    c"no_object",
    c"no_eh_frame",
    c"budget_exhausted",
    c"end_of_stack",
    c"fp_unknown",
    // `refused_` + `Cause::NAMES`, in order (checked by KUnit).
    c"refused_no_table",
    c"refused_no_fde",
    c"refused_fault",
    c"refused_malformed",
    c"refused_encoding",
    c"refused_augmentation",
    c"refused_opcode",
    c"refused_ra_column",
    c"refused_ra_rule",
    c"refused_fp_rule",
    c"refused_cfa_register",
    c"refused_cfa_expression",
    c"refused_fp_unknown",
    c"refused_cfa_not_above",
    c"refused_bound",
];

static STATS: [Atomic<u64>; NR_STATS] = [const { Atomic::new(0) }; NR_STATS];

/// Counter `i`: its name and value, `None` past the last.
pub(crate) fn stat(i: usize) -> Option<(&'static CStr, u64)> {
    Some((*NAMES.get(i)?, STATS.get(i)?.load(Relaxed)))
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(unwind_rust_tables)]
mod tests {
    use super::*;

    #[test]
    fn cfi_shared_cases() {
        // The interpreter on the made-up tables of
        // `crate::logic::cfi_cases` (the host tests run the same cases).
        use crate::logic::cfi_cases::{run, CASES};
        assert!(CASES.len() >= 20);
        for case in CASES {
            let (got, reads) = run(case);
            if got != case.want {
                pr_err!(
                    "cfi case {}: got {:?}, want {:?}\n",
                    case.name,
                    got,
                    case.want
                );
            }
            assert_eq!(got, case.want);
            assert!(reads <= cfi::MAX_READS);
        }
    }

    #[test]
    fn refusal_counter_names_are_the_causes() {
        for (i, name) in Cause::NAMES.iter().enumerate() {
            let c = NAMES[REFUSED + i].to_bytes();
            assert_eq!(c.strip_prefix(b"refused_"), Some(name.as_bytes()));
        }
        assert!(stat(NR_STATS).is_none());
    }
}
