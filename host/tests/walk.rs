// SPDX-License-Identifier: GPL-2.0

//! The frame-pointer walk on constructed stacks (the shared cases of
//! `src/logic/walk_cases.rs`, and a long generated chain), and against a
//! transcription of upstream `kernel/unwind/user.c` on random ones.

use proptest::prelude::*;
use std::collections::BTreeMap;
use unwind_logic::cfi::{Cause, Reader, UserBytes};
use unwind_logic::rows::Found;
use unwind_logic::walk::{
    walk, walk_tables, FrameRule, Stop, TableStats, Tables, UserMemory, UserRegs, Walk, WordSize,
};
use unwind_logic::walk_cases::{self, CASES, MAX_ENTRIES};

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

impl UserBytes for Mem {
    fn read_bytes(&mut self, _addr: u64, _buf: &mut [u8]) -> Option<()> {
        None
    }
}

/// Tables of a process whose objects have none, and that say so for the
/// pcs `[.0, .1)` (`Tables::bare`): a static binary's mapping.
struct Bare(u64, u64);

impl Tables for Bare {
    fn row<M: UserBytes>(
        &mut self,
        _r: &mut Reader<'_, M>,
        _pc: u64,
        _ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        None
    }

    fn bare(&self, pc: u64) -> Option<(u64, u64)> {
        (self.0 <= pc && pc < self.1).then_some((self.0, self.1))
    }
}

fn regs(ip: u64, sp: u64, fp: u64, ws: WordSize) -> UserRegs {
    UserRegs {
        ip,
        sp,
        fp,
        bx: 0,
        ws,
        at_function_entry: false,
        cs_base: 0,
        ss_base: 0,
        user_limit: if ws == WordSize::W8 { LIMIT64 } else { LIMIT32 },
        fp_frame: walk_cases::x86_fp_frame(ws),
        entry_frame: walk_cases::x86_entry_frame(ws),
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

/// Every case of `walk_cases::CASES` (the cases the kernel's KUnit suite
/// runs too): the expected trace and stop reason, with `CaseMemory` as the
/// kernel runs them and again over this file's recording memory; at most
/// two reads per reported frame, only upwards; and, where the segment bases
/// are zero, upstream's walk cut before its first non-user address.
/// `walk_tables` where every table step is refused is the frame-pointer
/// walk, frame for frame, and it counts one refusal per step tried.
#[test]
fn tables_refused_fall_back_to_frame_pointers() {
    use unwind_logic::cfi::Cause;
    for case in CASES {
        let name = case.name;
        let (out, stats) = walk_cases::run_tables(case);
        assert_eq!(out.entries(), case.want, "{name}");
        assert_eq!(out.stop, case.stop, "{name}");
        assert_eq!(stats.table_frames, 0, "{name}");
        let linear = case.regs.cs_base == 0 && case.regs.ss_base == 0;
        // One step tried per entry after the first, except where the
        // output filled up (no step after the last entry).
        let tried = if out.stop == Stop::Full {
            out.entries().len().saturating_sub(1)
        } else {
            out.entries().len()
        } as u32;
        let want_refused = if linear { tried } else { 0 };
        assert_eq!(
            stats.refused[Cause::NoFde as usize],
            want_refused,
            "{name}: {stats:?}"
        );
        assert_eq!(stats.refused.iter().sum::<u32>(), want_refused, "{name}");
        // The frame-pointer steps that succeeded.
        let fp = if out.stop == Stop::Full {
            tried
        } else {
            tried.saturating_sub(1)
        };
        assert_eq!(stats.fp_frames, if linear { fp } else { 0 }, "{name}");
        assert_eq!(stats.reads, 0, "{name}");
    }
}

#[test]
fn shared_cases() {
    let mut names = std::collections::HashSet::new();
    for case in CASES {
        let name = case.name;
        assert!(names.insert(name), "{name}: two cases of this name");
        assert!(case.max <= MAX_ENTRIES, "{name}: max too large");
        let out = walk_cases::run(case);
        assert_eq!(out.entries(), case.want, "{name}");
        assert_eq!(out.stop, case.stop, "{name}");
        assert!(out.matches(case), "{name}");

        let mut mem = Mem::default();
        for &(a, v) in case.mem.iter().rev() {
            mem.put(a, v);
        }
        let (got, stop) = run(&case.regs, &mut mem, case.max);
        assert_eq!((&got[..], stop), (case.want, case.stop), "{name}");
        assert!(mem.reads.len() <= 2 * got.len(), "{name}: reads");
        let sp = case.regs.ss_base.wrapping_add(case.regs.sp);
        assert!(mem.reads.iter().all(|&a| a >= sp), "{name}: downward read");

        if case.regs.cs_base == 0 && case.regs.ss_base == 0 && case.max > 0 {
            let r = &case.regs;
            let want = upstream(r, &mut mem.clone(), case.max);
            let cut = want
                .iter()
                .position(|&ip| ip >= r.user_limit)
                .unwrap_or(want.len());
            assert_eq!(case.want, &want[..cut], "{name}: not upstream's");
            assert_eq!(stop == Stop::NotUser, cut < want.len(), "{name}");
        }
    }
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

    /// A walk by tables where there are none (`Tables::bare` naming all
    /// or part of the code, the rest answered by no object either) is the
    /// frame-pointer walk: same entries, same stop, same reads, every step
    /// a frame-pointer step, each frame counted without tables.
    #[test]
    fn walk_tables_without_tables_is_the_frame_pointer_walk(
        (r, m, max) in arb_stack(),
        lo in 0x3f_f000u64..0x40_1800,
        len in 0u64..0x2000,
    ) {
        let mut want_mem = m.clone();
        let (want, want_stop) = run(&r, &mut want_mem, max);
        let mut mem = m.clone();
        let mut out = vec![0; max];
        let mut stats = TableStats::default();
        let (n, stop) = walk_tables(&r, &mut mem, &mut Bare(lo, lo + len), &mut out, &mut stats);
        prop_assert_eq!(&out[..n], &want[..]);
        prop_assert_eq!(stop, want_stop);
        prop_assert_eq!(&mem.reads, &want_mem.reads);
        // n entries: n - 1 steps that worked, and one that ended the
        // walk unless the output filled up.
        let stepped = n as u32 - 1;
        prop_assert_eq!(stats.table_frames, 0);
        prop_assert_eq!(stats.refused.iter().sum::<u32>(), 0);
        prop_assert_eq!(stats.reads, 0);
        prop_assert_eq!(stats.fp_frames, stepped);
        prop_assert_eq!(stats.no_tables, stepped + u32::from(stop != Stop::Full));
    }

    /// `walk()`, which specialises its loop by word size and frame rule,
    /// is the plain loop of `Walk::next()` steps: same entries, same stop,
    /// same reads.
    #[test]
    fn walk_is_the_loop_of_its_steps((r, m, max) in arb_stack(), shape in 0usize..5) {
        // The arch's frame, and frame rules of other shapes (which take
        // the walk's generic loop).
        let w = r.ws.bytes() as i32;
        let rules = [
            (2 * w, -w, -2 * w, true),
            (2 * w, -w, 0, true),
            (3 * w, -w, -3 * w, true),
            (2 * w, -2 * w, -w, true),
            (2 * w, -w, 0, false),
        ];
        let (cfa, ra, fp, use_fp) = rules[shape];
        let mut r = r;
        r.fp_frame = FrameRule::new(cfa, ra, fp, use_fp);
        let mut mem = m.clone();
        let (got, stop) = run(&r, &mut mem, max);
        let mut ref_mem = m.clone();
        let mut w = Walk::new(&r);
        let mut want = Vec::new();
        let mut want_stop = Stop::Full;
        while want.len() < max {
            want.push(w.ip());
            if want.len() == max {
                break;
            }
            if let Err(s) = w.next(&mut ref_mem) {
                want_stop = s;
                break;
            }
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(stop, want_stop);
        prop_assert_eq!(mem.reads, ref_mem.reads);
    }
}
