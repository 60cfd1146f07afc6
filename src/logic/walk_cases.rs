// SPDX-License-Identifier: GPL-2.0

//! Test data: the walker's cases on made-up stacks, written once and run
//! by both test suites, the host's `cargo test` (`host/tests/walk.rs`) and
//! the kernel's KUnit suite `unwind_rust_walk` (`walk.rs` one level up).
//!
//! Like the rest of [`crate::logic`] this uses `core` only (no allocation):
//! a case is a start context, a list of readable words and the expected
//! trace and stop reason, and [`run`] walks it into a fixed array.  The
//! module is compiled on the host and, in the kernel, only into a kernel
//! with the KUnit tests (`CONFIG_UNWIND_USER_RUST_KUNIT_TEST`).

use crate::logic::cfi::{Cause, Reader, UserBytes};
use crate::logic::rows::Found;
use crate::logic::walk::{
    walk, walk_tables, FrameRule, Stop, TableStats, Tables, UserMemory, UserRegs, WordSize,
};

/// Return addresses at or above this are not user addresses (x86-64's
/// `TASK_SIZE_MAX` with 4-level page tables).
pub const LIMIT64: u64 = 0x0000_7fff_ffff_f000;
/// The same for a compat task: all of the 32-bit space.
pub const LIMIT32: u64 = 1 << 32;
/// The largest `max` of a case: [`run`]'s output array.
pub const MAX_ENTRIES: usize = 16;

/// One walk: from `regs`, over the memory `mem`, into an output of `max`
/// entries, must give exactly `want` and end with `stop`.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// What the case is about (printed when it fails).
    pub name: &'static str,
    /// The interrupted user context.
    pub regs: UserRegs,
    /// The readable words, `(linear address, value)`; every other read
    /// fails.
    pub mem: &'static [(u64, u64)],
    /// The output size, at most [`MAX_ENTRIES`].
    pub max: usize,
    /// The expected trace.
    pub want: &'static [u64],
    /// The expected reason the walk ended.
    pub stop: Stop,
}

/// User memory made of `(address, value)` pairs.  A 4-byte read returns
/// the low 32 bits of the value stored at its address, so a pair can hold
/// junk in its upper half that a compat walk must ignore.
#[derive(Clone, Copy, Debug)]
pub struct CaseMemory<'a>(pub &'a [(u64, u64)]);

impl UserMemory for CaseMemory<'_> {
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        let v = self.0.iter().find(|&&(a, _)| a == addr)?.1;
        Some(match ws {
            WordSize::W8 => v,
            WordSize::W4 => v & 0xffff_ffff,
        })
    }
}

impl UserBytes for CaseMemory<'_> {
    /// The bytes of the words, little-endian (each pair holds 8 bytes).
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        for (i, b) in buf.iter_mut().enumerate() {
            let a = addr.checked_add(i as u64)?;
            let &(at, v) = self.0.iter().find(|&&(at, _)| at <= a && a - at < 8)?;
            *b = v
                .to_le_bytes()
                .get(usize::try_from(a - at).ok()?)
                .copied()?;
        }
        Some(())
    }
}

/// Tables that cover no pc: every object "has" tables without an FDE
/// for it, so every table step is refused (`no_fde`, without a read) and
/// [`walk_tables`] goes on by frame pointers.
#[derive(Clone, Copy, Debug)]
pub struct EmptyTables;

impl Tables for EmptyTables {
    fn row<M: UserBytes>(
        &mut self,
        _r: &mut Reader<'_, M>,
        _pc: u64,
        _ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        Some(Err(Cause::NoFde))
    }
}

/// The result of [`run`].
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    entries: [u64; MAX_ENTRIES],
    len: usize,
    /// Why the walk ended.
    pub stop: Stop,
}

impl Outcome {
    /// The trace.
    pub fn entries(&self) -> &[u64] {
        &self.entries[..self.len]
    }

    /// Whether this is what `case` expects (and the case is valid: its
    /// `max` fits [`run`]'s array).
    pub fn matches(&self, case: &Case) -> bool {
        case.max <= MAX_ENTRIES && self.entries() == case.want && self.stop == case.stop
    }
}

/// Walk `case` (with at most [`MAX_ENTRIES`] entries).
pub fn run(case: &Case) -> Outcome {
    let mut entries = [0; MAX_ENTRIES];
    let max = case.max.min(MAX_ENTRIES);
    let (len, stop) = walk(&case.regs, &mut CaseMemory(case.mem), &mut entries[..max]);
    Outcome { entries, len, stop }
}

/// Walk `case` with [`walk_tables`] and [`EmptyTables`]: the result must
/// be [`run`]'s, every step having been refused by the tables first.
pub fn run_tables(case: &Case) -> (Outcome, TableStats) {
    let mut entries = [0; MAX_ENTRIES];
    let max = case.max.min(MAX_ENTRIES);
    let mut stats = TableStats::default();
    let (len, stop) = walk_tables(
        &case.regs,
        &mut CaseMemory(case.mem),
        &mut EmptyTables,
        &mut entries[..max],
        &mut stats,
    );
    (Outcome { entries, len, stop }, stats)
}

/// A 64-bit context, no function-entry rule, no segment bases.
pub const fn regs64(ip: u64, sp: u64, fp: u64) -> UserRegs {
    UserRegs {
        ip,
        sp,
        fp,
        bx: 0,
        ws: WordSize::W8,
        at_function_entry: false,
        cs_base: 0,
        ss_base: 0,
        user_limit: LIMIT64,
        fp_frame: x86_fp_frame(WordSize::W8),
        entry_frame: x86_entry_frame(WordSize::W8),
    }
}

/// x86's frame-pointer frame, `ARCH_INIT_USER_FP_FRAME(ws)` of
/// `arch/x86/include/asm/unwind_user.h`.  The kernel walks with the
/// macros' own values; KUnit (`unwind_rust_walk`) checks that these test
/// values equal them.
pub const fn x86_fp_frame(ws: WordSize) -> FrameRule {
    let w = ws.bytes() as i32;
    FrameRule::new(2 * w, -w, -2 * w, true)
}

/// x86's frame at a function's first instruction,
/// `ARCH_INIT_USER_FP_ENTRY_FRAME(ws)`; checked as [`x86_fp_frame`] is.
pub const fn x86_entry_frame(ws: WordSize) -> FrameRule {
    let w = ws.bytes() as i32;
    FrameRule::new(w, -w, 0, false)
}

/// A compat context, no function-entry rule, no segment bases.
const fn regs32(ip: u64, sp: u64, fp: u64) -> UserRegs {
    UserRegs {
        ws: WordSize::W4,
        user_limit: LIMIT32,
        fp_frame: x86_fp_frame(WordSize::W4),
        entry_frame: x86_entry_frame(WordSize::W4),
        ..regs64(ip, sp, fp)
    }
}

/// The usual 64-bit start: one frame below `CHAIN64`'s first.
const START64: UserRegs = regs64(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000);

/// Three 64-bit frames at 0x7ffd_1000, 0x7ffd_1040 and 0x7ffd_10a0, each
/// holding the caller's frame pointer and a return address; the outermost
/// saved frame pointer is 0.
const CHAIN64: &[(u64, u64)] = &[
    (0x7ffd_1000, 0x7ffd_1040),
    (0x7ffd_1008, 0x40_1100),
    (0x7ffd_1040, 0x7ffd_10a0),
    (0x7ffd_1048, 0x40_1200),
    (0x7ffd_10a0, 0),
    (0x7ffd_10a8, 0x40_1300),
];

/// `CHAIN64` walked from `START64`.
const CHAIN64_TRACE: &[u64] = &[0x40_1000, 0x40_1100, 0x40_1200, 0x40_1300];

/// At a function's first instruction: the return address at the stack
/// pointer, 0x7ffd_0ff8, then one frame at 0x7ffd_1000.
const ENTRY: &[(u64, u64)] = &[
    (0x7ffd_0ff8, 0x40_1100),
    (0x7ffd_1000, 0),
    (0x7ffd_1008, 0x40_1200),
];

/// The compat segment bases of the `compat_segment_bases` case.
const CS: u64 = 0x1000_0000;
const SS: u64 = 0x2000_0000;

/// Every case.
pub const CASES: &[Case] = &[
    Case {
        name: "chain_64",
        regs: START64,
        mem: CHAIN64,
        max: MAX_ENTRIES,
        want: CHAIN64_TRACE,
        // The outermost frame's saved frame pointer is 0, below the stack.
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        name: "chain_32",
        regs: regs32(0x0804_9000, 0xffd0_00f0, 0xffd0_0100),
        // Upper halves of 32-bit words are ignored.
        mem: &[
            (0xffd0_0100, 0xffd0_0120),
            (0xffd0_0104, 0xdead_0000_0804_9100),
            (0xffd0_0120, 0),
            (0xffd0_0124, 0x0804_9200),
        ],
        max: MAX_ENTRIES,
        want: &[0x0804_9000, 0x0804_9100, 0x0804_9200],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        // At the first instruction of a function: [sp] is the return
        // address and fp is still the caller's frame.
        name: "function_entry",
        regs: UserRegs {
            at_function_entry: true,
            ..regs64(0x40_1000, 0x7ffd_0ff8, 0x7ffd_1000)
        },
        mem: ENTRY,
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100, 0x40_1200],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        // The same stack without the entry rule: the direct caller is
        // skipped.
        name: "function_entry_rule_off",
        regs: regs64(0x40_1000, 0x7ffd_0ff8, 0x7ffd_1000),
        mem: ENTRY,
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1200],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        // The frame points to itself: the stack pointer moves to the CFA,
        // above the looping frame pointer.
        name: "loop_one_frame",
        regs: START64,
        mem: &[(0x7ffd_1000, 0x7ffd_1000), (0x7ffd_1008, 0x40_1100)],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        name: "loop_two_frames",
        regs: START64,
        mem: &[
            (0x7ffd_1000, 0x7ffd_1040),
            (0x7ffd_1008, 0x40_1100),
            (0x7ffd_1040, 0x7ffd_1000),
            (0x7ffd_1048, 0x40_1200),
        ],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100, 0x40_1200],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        name: "unaligned_frame_pointer",
        regs: START64,
        mem: &[
            (0x7ffd_1000, 0x7ffd_1043),
            (0x7ffd_1008, 0x40_1100),
            (0x7ffd_1043, 0),
            (0x7ffd_104b, 0x40_1200),
        ],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::Unaligned,
    },
    Case {
        // 4-byte alignment is enough for compat.
        name: "compat_4_byte_alignment",
        regs: regs32(0x0804_9000, 0xffd0_00f0, 0xffd0_0100),
        mem: &[
            (0xffd0_0100, 0xffd0_0124),
            (0xffd0_0104, 0x0804_9100),
            (0xffd0_0124, 0),
            (0xffd0_0128, 0x0804_9200),
        ],
        max: MAX_ENTRIES,
        want: &[0x0804_9000, 0x0804_9100, 0x0804_9200],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        name: "downward_frame_pointer",
        regs: START64,
        mem: &[
            (0x7ffd_1000, 0x7ffd_0800),
            (0x7ffd_1008, 0x40_1100),
            (0x7ffd_0800, 0),
            (0x7ffd_0808, 0x40_1200),
        ],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        // A kernel return address is never reported.
        name: "kernel_return_address_first",
        regs: START64,
        mem: &[
            (0x7ffd_1000, 0x7ffd_1040),
            (0x7ffd_1008, 0xffff_ffff_8100_0000),
        ],
        max: MAX_ENTRIES,
        want: &[0x40_1000],
        stop: Stop::NotUser,
    },
    Case {
        name: "kernel_return_address_second",
        regs: START64,
        mem: &[
            (0x7ffd_1000, 0x7ffd_1040),
            (0x7ffd_1008, 0x40_1100),
            (0x7ffd_1040, 0),
            (0x7ffd_1048, 0xffff_ffff_8100_0000),
        ],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::NotUser,
    },
    Case {
        // A frame pointer into the kernel: the read fails (`get_user()` in
        // the kernel; not in the pairs here), the walk ends.
        name: "kernel_frame_pointer",
        regs: START64,
        mem: &[
            (0x7ffd_1000, 0xffff_8880_0000_0000),
            (0x7ffd_1008, 0x40_1100),
        ],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::Fault,
    },
    Case {
        name: "unmapped_next_frame",
        regs: START64,
        mem: &[(0x7ffd_1000, 0x7ffd_2000), (0x7ffd_1008, 0x40_1100)],
        max: MAX_ENTRIES,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::Fault,
    },
    Case {
        // The CFA would overflow the address space.
        name: "top_of_address_space_64",
        regs: regs64(0x40_1000, 0xffff_ffff_ffff_fff0, 0xffff_ffff_ffff_fff8),
        mem: &[],
        max: MAX_ENTRIES,
        want: &[0x40_1000],
        stop: Stop::NotGrowing,
    },
    Case {
        name: "top_of_address_space_32",
        regs: regs32(0x0804_9000, 0xffff_fff0, 0xffff_fff8),
        mem: &[],
        max: MAX_ENTRIES,
        want: &[0x0804_9000],
        stop: Stop::NotGrowing,
    },
    Case {
        name: "truncation_at_2",
        regs: START64,
        mem: CHAIN64,
        max: 2,
        want: &[0x40_1000, 0x40_1100],
        stop: Stop::Full,
    },
    Case {
        name: "truncation_at_1",
        regs: START64,
        mem: CHAIN64,
        max: 1,
        want: &[0x40_1000],
        stop: Stop::Full,
    },
    Case {
        name: "truncation_at_0",
        regs: START64,
        mem: CHAIN64,
        max: 0,
        want: &[],
        stop: Stop::Full,
    },
    Case {
        // The output is full before the walk learns that the chain ends.
        name: "truncation_at_depth",
        regs: START64,
        mem: CHAIN64,
        max: CHAIN64_TRACE.len(),
        want: CHAIN64_TRACE,
        stop: Stop::Full,
    },
    Case {
        // Code segment based at 0x1000_0000, stack segment at 0x2000_0000:
        // registers and stored values are offsets, the trace is linear.
        // The last saved frame pointer (offset 0) is linear SS + 0, below
        // the stack.
        name: "compat_segment_bases",
        regs: UserRegs {
            cs_base: CS,
            ss_base: SS,
            ..regs32(0x9000, 0xf0, 0x100)
        },
        mem: &[
            (SS + 0x100, 0x120),
            (SS + 0x104, 0x9100),
            (SS + 0x120, 0),
            (SS + 0x124, 0x9200),
        ],
        max: MAX_ENTRIES,
        want: &[CS + 0x9000, CS + 0x9100, CS + 0x9200],
        stop: Stop::FramePointerBelowStack,
    },
    Case {
        // Base plus offset wraps around in 32 bits.
        name: "compat_code_base_wraps",
        regs: UserRegs {
            cs_base: 0xffff_f000,
            ..regs32(0x9000, 0xf0, 0x100)
        },
        mem: &[],
        max: MAX_ENTRIES,
        want: &[0x8000],
        stop: Stop::Fault,
    },
];
