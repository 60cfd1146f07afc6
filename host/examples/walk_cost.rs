// SPDX-License-Identifier: GPL-2.0

//! Where a table walk's instructions go, on the host, under callgrind.
//!
//! The kernel's figures (`make bench`, QEMU `-icount`) say how many guest
//! instructions a frame costs, not where they go.  This program walks its
//! own stack, a recursion of DEPTH frames (built with frame pointers, so
//! the frame-pointer walk has the same frames to walk), the way the kernel
//! walks a task's: `walk::walk` by frame pointers, `walk::walk_tables` by
//! compiled rows with every row already compiled (the warm cache), the
//! per-mm lookup of the kernel's `TaskTables::row` (last object, else a
//! binary search by start) in front of `ObjectRows::lookup`.  Stack reads
//! are plain loads after a range check, so what is counted is the walker.
//!
//!   RUSTFLAGS="-C force-frame-pointers=yes" cargo build --release \
//!       --example walk_cost
//!   valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!       target/release/examples/walk_cost 263
//!   callgrind_annotate --inclusive=yes cg.out | grep -E 'fp_walks|table_walks'
//!
//! `scripts/walk-cost.sh` does the above and prints instructions a frame.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use unwind_logic::cfi::{self, Cause, Reader, UserBytes};
use unwind_logic::rows::{self, FdeEntry, Found, ObjectRows, PackedRow, PcMemo};
use unwind_logic::walk::{self, TableStats, Tables, UserMemory, WordSize};
use unwind_logic::walk_cases;

/// Walks of each kind per run.
const ITERS: usize = 2000;

/// This process's readable mappings (from `/proc/self/maps`).
struct Mem {
    maps: Vec<(u64, u64)>,
    /// The stack's mapping: the common case, checked first.
    stack: (u64, u64),
}

impl Mem {
    #[inline]
    fn ok(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        (self.stack.0 <= addr && end <= self.stack.1)
            || self.maps.iter().any(|&(s, e)| s <= addr && end <= e)
    }
}

impl UserBytes for Mem {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        if !self.ok(addr, buf.len() as u64) {
            return None;
        }
        // SAFETY: the range lies in a readable mapping of this process.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
        Some(())
    }
}

impl UserMemory for Mem {
    #[inline]
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        if !self.ok(addr, ws.bytes()) {
            return None;
        }
        // SAFETY: as above.
        Some(unsafe {
            match ws {
                WordSize::W8 => std::ptr::read_unaligned(addr as *const u64),
                WordSize::W4 => u64::from(std::ptr::read_unaligned(addr as *const u32)),
            }
        })
    }

    #[inline]
    fn read_pair(&mut self, addr: u64, ws: WordSize) -> Option<(u64, u64)> {
        if ws != WordSize::W8 || !self.ok(addr, 16) {
            return None;
        }
        // SAFETY: as above.
        unsafe {
            Some((
                std::ptr::read_unaligned(addr as *const u64),
                std::ptr::read_unaligned((addr + 8) as *const u64),
            ))
        }
    }
}

/// A mapping: start, end, file offset, name.
type Mapping = (u64, u64, u64, String);

/// An address range: start, end.
type Range = (u64, u64);

/// The readable mappings, the one holding `sp` (the stack: under
/// valgrind it is not `[stack]`), and every mapping with its file offset
/// and name.
fn maps(sp: u64) -> (Vec<Range>, Range, Vec<Mapping>) {
    let text = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let mut readable = Vec::new();
    let mut stack = (0, 0);
    let mut all = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let Some((a, b)) = f.first().and_then(|r| r.split_once('-')) else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let off = f
            .get(2)
            .and_then(|o| u64::from_str_radix(o, 16).ok())
            .unwrap_or(0);
        let name = f.get(5).map_or(String::new(), |s| s.to_string());
        if f.get(1).is_some_and(|p| p.starts_with('r')) && name != "[vvar]" {
            readable.push((a, b));
        }
        if a <= sp && sp < b {
            stack = (a, b);
        }
        all.push((a, b, off, name));
    }
    (readable, stack, all)
}

type Rows = ObjectRows<Vec<FdeEntry>, Vec<PackedRow>, Vec<unwind_logic::cfi::Probe>>;

/// An object: its mapping and compiled rows.
struct Object {
    start: u64,
    end: u64,
    hdr: Option<cfi::Hdr>,
    rows: Rows,
}

/// The per-frame path of the kernel's `TaskTables::row` (src/tables.rs):
/// the last object, else a binary search of the objects by start, then
/// the object's rows; a miss compiles the FDE.
struct Cache {
    memo: Box<PcMemo>,
    /// The interpreter's state (the kernel keeps one per mm).
    scratch: Box<cfi::Scratch>,
    objects: Vec<Object>,
    last: usize,
    maps: Vec<(u64, u64, u64, String)>,
}

impl Cache {
    #[cold]
    fn add<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, pc: u64, ws: WordSize) -> Option<usize> {
        let (start, end, hdr) = common::tables_of(&self.maps, r, pc, ws)?;
        let i = self.objects.partition_point(|o| o.start < start);
        self.objects.insert(
            i,
            Object {
                start,
                end,
                hdr,
                rows: Rows::default(),
            },
        );
        Some(i)
    }
}

impl Tables for Cache {
    #[inline]
    fn row<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        if let Some(found) = self.memo.get(pc, ws) {
            return Some(Ok(found));
        }
        let known = rows::object_of(&self.objects, self.last, pc, |o| (o.start, o.end));
        let i = match known {
            Some(i) => i,
            None => self.add(r, pc, ws)?,
        };
        self.last = i;
        let o = self.objects.get_mut(i)?;
        let hdr = o.hdr?;
        let found = match o.rows.lookup(pc) {
            Some(found) => found,
            None => match o.rows.fill(r, &hdr, ws, pc, &mut self.scratch) {
                Ok(found) => found,
                Err(e) => return Some(Err(e.cause())),
            },
        };
        self.memo.put(pc, ws, found);
        Some(Ok(found))
    }

    /// As the kernel's: the memo's or a known object's compiled rows'
    /// answer, else left to `row`.
    #[inline]
    fn known(&mut self, pc: u64, ws: WordSize) -> Option<Option<Result<Found, Cause>>> {
        if let Some(found) = self.memo.get(pc, ws) {
            return Some(Some(Ok(found)));
        }
        let i = rows::object_of(&self.objects, self.last, pc, |o| (o.start, o.end))?;
        self.last = i;
        let o = self.objects.get(i)?;
        if o.hdr.is_none() {
            return Some(None);
        }
        let found = o.rows.lookup(pc)?;
        self.memo.put(pc, ws, found);
        Some(Some(Ok(found)))
    }

    #[inline]
    fn memo(&self) -> Option<&PcMemo> {
        Some(&self.memo)
    }
}

#[inline(never)]
fn fp_walks(regs: &walk::UserRegs, mem: &mut Mem, out: &mut [u64]) -> usize {
    let mut n = 0;
    for _ in 0..ITERS {
        n = walk::walk(black_box(regs), mem, out).0;
    }
    n
}

#[inline(never)]
fn table_walks(regs: &walk::UserRegs, mem: &mut Mem, t: &mut Cache, out: &mut [u64]) -> usize {
    let mut n = 0;
    for _ in 0..ITERS {
        let mut stats = TableStats::default();
        n = walk::walk_tables(black_box(regs), mem, t, out, &mut stats).0;
    }
    n
}

/// Tables of a process whose objects have none (a static binary, JIT
/// code): every frame falls back to the frame pointer.
struct NoTables;

impl Tables for NoTables {
    #[inline]
    fn row<M: UserBytes>(
        &mut self,
        _r: &mut Reader<'_, M>,
        _pc: u64,
        _ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        None
    }

    /// As the kernel's for an object known to have no tables.
    fn known(&mut self, _pc: u64, _ws: WordSize) -> Option<Option<Result<Found, Cause>>> {
        Some(None)
    }

    fn bare(&self, _pc: u64) -> Option<(u64, u64)> {
        Some((0, u64::MAX))
    }
}

#[inline(never)]
fn fallback_walks(regs: &walk::UserRegs, mem: &mut Mem, out: &mut [u64]) -> usize {
    let mut n = 0;
    for _ in 0..ITERS {
        let mut stats = TableStats::default();
        n = walk::walk_tables(black_box(regs), mem, &mut NoTables, out, &mut stats).0;
    }
    n
}

#[inline(never)]
fn capture(depth: usize) {
    let (ip, sp, fp) = here!();
    let (readable, stack, all) = maps(sp);
    let mut mem = Mem {
        maps: readable,
        stack,
    };
    let regs = walk_cases::regs64(ip, sp, fp);
    let mut out = vec![0u64; 512];
    // The frame-pointer walk stops where std's frames (no frame pointers)
    // begin: count only the frames it can walk, and walk the tables just
    // as far, so both walk the same frames.
    let mut fp_out = vec![0u64; depth + 8];
    let nfp = walk::walk(&regs, &mut mem, &mut fp_out).0;
    let mut t = Cache {
        memo: Box::new(PcMemo::empty()),
        scratch: Box::new(cfi::Scratch::new()),
        objects: Vec::new(),
        last: 0,
        maps: all,
    };
    let mut stats = TableStats::default();
    let cold = walk::walk_tables(&regs, &mut mem, &mut t, &mut out, &mut stats).0;
    let ntab = nfp.min(cold);
    assert!(
        out[..ntab] == fp_out[..ntab],
        "the walks disagree: {:x?} {:x?}",
        &out[..ntab],
        &fp_out[..ntab]
    );
    let fpn = fp_walks(&regs, &mut mem, &mut fp_out[..nfp]);
    let tn = table_walks(&regs, &mut mem, &mut t, &mut out[..ntab]);
    let bn = fallback_walks(&regs, &mut mem, &mut out[..nfp]);
    assert_eq!(
        bn, fpn,
        "the walk without tables is not the frame-pointer walk"
    );
    println!("depth {depth}: iters {ITERS} fp_frames {fpn} table_frames {tn} (whole stack by tables: {cold})");
}

/// `depth` frames, each of which saves a callee-saved register (`%rbx`)
/// and restores it after the call, as the frames of the kernel
/// benchmark's `descend()` do (deferred_bench.c): the table walk tracks
/// `%rbx` through them.
#[inline(never)]
fn recurse(n: usize, depth: usize) {
    if n == 0 {
        capture(depth)
    } else {
        recurse(black_box(n - 1), depth)
    }
    // `depth` lives across the call, in a callee-saved register.
    black_box(depth);
}

fn main() {
    let depth: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(71);
    recurse(black_box(depth), depth);
}
