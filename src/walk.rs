// SPDX-License-Identifier: GPL-2.0

//! `unwind_user()`: walk the current task's user stack.
//!
//! The rules are in [`crate::logic::walk`]; this file supplies the start
//! (the task's user registers, word size, segment bases and the
//! function-entry test and the arch's frame rules, read by
//! `unwind_user_get_regs()` in `shim.c` with upstream's arch hooks and
//! macros) and the memory (a word with `get_user()`, a frame's two words
//! in one user-access window, table bytes with `copy_from_user()`: every
//! read is checked against the user address range and fails instead of
//! faulting).

use crate::logic::cfi::UserBytes;
use crate::logic::walk::{self as rules, FrameRule, Stop, UserMemory, UserRegs, WordSize};
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
use kernel::{alloc::KBox, mm::MmWithUser};
use kernel::{
    bindings,
    task::CurrentTask,
    uaccess::{UserPtr, UserSlice},
};

/// The current task's user memory, read one word at a time (or, for the
/// unwind tables, a few bytes at a time).
pub(crate) struct CurrentUserMemory;

impl UserBytes for CurrentUserMemory {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        let addr = UserPtr::from_addr(usize::try_from(addr).ok()?);
        UserSlice::new(addr, buf.len())
            .reader()
            .read_slice(buf)
            .ok()
    }
}

impl UserMemory for CurrentUserMemory {
    /// One word with `get_user()` (`unwind_user_read_word()`: the kernel
    /// crate's `UserSliceReader::read` is a `copy_from_user()`, three
    /// times the instructions for a word).
    #[inline]
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        let addr = usize::try_from(addr).ok()?;
        let mut word = 0u64;
        // SAFETY: `word` is a valid destination for a `u64`; the function
        // checks the user address itself (`get_user()`) and fails on a
        // fault instead of oopsing.
        let r = unsafe { bindings::unwind_user_read_word(addr, ws.bytes() as u32, &mut word) };
        (r == 0).then_some(word)
    }

    /// Both words of a frame in one user-access window
    /// (`unwind_user_read_frame()`: the kernel crate has no batched user
    /// read, and a `copy_from_user()` per frame costs four times upstream's
    /// two `get_user()`s).
    #[inline]
    fn read_pair(&mut self, addr: u64, ws: WordSize) -> Option<(u64, u64)> {
        let addr = usize::try_from(addr).ok()?;
        let mut words = [0u64; 2];
        // SAFETY: `words` is a valid destination for two `u64`s; the
        // function checks the user range itself (`user_read_access_begin`)
        // and fails on a fault instead of oopsing.
        let r = unsafe {
            bindings::unwind_user_read_frame(addr, ws.bytes() as u32, words.as_mut_ptr())
        };
        (r == 0).then_some((words[0], words[1]))
    }
}

/// The arch's rule, as `unwind_user_get_regs()` read it from its macros.
fn rule(f: &bindings::unwind_user_frame) -> FrameRule {
    FrameRule::new(f.cfa_off, f.ra_off, f.fp_off, f.use_fp)
}

/// Where a walk of the current task starts, or `None` if it has no user
/// context to walk (kernel thread, not from user mode, VM86, bad segment).
pub(crate) fn current_regs() -> Option<UserRegs> {
    let mut r = bindings::unwind_user_regs::default();
    // SAFETY: `r` is a valid destination; the function only reads current.
    if unsafe { bindings::unwind_user_get_regs(&mut r) } != 0 {
        return None;
    }
    let ws = match r.ws {
        8 => WordSize::W8,
        4 => WordSize::W4,
        _ => return None,
    };
    Some(UserRegs {
        ip: r.ip as u64,
        sp: r.sp as u64,
        fp: r.fp as u64,
        bx: r.bx as u64,
        ws,
        at_function_entry: r.at_function_entry,
        cs_base: r.cs_base as u64,
        ss_base: r.ss_base as u64,
        user_limit: r.user_limit as u64,
        fp_frame: rule(&r.fp_frame),
        entry_frame: rule(&r.entry_frame),
    })
}

/// How a walk of the current task by tables starts.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
enum Start<'a> {
    /// By tables: the mm's tables, locked, and the walk's state (taken
    /// from them, started), of this word size.
    Tables(
        crate::tables::TaskTables<'a>,
        Option<KBox<crate::tables::WalkState>>,
        WordSize,
    ),
    /// Walked by frame pointers: entries written, and why the walk ended.
    Walked(usize, Stop),
    /// No user context.
    None,
}

/// Start a walk by tables of the current task, whose mm is `mm`, from
/// its registers: `mm`'s tables locked and the walk's state, kept off the
/// stack in them, started.  A task with segment bases, or one whose mm
/// has no memory for its tables or the walk's state, is walked by frame
/// pointers into `out` here, from the same registers (read once), and
/// its mm's tables are not touched.  Out of line: the registers are in
/// its frame, which has returned before a walk by tables begins.
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
#[inline(never)]
fn current_start<'a>(mm: &'a MmWithUser, out: &mut [u64]) -> Start<'a> {
    let Some(regs) = current_regs() else {
        return Start::None;
    };
    if rules::TableWalk::walks(&regs) {
        let mut tables = crate::tables::TaskTables::new(mm);
        if let Some(mut st) = tables.take_walk() {
            if st.tw.start(&regs) {
                return Start::Tables(tables, Some(st), regs.ws);
            }
            tables.put_walk(st);
        }
    }
    let (n, stop) = rules::walk(&regs, &mut CurrentUserMemory, out);
    Start::Walked(n, stop)
}

/// Walk the current task's user stack into `out`; returns the number of
/// entries.  An empty result if current has no user context.
///
/// May sleep (a page of the stack may be faulted in) unless page faults
/// are disabled, in which case a missing page ends the walk.
pub(crate) fn unwind_current(out: &mut [u64]) -> (usize, Option<Stop>) {
    if out.is_empty() {
        return (0, None);
    }
    match current_regs() {
        Some(regs) => {
            let (n, stop) = rules::walk(&regs, &mut CurrentUserMemory, out);
            (n, Some(stop))
        }
        None => (0, None),
    }
}

/// [`unwind_current`] in task context where page faults may be taken
/// (the deferred walk): by the objects' unwind tables where they are
/// switched on ([`crate::tables`]), by frame pointers otherwise.
pub(crate) fn unwind_current_faultable(
    task: &CurrentTask,
    out: &mut [u64],
) -> (usize, Option<Stop>) {
    #[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
    if crate::tables::enabled() && !out.is_empty() {
        if let Some(mm) = task.mm() {
            // Matched where it was returned, not moved: a move is a
            // second copy of the tables handle under the walk.
            return match &mut current_start(mm, out) {
                Start::Tables(tables, st, ws) => {
                    // Always there: `current_start()` put it.
                    let Some(mut st) = st.take() else {
                        return (0, None);
                    };
                    tables.begin(*ws);
                    let s = &mut *st;
                    s.stats = rules::TableStats::default();
                    let (n, stop) = rules::walk_tables_from(
                        &mut s.tw,
                        &mut CurrentUserMemory,
                        tables,
                        out,
                        &mut s.stats,
                    );
                    tables.account(&s.stats, stop);
                    tables.put_walk(st);
                    (n, Some(stop))
                }
                Start::Walked(n, stop) => (*n, Some(*stop)),
                Start::None => (0, None),
            };
        }
    }
    let _ = task;
    unwind_current(out)
}

/// KUnit: `pages` pages of private anonymous memory, read-write, mapped
/// in the mm KUnit gives the running test's thread at its first
/// `vm_mmap()` (unmapped, and the mm dropped, when the test ends); their
/// address, checked to be a user one.
#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
pub(crate) fn kunit_map_anon(pages: usize) -> usize {
    // uapi/asm-generic/mman-common.h (the kernel crate has no binding).
    const PROT_RW: usize = 0x1 | 0x2;
    const MAP_PRIVATE_ANON: usize = 0x02 | 0x20;
    // SAFETY: Called in a KUnit test (this function's only callers), which
    // is running.
    let test = unsafe { bindings::kunit_get_current_test() };
    assert!(!test.is_null());
    // SAFETY: `test` is the running test; KUnit unmaps the area when the
    // test ends.
    let base = unsafe {
        bindings::kunit_vm_mmap(
            test,
            core::ptr::null_mut(),
            0,
            pages.saturating_mul(4096),
            PROT_RW,
            MAP_PRIVATE_ANON,
            0,
        )
    };
    assert!(base != 0 && base < 1 << 47);
    base
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(unwind_rust_walk)]
mod tests {
    //! The walk rules, run inside the kernel on the made-up stacks of
    //! [`crate::logic::walk_cases`] (the host tests run the same cases),
    //! and `unwind_user()` from a kernel thread.
    use super::*;
    use crate::logic::walk::WordSize;
    use crate::logic::walk_cases::{self, CASES};
    use kernel::prelude::*;

    #[test]
    fn shared_cases() {
        for case in CASES {
            let out = walk_cases::run(case);
            let ok = out.matches(case);
            if !ok {
                pr_err!(
                    "walk case {}: got {:#x?} ({:?}), want {:#x?} ({:?})\n",
                    case.name,
                    out.entries(),
                    out.stop,
                    case.want,
                    case.stop
                );
            }
            assert!(ok);
            // The walk by tables, every table step refused, is the same.
            let (out, stats) = walk_cases::run_tables(case);
            assert!(out.matches(case));
            assert_eq!(stats.table_frames, 0);
        }
    }

    #[test]
    fn test_rules_are_the_arch_rules() {
        // The cases' frame rules are the arch macros' values.
        for ws in [WordSize::W8, WordSize::W4] {
            let mut fp = bindings::unwind_user_frame::default();
            let mut entry = bindings::unwind_user_frame::default();
            // SAFETY: Valid destinations.
            unsafe { bindings::unwind_user_arch_frames(ws.bytes() as u32, &mut fp, &mut entry) };
            assert_eq!(rule(&fp), walk_cases::x86_fp_frame(ws));
            assert_eq!(rule(&entry), walk_cases::x86_entry_frame(ws));
        }
    }

    /// `read_word()` and `read_pair()` (`get_user()` and a user-access
    /// window, `include/linux/unwind_user_rust_uaccess.h`) on a page the
    /// test maps in its own thread's mm (KUnit attaches one): the words,
    /// a compat word zero-extended; nothing for a word or pair that
    /// reaches past the page (the next one is not mapped, or not this
    /// mapping's: the guard of `vm_mmap()`'s placement is not asked for,
    /// so the test maps two pages and reads at the end of the first after
    /// unmapping the second), nor at a kernel address.
    #[test]
    fn user_word_reads() {
        const PAGE: usize = 4096;
        let base = kunit_map_anon(2);
        let end = base + PAGE;
        let words: [u64; 2] = [0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00];
        let mut bytes = [0u8; 16];
        for (chunk, w) in bytes.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let mut writer = UserSlice::new(UserPtr::from_addr(end - 16), 16).writer();
        assert!(writer.write_slice(&bytes).is_ok());
        // SAFETY: `vm_munmap()` takes the current mm's lock itself; `end`
        // is page-aligned and its page is the second of the test's own
        // mapping, which nothing else uses and no reference points into
        // (the writer above is done).  KUnit's cleanup unmaps both pages
        // again later, which for the gone one is a no-op.
        assert_eq!(unsafe { bindings::vm_munmap(end, PAGE) }, 0);

        let mut m = CurrentUserMemory;
        let a = (end - 16) as u64;
        assert_eq!(m.read_word(a, WordSize::W8), Some(words[0]));
        assert_eq!(m.read_word(a + 8, WordSize::W8), Some(words[1]));
        assert_eq!(m.read_word(a, WordSize::W4), Some(0x5566_7788));
        assert_eq!(m.read_word(a + 4, WordSize::W4), Some(0x1122_3344));
        assert_eq!(m.read_pair(a, WordSize::W8), Some((words[0], words[1])));
        assert_eq!(
            m.read_pair(a + 8, WordSize::W4),
            Some((0xddee_ff00, 0x99aa_bbcc))
        );
        // Past the end of the page, or across it.
        assert_eq!(m.read_word(a + 16, WordSize::W8), None);
        assert_eq!(m.read_word(a + 12, WordSize::W8), None);
        assert_eq!(m.read_word(a + 16, WordSize::W4), None);
        assert_eq!(m.read_pair(a + 8, WordSize::W8), None);
        assert_eq!(m.read_pair(a + 12, WordSize::W4), None);
        // A kernel address.
        let k = core::ptr::from_ref(&words) as u64;
        assert_eq!(m.read_word(k, WordSize::W8), None);
        assert_eq!(m.read_pair(k, WordSize::W8), None);
    }

    #[test]
    fn kernel_thread_has_no_user_stack() {
        // KUnit runs tests in a kernel thread.
        assert!(current_regs().is_none());
        let mut out = [0u64; 4];
        assert_eq!(unwind_current(&mut out), (0, None));
    }
}
