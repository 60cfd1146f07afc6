// SPDX-License-Identifier: GPL-2.0

//! `unwind_user()`: walk the current task's user stack.
//!
//! The rules are in [`crate::logic::walk`]; this file supplies the start
//! (the task's user registers, word size, segment bases and the
//! function-entry test and the arch's frame rules, read by
//! `unwind_user_get_regs()` in `shim.c` with upstream's arch hooks and
//! macros) and the memory (each word read with `copy_from_user()`, so every
//! read is checked against the user address range and fails instead of
//! faulting).

use crate::logic::walk::{self as rules, FrameRule, Stop, UserMemory, UserRegs, WordSize};
use kernel::{
    bindings,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// The current task's user memory, read one word at a time.
struct CurrentUserMemory;

impl UserMemory for CurrentUserMemory {
    #[inline]
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        let addr = UserPtr::from_addr(usize::try_from(addr).ok()?);
        let mut r = UserSlice::new(addr, ws.bytes() as usize).reader();
        match ws {
            WordSize::W8 => r.read::<u64>().ok(),
            WordSize::W4 => r.read::<u32>().ok().map(u64::from),
        }
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
        ws,
        at_function_entry: r.at_function_entry,
        cs_base: r.cs_base as u64,
        ss_base: r.ss_base as u64,
        user_limit: r.user_limit as u64,
        fp_frame: rule(&r.fp_frame),
        entry_frame: rule(&r.entry_frame),
    })
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

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kunit_tests(unwind_rust_walk)]
mod tests {
    //! The walk rules, run inside the kernel on made-up stacks (the same
    //! cases as the host tests), and `unwind_user()` from a kernel thread.
    use super::*;
    use crate::logic::walk::{walk, FrameRule, Stop, UserMemory, UserRegs, WordSize};

    const LIMIT: u64 = 0x0000_7fff_ffff_f000;

    /// A small made-up user memory: (address, value) pairs.
    struct Mem<'a>(&'a [(u64, u64)]);

    impl UserMemory for Mem<'_> {
        fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
            let v = self.0.iter().find(|&&(a, _)| a == addr)?.1;
            Some(if ws == WordSize::W4 {
                v & 0xffff_ffff
            } else {
                v
            })
        }
    }

    fn regs(ip: u64, sp: u64, fp: u64, ws: WordSize) -> UserRegs {
        let w = ws.bytes() as i32;
        UserRegs {
            ip,
            sp,
            fp,
            ws,
            at_function_entry: false,
            cs_base: 0,
            ss_base: 0,
            user_limit: if ws == WordSize::W8 { LIMIT } else { 1 << 32 },
            fp_frame: FrameRule::new(2 * w, -w, -2 * w, true),
            entry_frame: FrameRule::new(w, -w, 0, false),
        }
    }

    fn run(r: &UserRegs, mem: &[(u64, u64)], out: &mut [u64]) -> (usize, Stop) {
        walk(r, &mut Mem(mem), out)
    }

    const CHAIN64: [(u64, u64); 6] = [
        (0x7ffd_1000, 0x7ffd_1040),
        (0x7ffd_1008, 0x40_1100),
        (0x7ffd_1040, 0x7ffd_10a0),
        (0x7ffd_1048, 0x40_1200),
        (0x7ffd_10a0, 0),
        (0x7ffd_10a8, 0x40_1300),
    ];

    #[test]
    fn chain_64() {
        let mut out = [0u64; 16];
        let r = regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8);
        let (n, stop) = run(&r, &CHAIN64, &mut out);
        assert_eq!(&out[..n], &[0x40_1000, 0x40_1100, 0x40_1200, 0x40_1300]);
        assert_eq!(stop, Stop::FramePointerBelowStack);
    }

    #[test]
    fn chain_32() {
        let mem = [
            (0xffd0_0100, 0xffd0_0120),
            (0xffd0_0104, 0xdead_0000_0804_9100),
            (0xffd0_0120, 0),
            (0xffd0_0124, 0x0804_9200),
        ];
        let mut out = [0u64; 16];
        let r = regs(0x0804_9000, 0xffd0_00f0, 0xffd0_0100, WordSize::W4);
        let (n, _) = run(&r, &mem, &mut out);
        assert_eq!(&out[..n], &[0x0804_9000, 0x0804_9100, 0x0804_9200]);
    }

    #[test]
    fn function_entry() {
        let mem = [
            (0x7ffd_0ff8, 0x40_1100),
            (0x7ffd_1000, 0),
            (0x7ffd_1008, 0x40_1200),
        ];
        let mut out = [0u64; 16];
        let mut r = regs(0x40_1000, 0x7ffd_0ff8, 0x7ffd_1000, WordSize::W8);
        r.at_function_entry = true;
        let (n, _) = run(&r, &mem, &mut out);
        assert_eq!(&out[..n], &[0x40_1000, 0x40_1100, 0x40_1200]);
    }

    #[test]
    fn hostile_frames() {
        let mut out = [0u64; 16];
        let r = regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8);
        // Loop: the frame points to itself.
        let (n, stop) = run(
            &r,
            &[(0x7ffd_1000, 0x7ffd_1000), (0x7ffd_1008, 0x40_1100)],
            &mut out,
        );
        assert_eq!((n, stop), (2, Stop::FramePointerBelowStack));
        // Unaligned next frame.
        let mem = [(0x7ffd_1000, 0x7ffd_1043), (0x7ffd_1008, 0x40_1100)];
        assert_eq!(run(&r, &mem, &mut out), (2, Stop::Unaligned));
        // Downward frame pointer.
        let mem = [(0x7ffd_1000, 0x7ffd_0800), (0x7ffd_1008, 0x40_1100)];
        assert_eq!(run(&r, &mem, &mut out), (2, Stop::FramePointerBelowStack));
        // A kernel return address is never reported.
        let mem = [
            (0x7ffd_1000, 0x7ffd_1040),
            (0x7ffd_1008, 0xffff_ffff_8100_0000),
        ];
        assert_eq!(run(&r, &mem, &mut out), (1, Stop::NotUser));
        // Unmapped next frame.
        let mem = [(0x7ffd_1000, 0x7ffd_2000), (0x7ffd_1008, 0x40_1100)];
        assert_eq!(run(&r, &mem, &mut out), (2, Stop::Fault));
        // Frame pointer at the top of the address space.
        let r = regs(0x40_1000, u64::MAX - 0xf, u64::MAX - 7, WordSize::W8);
        assert_eq!(run(&r, &[], &mut out), (1, Stop::NotGrowing));
    }

    #[test]
    fn truncation_at_max() {
        let r = regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8);
        let mut out = [0u64; 2];
        assert_eq!(run(&r, &CHAIN64, &mut out), (2, Stop::Full));
        assert_eq!(out, [0x40_1000, 0x40_1100]);
        assert_eq!(run(&r, &CHAIN64, &mut []), (0, Stop::Full));
    }

    #[test]
    fn compat_segment_bases() {
        let (cs, ss) = (0x1000_0000u64, 0x2000_0000u64);
        let mem = [
            (ss + 0x100, 0x120),
            (ss + 0x104, 0x9100),
            (ss + 0x120, 0),
            (ss + 0x124, 0x9200),
        ];
        let mut r = regs(0x9000, 0xf0, 0x100, WordSize::W4);
        r.cs_base = cs;
        r.ss_base = ss;
        let mut out = [0u64; 16];
        let (n, _) = run(&r, &mem, &mut out);
        assert_eq!(&out[..n], &[cs + 0x9000, cs + 0x9100, cs + 0x9200]);
    }

    #[test]
    fn kernel_thread_has_no_user_stack() {
        // KUnit runs tests in a kernel thread.
        assert!(current_regs().is_none());
        let mut out = [0u64; 4];
        assert_eq!(unwind_current(&mut out), (0, None));
    }
}
