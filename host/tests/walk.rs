// SPDX-License-Identifier: GPL-2.0

//! The frame-pointer walk on constructed stacks, and against a transcription
//! of upstream `kernel/unwind/user.c` on random ones.

use proptest::prelude::*;
use std::collections::BTreeMap;
use unwind_logic::walk::{walk, FrameRule, Stop, UserMemory, UserRegs, WordSize};

const LIMIT64: u64 = 0x0000_7fff_ffff_f000;
const LIMIT32: u64 = 1 << 32;

/// Sparse user memory: words that are not stored cannot be read.
#[derive(Default, Clone, Debug)]
struct Mem {
    words: BTreeMap<u64, u64>,
    reads: Vec<u64>,
}

impl Mem {
    fn put(&mut self, addr: u64, v: u64) {
        self.words.insert(addr, v);
    }
}

impl UserMemory for Mem {
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        self.reads.push(addr);
        let v = *self.words.get(&addr)?;
        Some(if ws == WordSize::W4 {
            v & 0xffff_ffff
        } else {
            v
        })
    }
}

/// x86's rules (`ARCH_INIT_USER_FP_FRAME()`, `ARCH_INIT_USER_FP_ENTRY_FRAME()`
/// in arch/x86/include/asm/unwind_user.h), as the kernel passes them.
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
        user_limit: if ws == WordSize::W8 { LIMIT64 } else { LIMIT32 },
        fp_frame: FrameRule::new(2 * w, -w, -2 * w, true),
        entry_frame: FrameRule::new(w, -w, 0, false),
    }
}

/// Lay out a frame-pointer chain: frame i at `fps[i]` holds the caller's
/// frame pointer and the return address `ras[i]`.
fn chain(mem: &mut Mem, w: u64, fps: &[u64], ras: &[u64]) {
    for (i, (&fp, &ra)) in fps.iter().zip(ras).enumerate() {
        let next = fps.get(i + 1).copied().unwrap_or(0);
        mem.put(fp, next);
        mem.put(fp + w, ra);
    }
}

fn run(r: &UserRegs, mem: &mut Mem, max: usize) -> (Vec<u64>, Stop) {
    let mut out = vec![0; max];
    let (n, stop) = walk(r, mem, &mut out);
    out.truncate(n);
    (out, stop)
}

#[test]
fn chain_64() {
    let mut m = Mem::default();
    chain(
        &mut m,
        8,
        &[0x7ffd_1000, 0x7ffd_1040, 0x7ffd_10a0],
        &[0x40_1100, 0x40_1200, 0x40_1300],
    );
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100, 0x40_1200, 0x40_1300]);
    // The outermost frame's saved frame pointer is 0, below the stack.
    assert_eq!(stop, Stop::FramePointerBelowStack);
}

#[test]
fn chain_32() {
    let mut m = Mem::default();
    chain(
        &mut m,
        4,
        &[0xffd0_0100, 0xffd0_0120],
        &[0x0804_9100, 0x0804_9200],
    );
    // Upper halves of 32-bit words are ignored.
    m.put(0xffd0_0104, 0xdead_0000_0804_9100);
    let (ips, stop) = run(
        &regs(0x0804_9000, 0xffd0_00f0, 0xffd0_0100, WordSize::W4),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x0804_9000, 0x0804_9100, 0x0804_9200]);
    assert_eq!(stop, Stop::FramePointerBelowStack);
}

#[test]
fn function_entry_uses_stack_pointer() {
    // At the first instruction of a function: [sp] is the return address
    // and fp is still the caller's frame.
    let mut m = Mem::default();
    m.put(0x7ffd_0ff8, 0x40_1100);
    chain(&mut m, 8, &[0x7ffd_1000], &[0x40_1200]);
    let mut r = regs(0x40_1000, 0x7ffd_0ff8, 0x7ffd_1000, WordSize::W8);
    r.at_function_entry = true;
    let (ips, _) = run(&r, &mut m, 64);
    assert_eq!(ips, [0x40_1000, 0x40_1100, 0x40_1200]);
    // Without the entry rule the direct caller is skipped.
    r.at_function_entry = false;
    let (ips, _) = run(&r, &mut m, 64);
    assert_eq!(ips, [0x40_1000, 0x40_1200]);
}

#[test]
fn loop_ends() {
    let mut m = Mem::default();
    m.put(0x7ffd_1000, 0x7ffd_1000); // frame points to itself
    m.put(0x7ffd_1008, 0x40_1100);
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100]);
    // The stack pointer moved to the CFA, above the looping frame pointer.
    assert_eq!(stop, Stop::FramePointerBelowStack);
    // A two-frame cycle ends the same way.
    let mut m = Mem::default();
    chain(
        &mut m,
        8,
        &[0x7ffd_1000, 0x7ffd_1040],
        &[0x40_1100, 0x40_1200],
    );
    m.put(0x7ffd_1040, 0x7ffd_1000);
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100, 0x40_1200]);
    assert_eq!(stop, Stop::FramePointerBelowStack);
}

#[test]
fn downward_frame_pointer() {
    let mut m = Mem::default();
    chain(
        &mut m,
        8,
        &[0x7ffd_1000, 0x7ffd_0800],
        &[0x40_1100, 0x40_1200],
    );
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100]);
    assert_eq!(stop, Stop::FramePointerBelowStack);
}

#[test]
fn unaligned_frame_pointer() {
    let mut m = Mem::default();
    chain(
        &mut m,
        8,
        &[0x7ffd_1000, 0x7ffd_1043],
        &[0x40_1100, 0x40_1200],
    );
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100]);
    assert_eq!(stop, Stop::Unaligned);
    // 4-byte alignment is enough for compat.
    let mut m = Mem::default();
    chain(
        &mut m,
        4,
        &[0xffd0_0100, 0xffd0_0124],
        &[0x0804_9100, 0x0804_9200],
    );
    let (ips, _) = run(
        &regs(0x0804_9000, 0xffd0_00f0, 0xffd0_0100, WordSize::W4),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x0804_9000, 0x0804_9100, 0x0804_9200]);
}

#[test]
fn kernel_return_address_ends_walk() {
    let mut m = Mem::default();
    chain(
        &mut m,
        8,
        &[0x7ffd_1000, 0x7ffd_1040],
        &[0x40_1100, 0xffff_ffff_8100_0000],
    );
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100]);
    assert_eq!(stop, Stop::NotUser);
}

#[test]
fn kernel_frame_pointer_is_not_followed() {
    // A frame pointer into the kernel: the read fails (access_ok in the
    // kernel; unmapped here), the walk ends.
    let mut m = Mem::default();
    chain(&mut m, 8, &[0x7ffd_1000], &[0x40_1100]);
    m.put(0x7ffd_1000, 0xffff_8880_0000_0000);
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100]);
    assert_eq!(stop, Stop::Fault);
}

#[test]
fn unmapped_page_ends_walk() {
    let mut m = Mem::default();
    m.put(0x7ffd_1000, 0x7ffd_2000); // next frame is not mapped
    m.put(0x7ffd_1008, 0x40_1100);
    let (ips, stop) = run(
        &regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000, 0x40_1100]);
    assert_eq!(stop, Stop::Fault);
}

#[test]
fn overflow_at_top_of_address_space() {
    let mut m = Mem::default();
    let (ips, stop) = run(
        &regs(
            0x40_1000,
            0xffff_ffff_ffff_fff0,
            0xffff_ffff_ffff_fff8,
            WordSize::W8,
        ),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x40_1000]);
    assert_eq!(stop, Stop::NotGrowing);
    let (ips, stop) = run(
        &regs(0x0804_9000, 0xffff_fff0, 0xffff_fff8, WordSize::W4),
        &mut m,
        64,
    );
    assert_eq!(ips, [0x0804_9000]);
    assert_eq!(stop, Stop::NotGrowing);
}

#[test]
fn truncation_at_max() {
    let mut m = Mem::default();
    let fps: Vec<u64> = (0..100).map(|i| 0x7ffd_1000 + i * 0x20).collect();
    let ras: Vec<u64> = (0..100).map(|i| 0x40_0000 + i).collect();
    chain(&mut m, 8, &fps, &ras);
    let r = regs(0x40_1000, 0x7ffd_0ff0, 0x7ffd_1000, WordSize::W8);
    for max in [1, 2, 10, 101] {
        let (ips, stop) = run(&r, &mut m, max);
        assert_eq!(ips.len(), max);
        assert_eq!(stop, Stop::Full);
        assert_eq!(
            ips[max - 1],
            if max == 1 {
                0x40_1000
            } else {
                0x40_0000 + max as u64 - 2
            }
        );
    }
    let (ips, stop) = run(&r, &mut m, 200);
    assert_eq!(ips.len(), 101);
    assert_eq!(stop, Stop::FramePointerBelowStack);
    let (ips, stop) = run(&r, &mut m, 0);
    assert!(ips.is_empty());
    assert_eq!(stop, Stop::Full);
}

#[test]
fn compat_segment_bases() {
    // Code segment based at 0x1000_0000, stack segment at 0x2000_0000:
    // registers and stored values are offsets, the trace is linear.
    let (cs, ss) = (0x1000_0000u64, 0x2000_0000u64);
    let mut m = Mem::default();
    m.put(ss + 0x100, 0x120); // saved fp (offset)
    m.put(ss + 0x104, 0x9100); // return address (offset)
    m.put(ss + 0x120, 0);
    m.put(ss + 0x124, 0x9200);
    let mut r = regs(0x9000, 0xf0, 0x100, WordSize::W4);
    r.cs_base = cs;
    r.ss_base = ss;
    let (ips, stop) = run(&r, &mut m, 64);
    assert_eq!(ips, [cs + 0x9000, cs + 0x9100, cs + 0x9200]);
    // The last saved fp (offset 0) is linear ss + 0, below the stack.
    assert_eq!(stop, Stop::FramePointerBelowStack);
    // 32-bit wrap-around of base + offset.
    let mut r = regs(0x9000, 0xf0, 0x100, WordSize::W4);
    r.cs_base = 0xffff_f000;
    let (ips, _) = run(&r, &mut Mem::default(), 64);
    assert_eq!(ips, [0x8000]);
}

/// Upstream `unwind_user()` (kernel/unwind/user.c, Linux 7.3), transcribed
/// with its C semantics: unsigned wrapping arithmetic, no check of the
/// return address, segment bases ignored.
fn upstream(r: &UserRegs, mem: &mut Mem, max: usize) -> Vec<u64> {
    let ws = r.ws.bytes();
    let (mut ip, mut sp, mut fp) = (r.ip, r.sp, r.fp);
    let mut topmost = true;
    let mut out = vec![];
    loop {
        out.push(ip);
        if out.len() >= max {
            return out;
        }
        let entry = topmost && r.at_function_entry;
        let (cfa_off, ra_off, fp_off, use_fp) = if entry {
            (ws as i64, -(ws as i64), 0, false)
        } else {
            (2 * ws as i64, -(ws as i64), -2 * ws as i64, true)
        };
        let mut cfa = if use_fp {
            if fp < sp {
                return out;
            }
            fp
        } else {
            sp
        };
        cfa = cfa.wrapping_add(cfa_off as u64);
        if cfa <= sp || cfa & (ws - 1) != 0 {
            return out;
        }
        let Some(ra) = mem.read_word(cfa.wrapping_add(ra_off as u64), r.ws) else {
            return out;
        };
        let mut nfp = fp;
        if fp_off != 0 {
            let Some(v) = mem.read_word(cfa.wrapping_add(fp_off as u64), r.ws) else {
                return out;
            };
            nfp = v;
        }
        ip = ra;
        sp = cfa;
        fp = nfp;
        topmost = false;
    }
}

fn arb_stack() -> impl Strategy<Value = (UserRegs, Mem, usize)> {
    let ws = prop_oneof![Just(WordSize::W8), Just(WordSize::W4)];
    (
        ws,
        any::<bool>(),
        1usize..40,
        prop::collection::vec((0u64..64, any::<u64>(), 0u8..8), 0..48),
    )
        .prop_map(|(ws, entry, max, cells)| {
            let w = ws.bytes();
            let sp = if ws == WordSize::W8 {
                0x7ffd_0000
            } else {
                0xffd0_0000
            };
            let mut m = Mem::default();
            // Mostly plausible values (stack addresses above sp, code
            // addresses), some kernel addresses and random junk.
            for (slot, raw, kind) in cells {
                let addr = sp + slot * w;
                let v = match kind {
                    0..=2 => sp + (raw % 80) * w + (raw >> 60) % 2 * (w / 2),
                    3..=4 => 0x40_0000 + raw % 0x1000,
                    5 => 0xffff_ffff_8100_0000 + raw % 0x1000,
                    6 => 0,
                    _ => raw,
                };
                m.put(addr, v);
            }
            let mut r = regs(0x40_1000, sp, sp + 2 * w, ws);
            r.at_function_entry = entry;
            (r, m, max)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20000, ..ProptestConfig::default() })]

    /// On any stack, the walk is upstream's, cut before the first return
    /// address that is not a user address.
    #[test]
    fn same_as_upstream_until_a_non_user_address((r, m, max) in arb_stack()) {
        let want = upstream(&r, &mut m.clone(), max);
        let cut = want.iter().position(|&ip| ip >= r.user_limit).unwrap_or(want.len());
        let mut mem = m.clone();
        let (got, stop) = run(&r, &mut mem, max);
        prop_assert_eq!(&got[..], &want[..cut]);
        prop_assert!(got.len() <= max);
        prop_assert_eq!(stop == Stop::NotUser, cut < want.len());
        // Bounded work: at most two reads per reported frame.
        prop_assert!(mem.reads.len() <= 2 * got.len());
        // The walk only reads upwards.
        prop_assert!(mem.reads.iter().all(|&a| a >= r.sp));
    }
}
