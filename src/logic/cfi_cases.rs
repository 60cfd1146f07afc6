// SPDX-License-Identifier: GPL-2.0

//! Test data: one-step cases of the CFI interpreter ([`crate::logic::cfi`])
//! on made-up tables, written once for both test suites: the host's
//! `cargo test` (`host/tests/cfi.rs`) and, once the kernel uses the tables,
//! a KUnit suite.
//!
//! Like the rest of [`crate::logic`] this uses `core` only.  Each case's
//! object image (an `.eh_frame_hdr` with a one-entry table, a CIE and one
//! FDE) is assembled by the `const fn` [`image`] at compile time, so a
//! mistake in a case is a build error, never a run-time panic.  The module
//! is compiled on the host and, in the kernel, only into a kernel with the
//! KUnit tests (`CONFIG_UNWIND_USER_RUST_KUNIT_TEST`).

use crate::logic::cfi::{Bound, Column, Frame, Refusal, RuleKind, Step, UserBytes, Where};
use crate::logic::walk::WordSize;

/// Where a case's image is mapped: the `.eh_frame_hdr` comes first.
pub const HDR: u64 = 0x1000;
/// `.eh_frame`, after the hdr.
const EH_FRAME: u64 = HDR + 0x20;
/// The code the FDE covers.
pub const CODE: u64 = 0x40_0000;
/// Size of the FDE's range.
pub const RANGE: u32 = 0x40;
/// A stack address.
pub const SP: u64 = 0x7fff_e000;
/// A frame pointer above [`SP`].
pub const FP: u64 = SP + 0x100;
/// Size of an image.
pub const IMAGE: usize = 160;

/// An object's tables: `len` bytes at [`HDR`].
#[derive(Clone, Copy, Debug)]
pub struct Image {
    bytes: [u8; IMAGE],
    len: usize,
}

/// What a CIE says beyond the usual x86 one.
#[derive(Clone, Copy, Debug)]
pub struct CieOpts {
    /// Augmentation "zRS": a signal frame.
    pub signal: bool,
}

const PLAIN: CieOpts = CieOpts { signal: false };

const fn put(img: &mut Image, b: u8) {
    img.bytes[img.len] = b;
    img.len += 1;
}

const fn put32(img: &mut Image, v: u32) {
    let b = v.to_le_bytes();
    let mut i = 0;
    while i < 4 {
        put(img, b[i]);
        i += 1;
    }
}

const fn set32(img: &mut Image, at: usize, v: u32) {
    let b = v.to_le_bytes();
    let mut i = 0;
    while i < 4 {
        img.bytes[at + i] = b[i];
        i += 1;
    }
}

const fn put_all(img: &mut Image, s: &[u8]) {
    let mut i = 0;
    while i < s.len() {
        put(img, s[i]);
        i += 1;
    }
}

/// Pad an entry that started at `start` (its length field) with
/// `DW_CFA_nop` to a multiple of 4 and fill in its length.
const fn close(img: &mut Image, start: usize) {
    while (img.len - start) & 3 != 0 {
        put(img, 0);
    }
    set32(img, start, (img.len - start - 4) as u32);
}

/// Assemble the tables of one function at [`CODE`] of [`RANGE`] bytes:
/// the CIE of the arch (`zR`, pcrel|sdata4 pointers, code alignment 1, data
/// alignment -word, CFA = sp + word, return address at CFA - word) followed
/// by `cie_insns`, and an FDE with `insns`.
pub const fn image(ws: WordSize, opts: CieOpts, cie_insns: &[u8], insns: &[u8]) -> Image {
    let w8 = matches!(ws, WordSize::W8);
    let mut img = Image {
        bytes: [0; IMAGE],
        len: 0,
    };
    // .eh_frame_hdr: version 1, eh_frame_ptr pcrel|sdata4, fde_count
    // udata4, table datarel|sdata4; the FDE's address is filled in below.
    put_all(&mut img, &[1, 0x1b, 0x03, 0x3b]);
    put32(&mut img, (EH_FRAME - (HDR + 4)) as u32);
    put32(&mut img, 1);
    put32(&mut img, (CODE - HDR) as u32);
    let table_fde = img.len;
    put32(&mut img, 0);
    while (img.len as u64) < EH_FRAME - HDR {
        put(&mut img, 0);
    }
    // CIE.
    let cie = img.len;
    put32(&mut img, 0);
    put32(&mut img, 0);
    put(&mut img, 1);
    if opts.signal {
        put_all(&mut img, b"zRS\0");
    } else {
        put_all(&mut img, b"zR\0");
    }
    put(&mut img, 1);
    if w8 {
        // data alignment -8, return address column 16, CFA = rsp + 8,
        // return address at CFA - 8.
        put_all(&mut img, &[0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1]);
    } else {
        // data alignment -4, column 8, CFA = esp + 4, at CFA - 4.
        put_all(&mut img, &[0x7c, 8, 1, 0x1b, 0x0c, 4, 4, 0x88, 1]);
    }
    put_all(&mut img, cie_insns);
    close(&mut img, cie);
    // FDE.
    let fde = img.len;
    set32(&mut img, table_fde, fde as u32);
    put32(&mut img, 0);
    put32(&mut img, (fde + 4 - cie) as u32);
    let pc_field = HDR + img.len as u64;
    put32(&mut img, CODE.wrapping_sub(pc_field) as u32);
    put32(&mut img, RANGE);
    put(&mut img, 0);
    put_all(&mut img, insns);
    close(&mut img, fde);
    img
}

/// One step: from `frame`, over the case's image and the readable stack
/// words `stack` (`(address, value)`), the result must be `want`.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// What the case is about (printed when it fails).
    pub name: &'static str,
    /// The word size.
    pub ws: WordSize,
    /// The tables.
    pub image: Image,
    /// The readable stack words.
    pub stack: &'static [(u64, u64)],
    /// The frame to step from.
    pub frame: Frame,
    /// The expected result.
    pub want: Result<Step, Refusal>,
}

/// User memory of a case: the image at [`HDR`], and the stack words (read
/// whole, as the step reads them).
#[derive(Clone, Copy, Debug)]
pub struct CaseMemory<'a> {
    /// The case.
    pub case: &'a Case,
    /// Reads done.
    pub reads: u32,
}

impl UserBytes for CaseMemory<'_> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        self.reads = self.reads.saturating_add(1);
        let img = &self.case.image;
        if let Some(off) = addr.checked_sub(HDR) {
            let off = usize::try_from(off).ok()?;
            if let Some(src) = off
                .checked_add(buf.len())
                .and_then(|end| img.bytes.get(off..end.min(img.len).max(off)))
            {
                if src.len() == buf.len() {
                    buf.copy_from_slice(src);
                    return Some(());
                }
            }
        }
        let &(_, v) = self.case.stack.iter().find(|&&(a, _)| a == addr)?;
        let b = v.to_le_bytes();
        let n = match self.case.ws {
            WordSize::W8 => 8,
            WordSize::W4 => 4,
        };
        if buf.len() != n {
            return None;
        }
        buf.copy_from_slice(b.get(..n)?);
        Some(())
    }
}

/// Run `case`: the result and the number of reads.
pub fn run(case: &Case) -> (Result<Step, Refusal>, u32) {
    let mut mem = CaseMemory { case, reads: 0 };
    let got = crate::logic::cfi::step(&mut mem, HDR, case.ws, &case.frame);
    (got, mem.reads)
}

const fn frame(ip: u64, sp: u64, fp: Option<u64>) -> Frame {
    Frame {
        ip,
        sp,
        fp,
        ip_is_return_address: false,
        bx: crate::logic::cfi::Saved::Unknown,
    }
}

const fn caller(ip: u64, sp: u64, fp: Option<u64>) -> Result<Step, Refusal> {
    Ok(Step::Caller(Frame {
        ip,
        sp,
        fp,
        ip_is_return_address: true,
        bx: crate::logic::cfi::Saved::Unknown,
    }))
}

/// `push %rbp` (CFA = rsp + 16, rbp at CFA - 16) at +1, `mov %rsp,%rbp`
/// (CFA = rbp + 16) at +4.
const FP_FRAME: &[u8] = &[0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6];
/// binutils' x86-64 lazy PLT: CFA = rsp + 16, + 24 at +6, then from +16
/// the PLT expression.
const PLT: &[u8] = &[
    0x0e, 16, 0x46, 0x0e, 24, 0x4a, 0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24,
    0x22,
];
/// glibc's x86-64 `__restore_rt` (a signal frame's CIE, "zRS"): CFA =
/// *(rsp + 160) (`uc_mcontext.rsp`), rbp saved at rsp + 120, rip at
/// rsp + 168.
const RESTORE_RT: &[u8] = &[
    0x0f, 4, 0x77, 0xa0, 0x01, 0x06, 0x10, 6, 3, 0x77, 0xf8, 0x00, 0x10, 16, 3, 0x77, 0xa8, 0x01,
];
/// The i386 vDSO's `__kernel_rt_sigreturn` since 7.3 (a signal frame's
/// CIE, "zRS"): CFA = esp + 160, then by `DW_CFA_offset_extended_sf`
/// (factored by -4) esp saved at CFA + 28, eip at CFA + 56, ebp at CFA +
/// 24, ebx at CFA + 32: the interrupted context by register rules, which
/// the interpreter folds into CFA = *(esp + 188) and the others at esp +
/// 160 + their offsets (`Row::fold_sp`).
const VDSO32_RT_SIGRETURN: &[u8] = &[
    0x0c, 4, 0xa0, 0x01, 0x11, 4, 0x79, 0x11, 8, 0x72, 0x11, 5, 0x7a, 0x11, 3, 0x78,
];
/// The caller [`VDSO32_RT_SIGRETURN`]'s rules give from [`SP`]: the
/// interrupted ip and fp, at stack pointer `sp`, `%ebx` at SP + 192.
const fn sigcontext_caller(sp: u64, ip_is_return_address: bool) -> Result<Step, Refusal> {
    Ok(Step::Caller(Frame {
        ip: INT_IP,
        sp,
        fp: Some(INT_FP),
        ip_is_return_address,
        bx: crate::logic::cfi::Saved::At(SP + 160 + 32),
    }))
}
/// A signal frame's CIE.
const SIGNAL: CieOpts = CieOpts { signal: true };
/// The interrupted context of the signal frame cases.
const INT_IP: u64 = CODE + 0x777;
const INT_FP: u64 = 0x7fff_7000;
/// A return address.
const RA: u64 = CODE + 0x1234;
const W8: WordSize = WordSize::W8;
const W4: WordSize = WordSize::W4;

/// The cases.
pub const CASES: &[Case] = &[
    Case {
        name: "signal frame (__restore_rt): the interrupted context",
        ws: W8,
        image: image(W8, SIGNAL, &[], RESTORE_RT),
        stack: &[
            (SP + 160, SP + 0x800),
            (SP + 120, INT_FP),
            (SP + 168, INT_IP),
        ],
        frame: frame(CODE, SP, Some(FP)),
        want: Ok(Step::Caller(Frame {
            ip: INT_IP,
            sp: SP + 0x800,
            fp: Some(INT_FP),
            ip_is_return_address: false,
            bx: crate::logic::cfi::Saved::Unknown,
        })),
    },
    Case {
        name: "signal frame on a sigaltstack: interrupted sp below",
        ws: W8,
        image: image(W8, SIGNAL, &[], RESTORE_RT),
        stack: &[
            (SP + 160, SP - 0x10_0000),
            (SP + 120, INT_FP),
            (SP + 168, INT_IP),
        ],
        frame: frame(CODE, SP, Some(FP)),
        want: Ok(Step::Caller(Frame {
            ip: INT_IP,
            sp: SP - 0x10_0000,
            fp: Some(INT_FP),
            ip_is_return_address: false,
            bx: crate::logic::cfi::Saved::Unknown,
        })),
    },
    Case {
        name: "saved sp as CFA outside a signal frame: must be above",
        ws: W8,
        image: image(W8, PLAIN, &[], RESTORE_RT),
        stack: &[
            (SP + 160, SP - 0x10_0000),
            (SP + 120, INT_FP),
            (SP + 168, INT_IP),
        ],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::CfaNotAbove),
    },
    Case {
        name: "signal frame whose saved sp is sp: refused",
        ws: W8,
        image: image(W8, SIGNAL, &[], RESTORE_RT),
        stack: &[(SP + 160, SP), (SP + 120, INT_FP), (SP + 168, INT_IP)],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::CfaNotAbove),
    },
    Case {
        name: "i386 vDSO sigreturn (7.3): the interrupted context by register rules",
        ws: W4,
        image: image(W4, SIGNAL, &[], VDSO32_RT_SIGRETURN),
        stack: &[
            (SP + 160 + 28, SP + 0x800),
            (SP + 160 + 56, INT_IP),
            (SP + 160 + 24, INT_FP),
        ],
        frame: frame(CODE, SP, Some(FP)),
        want: sigcontext_caller(SP + 0x800, false),
    },
    Case {
        name: "sigcontext by register rules outside a signal frame: sp rule ignored",
        ws: W4,
        image: image(W4, PLAIN, &[], VDSO32_RT_SIGRETURN),
        stack: &[(SP + 160 + 56, INT_IP), (SP + 160 + 24, INT_FP)],
        frame: frame(CODE, SP, Some(FP)),
        want: sigcontext_caller(SP + 160, true),
    },
    Case {
        name: "function entry: CFA = sp + 8, fp kept",
        ws: W8,
        image: image(W8, PLAIN, &[], FP_FRAME),
        stack: &[(SP, RA)],
        frame: frame(CODE, SP, Some(FP)),
        want: caller(RA, SP + 8, Some(FP)),
    },
    Case {
        name: "after push %rbp: CFA = sp + 16, fp saved",
        ws: W8,
        image: image(W8, PLAIN, &[], FP_FRAME),
        stack: &[(SP, 0x5555), (SP + 8, RA)],
        frame: frame(CODE + 1, SP, Some(FP)),
        want: caller(RA, SP + 16, Some(0x5555)),
    },
    Case {
        name: "frame-pointer body: CFA = fp + 16",
        ws: W8,
        image: image(W8, PLAIN, &[], FP_FRAME),
        stack: &[(FP, 0x6666), (FP + 8, RA)],
        frame: frame(CODE + 0x20, SP, Some(FP)),
        want: caller(RA, FP + 16, Some(0x6666)),
    },
    Case {
        name: "frame-pointer body, fp unknown: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], FP_FRAME),
        stack: &[],
        frame: frame(CODE + 0x20, SP, None),
        want: Err(Refusal::FpUnknown),
    },
    Case {
        name: "a return address at the FDE's end belongs to it (pc - 1)",
        ws: W8,
        image: image(W8, PLAIN, &[], &[]),
        stack: &[(SP, RA)],
        frame: Frame {
            ip: CODE + RANGE as u64,
            sp: SP,
            fp: Some(FP),
            ip_is_return_address: true,
            bx: crate::logic::cfi::Saved::Unknown,
        },
        want: caller(RA, SP + 8, Some(FP)),
    },
    Case {
        name: "pc past the FDE: no FDE",
        ws: W8,
        image: image(W8, PLAIN, &[], &[]),
        stack: &[(SP, RA)],
        frame: frame(CODE + RANGE as u64, SP, Some(FP)),
        want: Err(Refusal::NoFde),
    },
    Case {
        name: "pc below the table: no FDE",
        ws: W8,
        image: image(W8, PLAIN, &[], &[]),
        stack: &[(SP, RA)],
        frame: frame(CODE - 1, SP, Some(FP)),
        want: Err(Refusal::NoFde),
    },
    Case {
        name: "return address undefined: end of stack",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x07, 16]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Ok(Step::EndOfStack),
    },
    Case {
        name: "frame pointer undefined: caller's fp unknown",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x07, 6]),
        stack: &[(SP, RA)],
        frame: frame(CODE, SP, Some(FP)),
        want: caller(RA, SP + 8, None),
    },
    Case {
        name: "signal frame: the caller's ip is not a return address",
        ws: W8,
        image: image(W8, CieOpts { signal: true }, &[], &[]),
        stack: &[(SP, RA)],
        frame: frame(CODE, SP, Some(FP)),
        want: Ok(Step::Caller(Frame {
            ip: RA,
            sp: SP + 8,
            fp: Some(FP),
            ip_is_return_address: false,
            bx: crate::logic::cfi::Saved::Unknown,
        })),
    },
    Case {
        name: "PLT pattern before the push: CFA = sp + 8",
        ws: W8,
        image: image(W8, PLAIN, &[], PLT),
        stack: &[(SP, RA)],
        frame: frame(CODE + 0x20 + 10, SP, Some(FP)),
        want: caller(RA, SP + 8, Some(FP)),
    },
    Case {
        name: "PLT pattern after the push: CFA = sp + 16",
        ws: W8,
        image: image(W8, PLAIN, &[], PLT),
        stack: &[(SP + 8, RA)],
        frame: frame(CODE + 0x20 + 11, SP, Some(FP)),
        want: caller(RA, SP + 16, Some(FP)),
    },
    Case {
        name: "other CFA expression: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0f, 3, 0x73, 8, 0x06]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::CfaExpression),
    },
    Case {
        name: "CFA from another register: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0c, 3, 16]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::UnsupportedCfaRegister),
    },
    Case {
        name: "CFA not above sp: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0e, 0]),
        stack: &[(SP - 8, RA)],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::CfaNotAbove),
    },
    Case {
        name: "return address in a register (vfork): refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x09, 16, 5]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::UnsupportedRule(Column::Ra, RuleKind::Register)),
    },
    Case {
        name: "DW_CFA_GNU_window_save: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x2d]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::UnsupportedOpcode(0x2d)),
    },
    Case {
        name: "restore_state without remember_state: malformed",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0b]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::Malformed(Where::Instructions)),
    },
    Case {
        name: "remember_state too deep: bound",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0a; 17]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::Bound(Bound::StateDepth)),
    },
    Case {
        name: "remember, change, restore",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0a, 0x0e, 32, 0x07, 16, 0x0b]),
        stack: &[(SP, RA)],
        frame: frame(CODE, SP, Some(FP)),
        want: caller(RA, SP + 8, Some(FP)),
    },
    Case {
        name: "return address unreadable: fault",
        ws: W8,
        image: image(W8, PLAIN, &[], &[]),
        stack: &[],
        frame: frame(CODE, SP, Some(FP)),
        want: Err(Refusal::Fault(Where::Stack)),
    },
    Case {
        name: "i386: push %ebp; mov %esp,%ebp; CFA = ebp + 8",
        ws: W4,
        image: image(W4, PLAIN, &[], &[0x41, 0x0e, 8, 0x85, 2, 0x42, 0x0d, 5]),
        stack: &[(FP, 0x7777), (FP + 4, RA)],
        frame: frame(CODE + 3, SP, Some(FP)),
        want: caller(RA, FP + 8, Some(0x7777)),
    },
    Case {
        name: "i386: function entry, CFA = esp + 4",
        ws: W4,
        image: image(W4, PLAIN, &[], &[]),
        stack: &[(SP, RA)],
        frame: frame(CODE, SP, Some(FP)),
        want: caller(RA, SP + 4, Some(FP)),
    },
    Case {
        // GCC's i386 main(): `lea 4(%esp),%ecx; and $-16,%esp; push
        // -4(%ecx); push %ebp; mov %esp,%ebp; push %ecx`, then the CFA is
        // the saved %ecx and %ebp is saved at %ebp.
        name: "i386: realigned stack (DRAP): CFA = *(ebp - 4), ebp at ebp",
        ws: W4,
        image: image(
            W4,
            PLAIN,
            &[],
            &[0x0f, 3, 0x75, 0x7c, 0x06, 0x10, 5, 2, 0x75, 0],
        ),
        stack: &[(FP - 4, SP + 0x200), (SP + 0x200 - 4, RA), (FP, 0x7777)],
        frame: frame(CODE + 3, SP, Some(FP)),
        want: caller(RA, SP + 0x200, Some(0x7777)),
    },
    Case {
        name: "x86-64: realigned stack (DRAP): CFA = *(rbp - 8), rbp at rbp",
        ws: W8,
        image: image(
            W8,
            PLAIN,
            &[],
            &[0x0f, 3, 0x76, 0x78, 0x06, 0x10, 6, 2, 0x76, 0],
        ),
        stack: &[(FP - 8, SP + 0x400), (SP + 0x400 - 8, RA), (FP, 0x7777)],
        frame: frame(CODE + 3, SP, Some(FP)),
        want: caller(RA, SP + 0x400, Some(0x7777)),
    },
    Case {
        name: "realigned stack (DRAP) with the frame pointer unknown: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0f, 3, 0x76, 0x78, 0x06]),
        stack: &[],
        frame: frame(CODE + 3, SP, None),
        want: Err(Refusal::FpUnknown),
    },
    Case {
        name: "DRAP-like expression on another register: refused",
        ws: W8,
        image: image(W8, PLAIN, &[], &[0x0f, 3, 0x73, 0x78, 0x06]),
        stack: &[],
        frame: frame(CODE + 3, SP, Some(FP)),
        want: Err(Refusal::CfaExpression),
    },
    Case {
        name: "i386: CFA past 4 GiB: refused",
        ws: W4,
        image: image(W4, PLAIN, &[], &[]),
        stack: &[],
        frame: frame(CODE, 0xffff_fffe, Some(FP)),
        want: Err(Refusal::CfaNotAbove),
    },
];
