// SPDX-License-Identifier: GPL-2.0

//! Compiled unwind rows (`src/logic/rows.rs`) against the interpreter
//! they are compiled by (`src/logic/cfi.rs`):
//!
//! - on the real objects of this machine, for every FDE of the
//!   `.eh_frame_hdr` table and a spread of pcs in it (every pc of an FDE
//!   up to 256 bytes; around every row change and a sample of the others
//!   in larger ones), filled in a shuffled order, `ObjectRows::lookup` /
//!   `ObjectRows::fill` answer what `cfi::rules_in` followed by
//!   `Row::check` answers (packed by `PackedRow::pack`), signal flag
//!   included;
//! - on hand-assembled tables covering every kind of row (CFA from the
//!   stack or frame pointer, the PLT pattern, the DRAP CFA, an undefined
//!   return address, every frame-pointer rule, signal frames, refusals),
//!   `walk::walk_tables` (which steps by packed rows) walks what a walk
//!   stepping by `cfi::step` (the uncompiled step) walks, frame for frame;
//! - what is remembered: not a transient fault or read bound, but a pc no
//!   FDE covers; the two documented bounds (an FDE over 4 GiB, offsets
//!   beyond `i16`); FDEs that overlap in the table answer as the hdr
//!   search does, whatever the order they are filled in; the last pc;
//!   sorted insertion in every order;
//! - property tests: random FDE instruction streams, `cfi::compile`'s rows
//!   against `cfi::row_at` at every pc, the object's rows against
//!   `rules_in` at every pc, and random frames walked both ways.
//!
//! Objects missing here are skipped with a printed reason.
//!
//!   cargo test --release --test rows -- --nocapture

use gimli::{BaseAddresses, EhFrame, EhFrameOffset, UnwindContext, UnwindSection};
use object::{Object, ObjectSection, ObjectSegment};
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use unwind_logic::cfi::{
    self, Arch, Bound, Cause, Frame, Hdr, Reader, Refusal, Row, RowSink, Scratch, Step, UserBytes,
};
use unwind_logic::rows::{
    CfaRule, FdeEntry, Found, FpRule, ObjectRows, PackedRow, PcMemo, RaRule, Usual, MEMO_SLOTS,
    MEMO_WAYS, ROW_ROOM_MAX,
};
use unwind_logic::walk::{self, Stop, TableStats, Tables, UserMemory, UserRegs, WordSize};
use unwind_logic::walk_cases;

/// Compiled rows of an object, as the kernel keeps them (`KVec` there).
type Rows = ObjectRows<Vec<FdeEntry>, Vec<PackedRow>, Vec<unwind_logic::cfi::Probe>>;

/// A reader with no practical bound: the comparisons are about the
/// tables, not about the read budget (a transient refusal).
const LOTS: u32 = 1 << 24;

/// Everything a packed row answers, without its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct View {
    refusal: Option<Cause>,
    cfa: Option<CfaRule>,
    ra: RaRule,
    fp: FpRule,
    /// The public offsets as stored.
    raw: (i32, i16, i16),
}

fn view(p: &PackedRow) -> View {
    View {
        refusal: p.refusal(),
        cfa: p.cfa_rule(),
        ra: p.ra_rule(),
        fp: p.fp_rule(),
        raw: (p.cfa, p.ra, p.fp),
    }
}

/// The interrupted frame at `pc` (its own rules apply, no `- 1`).
fn at_pc(pc: u64) -> Frame {
    Frame {
        ip: pc,
        sp: 0,
        fp: None,
        ip_is_return_address: false,
        bx: unwind_logic::cfi::Saved::Unknown,
    }
}

/// What the uncompiled path answers for `pc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// The packed outcome of `rules_in` (and `check`), and the FDE's
    /// signal flag if `rules_in` found rules.
    Row(View, Option<bool>),
    /// A transient refusal: nothing to remember.
    Transient(Refusal),
}

fn oracle<M: UserBytes>(mem: &mut M, h: &Hdr, ws: WordSize, pc: u64) -> Answer {
    let mut r = Reader::with_limit(mem, LOTS);
    match cfi::rules_in(&mut r, h, ws, &at_pc(pc)) {
        Err(e) if cfi::transient(e) => Answer::Transient(e),
        res => {
            let signal = res.as_ref().ok().map(|&(_, s)| s);
            let packed = PackedRow::pack(0, res.map(|(row, _)| row), Arch::of(ws));
            Answer::Row(view(&packed), signal)
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::new()) };
}

/// `f` with the interpreter's state: one per test thread, reused by every
/// compilation of every FDE (as the kernel's, one per mm), so that the
/// rows compiled with a stale scratch are checked against the
/// interpreter's (`cfi::row_at`, a new state each time).
fn scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    SCRATCH.with(|s| f(&mut s.borrow_mut()))
}

/// What the compiled rows answer for `pc`: a lookup, else a fill.
/// Returns the answer and whether the lookup hit.
fn compiled<M: UserBytes>(
    rows: &mut Rows,
    mem: &mut M,
    h: &Hdr,
    ws: WordSize,
    pc: u64,
) -> (Result<Found, Refusal>, bool) {
    if let Some(found) = rows.lookup(pc) {
        return (Ok(found), true);
    }
    let mut r = Reader::with_limit(mem, LOTS);
    (scratch(|s| rows.fill(&mut r, h, ws, pc, s)), false)
}

/// Whether the compiled answer is the oracle's.
fn agrees(got: &Result<Found, Refusal>, want: &Answer) -> bool {
    match (got, want) {
        (Ok((row, signal)), Answer::Row(v, s)) => view(row) == *v && s.is_none_or(|s| s == *signal),
        (Err(e), Answer::Transient(t)) => e == t,
        // A refusal that could not be remembered.
        (Err(e), Answer::Row(v, None)) => !cfi::transient(*e) && v.refusal == Some(e.cause()),
        _ => false,
    }
}

/// A small deterministic generator (xorshift64*), for shuffles and samples.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// The invariants of an object's rows: FDEs sorted by first pc and
/// disjoint (so that the last one starting at or below a pc is the only
/// one that may hold it), each with at least one row, inside the rows,
/// the first starting at 0, starts strictly increasing and inside the
/// range.
fn check_invariants(rows: &Rows) -> Result<(), String> {
    let fdes = &rows.fdes;
    if let Some(w) = fdes.windows(2).find(|w| w[0].end > w[1].begin) {
        return Err(format!("FDEs out of order or overlapping: {:x?}", w));
    }
    for f in fdes {
        let first = f.first as usize;
        let r = rows
            .rows
            .get(first..first + f.count as usize)
            .ok_or_else(|| format!("rows of {f:x?} out of the store"))?;
        if r.is_empty() || r[0].start != 0 {
            return Err(format!("{f:x?}: first row {:?}", r.first()));
        }
        if r.windows(2).any(|w| w[0].start >= w[1].start)
            || r.iter().any(|x| u64::from(x.start) >= f.end - f.begin)
        {
            return Err(format!(
                "{f:x?}: starts {:?}",
                r.iter().map(|x| x.start).collect::<Vec<_>>()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Real objects.
// ---------------------------------------------------------------------

/// The object's loadable segments at their link-time addresses.
struct Image {
    segs: Vec<(u64, Vec<u8>)>,
}

impl UserBytes for Image {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        for (base, data) in &self.segs {
            let Some(off) = addr.checked_sub(*base) else {
                continue;
            };
            let off = usize::try_from(off).ok()?;
            if let Some(src) = off
                .checked_add(buf.len())
                .and_then(|end| data.get(off..end))
            {
                buf.copy_from_slice(src);
                return Some(());
            }
        }
        None
    }
}

/// Records where `cfi::compile` starts its rows.
struct Locs(Vec<u64>);

impl RowSink for Locs {
    fn row(&mut self, loc: u64, _row: Result<&Row, Refusal>) -> Result<(), Refusal> {
        self.0.push(loc);
        Ok(())
    }
}

#[derive(Default)]
struct Tally {
    /// Entries of the hdr table.
    fdes: u64,
    /// ... whose FDE could not be read (refused for every pc).
    fdes_unreadable: u64,
    /// ... whose table start is not their FDE's first pc.
    start_differs: u64,
    /// Table entries whose FDE overlaps the next entry's.
    overlaps: u64,
    pcs: u64,
    /// Answered by a lookup (the rest by a fill).
    hits: u64,
    /// The oracle's answers: usable rows, and refusals by cause.
    usable: u64,
    refused: BTreeMap<&'static str, u64>,
    transient: u64,
    /// pcs whose rules the interpreter has and a step could use, refused
    /// by the packing (offsets beyond i16), and an example.
    packing_bound: u64,
    packing_example: Option<String>,
    /// FDEs compiled, their rows, the most rows of one.
    compiled: u64,
    rows: u64,
    max_rows: u32,
    /// pcs remembered as covered by no FDE.
    no_fde: u64,
    bytes: usize,
    mismatches: Vec<String>,
}

/// The loaded image of an object: its segments at their link-time
/// addresses.
fn image_of(file: &object::File<'_>) -> Result<Image, String> {
    let mut image = Image { segs: Vec::new() };
    for seg in file.segments() {
        let d = seg.data().map_err(|e| e.to_string())?;
        image.segs.push((seg.address(), d.to_vec()));
    }
    Ok(image)
}

/// An x86 ELF object and the word size of its class.
fn parse_object(data: &[u8]) -> Result<(object::File<'_>, WordSize), String> {
    let file = object::File::parse(data).map_err(|e| format!("not ELF: {e}"))?;
    let ws = match file.architecture() {
        object::Architecture::X86_64 => WordSize::W8,
        object::Architecture::I386 => WordSize::W4,
        a => return Err(format!("architecture {a:?}")),
    };
    Ok((file, ws))
}

fn check_object(path: &str, seed: u64) -> Result<Tally, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let (file, ws) = parse_object(&data)?;
    let hdr_sec = file
        .section_by_name(".eh_frame_hdr")
        .ok_or("no .eh_frame_hdr")?;
    let ehf = file.section_by_name(".eh_frame").ok_or("no .eh_frame")?;
    let ehf_data = ehf.data().map_err(|e| e.to_string())?;
    let mut image = image_of(&file)?;
    let h = cfi::read_hdr(&mut Reader::new(&mut image), hdr_sec.address(), ws)
        .map_err(|e| format!("hdr: {e:?}"))?;
    if h.table_enc != 0x3b {
        return Err(format!("table encoding {:#x}", h.table_enc));
    }
    // gimli's rows, to find where the rules change independently of
    // `cfi::compile`.
    let mut eh_frame = EhFrame::new(ehf_data, gimli::LittleEndian);
    eh_frame.set_address_size(ws.bytes() as u8);
    let mut bases = BaseAddresses::default()
        .set_eh_frame(ehf.address())
        .set_eh_frame_hdr(hdr_sec.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut ctx = UnwindContext::new();
    let symbols = file.symbol_map();
    let name = |pc: u64| match symbols.get(pc) {
        Some(s) => format!("{pc:#x} ({}+{:#x})", s.name(), pc - s.address()),
        None => format!("{pc:#x}"),
    };

    let mut t = Tally::default();
    let mut rng = Rng(seed | 1);
    // The table: (start, FDE address).
    let mut table = Vec::new();
    for i in 0..h.count {
        let mut b = [0u8; 8];
        image
            .read_bytes(h.table + 8 * i, &mut b)
            .ok_or("table outside the image")?;
        let rel = |k: usize| {
            let v = i32::from_le_bytes(b[k..k + 4].try_into().unwrap());
            ws.wrap(h.addr.wrapping_add(v as i64 as u64))
        };
        table.push((rel(0), rel(4)));
    }
    t.fdes = table.len() as u64;
    // Every pc to check, with the FDE it was chosen for.
    let mut pcs: Vec<(u64, usize)> = Vec::new();
    // (begin, end) of the FDEs read.
    let mut ranges = BTreeSet::new();
    for (i, &(start, at)) in table.iter().enumerate() {
        let fde = match cfi::read_fde(&mut Reader::new(&mut image), h.eh_frame, at, ws) {
            Ok(f) => f,
            Err(_) => {
                t.fdes_unreadable += 1;
                pcs.push((start, i));
                continue;
            }
        };
        if fde.pc_begin != start {
            t.start_differs += 1;
        }
        if let Some(&(next, _)) = table.get(i + 1) {
            if fde.pc_end > next {
                t.overlaps += 1;
            }
        }
        ranges.insert((fde.pc_begin, fde.pc_end));
        let (b, e) = (fde.pc_begin, fde.pc_end);
        let len = e.saturating_sub(b);
        // Around the FDE: what the pcs next to it answer.
        pcs.push((b.wrapping_sub(1), i));
        pcs.push((e, i));
        if len <= 256 {
            pcs.extend((b..e).map(|pc| (pc, i)));
            continue;
        }
        let mut points = BTreeSet::new();
        let mut locs = Locs(Vec::new());
        let _ = scratch(|s| {
            cfi::compile(
                &mut Reader::with_limit(&mut image, LOTS),
                &fde,
                ws,
                &mut locs,
                s,
            )
        });
        points.extend(locs.0);
        let off = at.wrapping_sub(ehf.address()) as usize;
        if let Ok(g) =
            eh_frame.fde_from_offset(&bases, EhFrameOffset(off), EhFrame::cie_from_offset)
        {
            if let Ok(mut rows) = g.rows(&eh_frame, &bases, &mut ctx) {
                while let Ok(Some(row)) = rows.next_row() {
                    points.insert(row.start_address());
                }
            }
        }
        points.insert(b);
        points.insert(e - 1);
        for p in points {
            for pc in [p.wrapping_sub(1), p, p + 1] {
                if (b..e).contains(&pc) {
                    pcs.push((pc, i));
                }
            }
        }
        // A stride sample and a few at random.
        let stride = (len / 32).max(1);
        pcs.extend((b..e).step_by(stride as usize).map(|pc| (pc, i)));
        for _ in 0..16 {
            pcs.push((b + rng.below(len), i));
        }
    }
    // Filled in a shuffled order: every FDE is first met at some pc of it,
    // and inserted among the others in no particular order.
    rng.shuffle(&mut pcs);
    let mut rows = Rows::default();
    for &(pc, i) in &pcs {
        let want = oracle(&mut image, &h, ws, pc);
        let (got, hit) = compiled(&mut rows, &mut image, &h, ws, pc);
        t.pcs += 1;
        t.hits += u64::from(hit);
        match want {
            Answer::Row(v, _) => match v.refusal {
                None => t.usable += 1,
                Some(c) => {
                    *t.refused.entry(c.name()).or_default() += 1;
                    let mut r = Reader::with_limit(&mut image, LOTS);
                    if let Ok((row, _)) = cfi::rules_in(&mut r, &h, ws, &at_pc(pc)) {
                        if row.check(Arch::of(ws)).is_ok() {
                            t.packing_bound += 1;
                            t.packing_example
                                .get_or_insert_with(|| format!("{} {row:?}", name(pc)));
                        }
                    }
                }
            },
            Answer::Transient(_) => t.transient += 1,
        }
        if !agrees(&got, &want) && t.mismatches.len() < 20 {
            let (start, at) = table[i];
            t.mismatches.push(format!(
                "pc {} (table entry {i}: start {start:#x}, FDE {at:#x}): rows {got:?} (lookup hit: {hit}), rules_in {want:?}",
                name(pc)
            ));
        }
    }
    // Wrong rows break them: a failure, not a skipped object.
    if let Err(e) = check_invariants(&rows) {
        t.mismatches.push(format!("invariants: {e}"));
    }
    // Everything is remembered now: the same answers again, all lookups,
    // in another order.
    for &(pc, _) in pcs.iter().rev() {
        let want = oracle(&mut image, &h, ws, pc);
        match (rows.lookup(pc), want) {
            (Some(found), want) if agrees(&Ok(found), &want) => {}
            (None, Answer::Transient(_)) => {}
            (got, want) => {
                if t.mismatches.len() < 40 {
                    t.mismatches.push(format!(
                        "second pass, pc {}: lookup {got:?}, rules_in {want:?}",
                        name(pc)
                    ));
                }
            }
        }
    }
    for f in &rows.fdes {
        if ranges.contains(&(f.begin, f.end)) {
            t.compiled += 1;
            t.rows += u64::from(f.count);
            t.max_rows = t.max_rows.max(f.count);
        } else {
            t.no_fde += 1;
        }
    }
    t.bytes = rows.bytes();
    Ok(t)
}

/// The objects `cfi_oracle` checks, and a few more of this machine.
fn candidates() -> Vec<String> {
    let mut v: Vec<String> = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
        "/lib/i386-linux-gnu/libc.so.6",
        "/usr/lib32/libc.so.6",
        "/usr/lib32/libm.so.6",
        "/usr/lib32/ld-linux.so.2",
        "/lib/ld-linux.so.2",
        concat!(env!("CARGO_MANIFEST_DIR"), "/build/perf/perf"),
        "/work/main/build/perf/perf",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/build/kernel-c/arch/x86/entry/vdso/vdso32/vdso32.so"
        ),
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/build/kernel-c/arch/x86/entry/vdso/vdso64/vdso64.so"
        ),
        "/work/main/build/kernel-c/arch/x86/entry/vdso/vdso32/vdso32.so",
        "/work/main/build/kernel-c/arch/x86/entry/vdso/vdso64/vdso64.so",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // This test itself (Rust, built by this cargo).
    if let Ok(me) = std::env::current_exe() {
        v.push(me.display().to_string());
    }
    v
}

#[test]
fn real_objects_rows_are_rules_in() {
    let started = std::time::Instant::now();
    let mut seen = BTreeSet::new();
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    let mut total_pcs = 0;
    for (k, path) in candidates().iter().enumerate() {
        let Ok(real) = std::fs::canonicalize(path) else {
            println!("rows: {path}: skipped (not on this machine)");
            continue;
        };
        if !seen.insert(real.clone()) {
            println!("rows: {path}: skipped (same file as {})", real.display());
            continue;
        }
        let t0 = std::time::Instant::now();
        match check_object(path, 0x9e37_79b9_7f4a_7c15 ^ k as u64) {
            Err(why) => println!("rows: {path}: skipped ({why})"),
            Ok(t) => {
                checked.push(path.clone());
                total_pcs += t.pcs;
                println!(
                    "rows: {path}: {} FDEs ({} unreadable, {} table starts differ, {} overlap the next), \
                     {} pcs ({} by lookup, {} by fill; {} usable, {} transient), \
                     {} FDEs compiled into {} rows ({:.2} rows/FDE, at most {}), \
                     {} pcs remembered without FDE, {} bytes, {} mismatches, {:.1} s",
                    t.fdes,
                    t.fdes_unreadable,
                    t.start_differs,
                    t.overlaps,
                    t.pcs,
                    t.hits,
                    t.pcs - t.hits,
                    t.usable,
                    t.transient,
                    t.compiled,
                    t.rows,
                    t.rows as f64 / t.compiled.max(1) as f64,
                    t.max_rows,
                    t.no_fde,
                    t.bytes,
                    t.mismatches.len(),
                    t0.elapsed().as_secs_f64()
                );
                for (cause, n) in &t.refused {
                    println!("    refused: {cause}: {n}");
                }
                if let Some(eg) = &t.packing_example {
                    println!(
                        "    of which usable rules beyond the packing's i16 bound: {} (e.g. {eg})",
                        t.packing_bound
                    );
                }
                for m in &t.mismatches {
                    println!("    MISMATCH {m}");
                }
                if !t.mismatches.is_empty() {
                    failures.push(path.clone());
                }
                // A real object gives rows to most of its pcs.
                if t.usable * 10 < t.pcs * 8 {
                    failures.push(format!("{path}: only {} of {} pcs usable", t.usable, t.pcs));
                }
            }
        }
    }
    println!(
        "rows: {} objects, {total_pcs} pcs in {:.1} s",
        checked.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        checked.iter().any(|p| p.contains("libc.so")),
        "no libc to check on this machine (checked {checked:?})"
    );
    assert!(total_pcs >= 100_000, "only {total_pcs} pcs checked");
    assert!(
        failures.is_empty(),
        "rows disagree with rules_in: {failures:?}"
    );
}

/// A probe store with no room: rows without the hdr search's memo.
#[derive(Default)]
struct NoProbes;

impl unwind_logic::rows::Store<cfi::Probe> for NoProbes {
    fn items(&self) -> &[cfi::Probe] {
        &[]
    }
    fn items_mut(&mut self) -> &mut [cfi::Probe] {
        &mut []
    }
    fn push(&mut self, _: cfi::Probe) -> bool {
        false
    }
    fn truncate(&mut self, _: usize) {}
}

/// Counts the reads of an [`Image`].
struct Counted<'a>(&'a mut Image, u64);

impl UserBytes for Counted<'_> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        self.1 += 1;
        self.0.read_bytes(addr, buf)
    }
}

/// The reads of compiling the first FDEs a process meets, in a random
/// order, with the hdr search's memo ([`cfi::Probe`]) and without: the
/// same answers, never more reads, and how many fewer (printed: what a
/// first walk and a program's first seconds pay from the page cache,
/// where each probe on a new page is a folio lookup).
#[test]
fn probe_memo_on_real_objects() {
    let mut seen = BTreeSet::new();
    let mut libc = None;
    for (k, path) in candidates().iter().enumerate() {
        let Ok(real) = std::fs::canonicalize(path) else {
            continue;
        };
        if !seen.insert(real) {
            continue;
        }
        let Ok(data) = std::fs::read(path) else {
            continue;
        };
        let Ok((file, ws)) = parse_object(&data) else {
            continue;
        };
        let Some(hdr_sec) = file.section_by_name(".eh_frame_hdr") else {
            continue;
        };
        let Ok(mut image) = image_of(&file) else {
            continue;
        };
        let Ok(h) = cfi::read_hdr(&mut Reader::new(&mut image), hdr_sec.address(), ws) else {
            continue;
        };
        // The first pc of 200 entries at random (a few met twice).
        let mut rng = Rng(0x5851_f42d_4c95_7f2d ^ k as u64);
        let starts: Vec<u64> = (0..200)
            .filter_map(|_| {
                let i = rng.below(h.count);
                let mut b = [0u8; 4];
                image.read_bytes(h.table + 8 * i, &mut b)?;
                let v = i32::from_le_bytes(b);
                Some(ws.wrap(h.addr.wrapping_add(v as i64 as u64)))
            })
            .collect();
        let mut memo = Rows::default();
        let mut plain = ObjectRows::<Vec<FdeEntry>, Vec<PackedRow>, NoProbes>::default();
        let (mut with, mut without, mut fills) = (0u64, 0u64, 0u64);
        for &pc in &starts {
            if memo.lookup(pc).is_some() {
                assert!(plain.lookup(pc).is_some(), "{path}: {pc:#x}");
                continue;
            }
            let mut m = Counted(&mut image, 0);
            let a = scratch(|s| memo.fill(&mut Reader::with_limit(&mut m, LOTS), &h, ws, pc, s));
            let reads_with = m.1;
            let mut m = Counted(&mut image, 0);
            let b = scratch(|s| plain.fill(&mut Reader::with_limit(&mut m, LOTS), &h, ws, pc, s));
            assert_eq!(a, b, "{path}: pc {pc:#x}");
            assert!(
                reads_with <= m.1,
                "{path}: pc {pc:#x}: {reads_with} > {}",
                m.1
            );
            with += reads_with;
            without += m.1;
            fills += 1;
        }
        assert_eq!(memo.fdes, plain.fdes, "{path}");
        assert_eq!(memo.rows, plain.rows, "{path}");
        let per = |n: u64| n as f64 / fills.max(1) as f64;
        println!(
            "probe memo: {path}: {} entries, {fills} FDEs compiled: {:.1} reads each with the memo, {:.1} without",
            h.count,
            per(with),
            per(without)
        );
        if path.contains("libc.so") && h.count > 1000 {
            libc = Some((per(with), per(without)));
        }
    }
    // libc's table is thousands of entries: the memo saves most of the
    // search's first probes.
    let (with, without) = libc.expect("no libc on this machine");
    assert!(
        with + 3.0 < without,
        "libc: {with:.1} reads a new FDE with the memo, {without:.1} without"
    );
}

// ---------------------------------------------------------------------
// Hand-assembled tables.
// ---------------------------------------------------------------------

const HDR: u64 = 0x1000;
const EH_FRAME: u64 = 0x6000;
const CODE: u64 = 0x40_0000;
/// Two probe FDEs meet here ([`walk_object`]).
const PROBE: u64 = CODE + 0x1000;
/// The stack: every word holds its own address + [`PATTERN`].
const STACK: u64 = 0x7ff0_0000;
const STACK_LEN: u64 = 0x1000;
const PATTERN: u64 = 0x100;

/// Sparse user memory for the tables, a dense stack; bytes not stored
/// cannot be read.  Counts reads.
#[derive(Clone, Default, Debug)]
struct Mem {
    bytes: BTreeMap<u64, u8>,
    stack: Vec<u8>,
    reads: u32,
}

impl Mem {
    fn in_stack(&self, addr: u64) -> Option<usize> {
        let off = usize::try_from(addr.checked_sub(STACK)?).ok()?;
        (off < self.stack.len()).then_some(off)
    }
    fn put(&mut self, addr: u64, data: &[u8]) {
        for (i, b) in data.iter().enumerate() {
            let a = addr + i as u64;
            match self.in_stack(a) {
                Some(off) => self.stack[off] = *b,
                None => {
                    self.bytes.insert(a, *b);
                }
            }
        }
    }
    fn put_word(&mut self, addr: u64, v: u64, ws: WordSize) {
        let b = v.to_le_bytes();
        self.put(addr, &b[..ws.bytes() as usize]);
    }
    fn byte(&self, a: u64) -> Option<u8> {
        match self.in_stack(a) {
            Some(off) => Some(self.stack[off]),
            None => self.bytes.get(&a).copied(),
        }
    }
    /// The patterned stack: the word at `a` is `a + PATTERN`.
    fn with_stack(mut self, ws: WordSize) -> Mem {
        self.stack = vec![0; STACK_LEN as usize];
        for a in (STACK..STACK + STACK_LEN).step_by(ws.bytes() as usize) {
            self.put_word(a, a + PATTERN, ws);
        }
        self
    }
}

impl UserBytes for Mem {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        self.reads += 1;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.byte(addr.checked_add(i as u64)?)?;
        }
        Some(())
    }
}

impl UserMemory for Mem {
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read_bytes(addr, &mut b[..ws.bytes() as usize])?;
        Some(u64::from_le_bytes(b))
    }
}

fn uleb(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn sleb(mut v: i64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0) {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A CIE's description (version 1, augmentation "z..." with `R`).
#[derive(Clone)]
struct Cie {
    aug: &'static str,
    code_align: u64,
    data_align: i64,
    ra: u64,
    /// The `R` encoding.
    enc: u8,
    insns: Vec<u8>,
}

impl Cie {
    /// The usual CIE: CFA = sp + word, return address at CFA - word.
    fn usual(ws: WordSize) -> Cie {
        let a = Arch::of(ws);
        let w = ws.bytes() as u8;
        Cie {
            aug: "zR",
            code_align: 1,
            data_align: -(ws.bytes() as i64),
            ra: a.ra,
            enc: 0x1b,
            insns: vec![0x0c, a.sp as u8, w, 0x80 | a.ra as u8, 1],
        }
    }
    fn bytes(&self) -> Vec<u8> {
        let mut body = vec![0, 0, 0, 0, 1];
        body.extend(self.aug.as_bytes());
        body.push(0);
        body.extend(uleb(self.code_align));
        body.extend(sleb(self.data_align));
        body.push(self.ra as u8);
        body.extend(uleb(1));
        body.push(self.enc);
        body.extend(&self.insns);
        entry(body)
    }
}

fn entry(body: Vec<u8>) -> Vec<u8> {
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend(body);
    out
}

struct FdeSpec {
    cie: usize,
    begin: u64,
    len: u64,
    insns: Vec<u8>,
}

/// CIEs and FDEs laid out in `.eh_frame` at EH_FRAME and an
/// `.eh_frame_hdr` at HDR (eh_frame_ptr pcrel|sdata4, fde_count udata4,
/// table datarel|sdata4).
struct Obj {
    cies: Vec<Cie>,
    fdes: Vec<FdeSpec>,
}

/// The CIEs of every [`Obj::new`]: the usual one, a signal frame's, and
/// one with code alignment 2 and absolute pointers (for `set_loc`).
const CIE_USUAL: usize = 0;
const CIE_SIGNAL: usize = 1;
const CIE_ABS: usize = 2;

impl Obj {
    fn new(ws: WordSize) -> Obj {
        let usual = Cie::usual(ws);
        let signal = Cie {
            aug: "zRS",
            ..usual.clone()
        };
        let abs = Cie {
            code_align: 2,
            enc: if ws == WordSize::W8 { 0x00 } else { 0x03 },
            ..usual.clone()
        };
        Obj {
            cies: vec![usual, signal, abs],
            fdes: Vec::new(),
        }
    }
    fn fde_of(mut self, cie: usize, begin: u64, len: u64, insns: Vec<u8>) -> Obj {
        self.fdes.push(FdeSpec {
            cie,
            begin,
            len,
            insns,
        });
        self
    }
    fn fde(self, begin: u64, len: u64, insns: Vec<u8>) -> Obj {
        self.fde_of(CIE_USUAL, begin, len, insns)
    }
    /// The memory and the FDEs' addresses.
    fn build(&self) -> (Mem, Vec<u64>) {
        let mut sec = Vec::new();
        let mut cie_at = Vec::new();
        for c in &self.cies {
            cie_at.push(EH_FRAME + sec.len() as u64);
            sec.extend(c.bytes());
        }
        let mut fde_at = Vec::new();
        for f in &self.fdes {
            let at = EH_FRAME + sec.len() as u64;
            fde_at.push(at);
            let id_at = at + 4;
            let mut body = ((id_at - cie_at[f.cie]) as u32).to_le_bytes().to_vec();
            let pc_field = id_at + 4;
            match self.cies[f.cie].enc {
                0x1b => {
                    body.extend((f.begin.wrapping_sub(pc_field) as u32).to_le_bytes());
                    body.extend((f.len as u32).to_le_bytes());
                }
                0x03 => {
                    body.extend((f.begin as u32).to_le_bytes());
                    body.extend((f.len as u32).to_le_bytes());
                }
                _ => {
                    body.extend(f.begin.to_le_bytes());
                    body.extend(f.len.to_le_bytes());
                }
            }
            body.push(0);
            body.extend(&f.insns);
            sec.extend(entry(body));
        }
        sec.extend([0, 0, 0, 0]);
        let mut mem = Mem::default();
        mem.put(EH_FRAME, &sec);
        let mut hdr = vec![1, 0x1b, 0x03, 0x3b];
        hdr.extend(((EH_FRAME as i64 - (HDR as i64 + 4)) as i32).to_le_bytes());
        hdr.extend((self.fdes.len() as u32).to_le_bytes());
        let mut table: Vec<(u64, u64)> = self
            .fdes
            .iter()
            .zip(&fde_at)
            .map(|(f, &a)| (f.begin, a))
            .collect();
        table.sort();
        for (b, a) in table {
            hdr.extend(((b as i64 - HDR as i64) as i32).to_le_bytes());
            hdr.extend(((a as i64 - HDR as i64) as i32).to_le_bytes());
        }
        mem.put(HDR, &hdr);
        (mem, fde_at)
    }
}

fn hdr_of(mem: &mut Mem, ws: WordSize) -> Hdr {
    cfi::read_hdr(&mut Reader::new(mem), HDR, ws).expect("hdr")
}

/// The walk's tables: one object, mapped everywhere, with its rows, as
/// `cfi_live`'s `MapsTables` (and the kernel) keep them.
#[derive(Clone)]
struct OneObject {
    hdr: Hdr,
    rows: Rows,
    /// Lookups that missed (FDEs compiled, pcs remembered as not covered).
    fills: u32,
    /// The kernel's memo of recent pcs' rows in front of the rows (the
    /// second walk of a case answers from it).
    memo: Option<Box<PcMemo>>,
    /// Frames the memo answered as usual rows (`Tables::memo`: the
    /// walk's run of usual frames).
    usual_hits: u32,
    /// Which asks `Tables::known` leaves pending though it could answer
    /// them (see [`table_walk`]).
    pend: Pend,
    /// The asks `Tables::known` was called for.
    asked: u32,
    /// Answers given, by `Tables::row` or `Tables::known` (each ask of a
    /// walk is answered once, whichever answers it).
    answers: u32,
}

impl OneObject {
    fn new(mem: &mut Mem, ws: WordSize) -> OneObject {
        OneObject {
            hdr: hdr_of(mem, ws),
            rows: Rows::default(),
            fills: 0,
            memo: Some(Box::new(PcMemo::empty())),
            usual_hits: 0,
            pend: Pend::None,
            asked: 0,
            answers: 0,
        }
    }

    /// The counts that tell how the walk asked: fills, memo hits and
    /// answers.
    fn counts(&self) -> (u32, u32, u32) {
        (self.fills, self.usual_hits, self.answers)
    }
}

impl Tables for OneObject {
    fn row<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        self.answers += 1;
        if let Some(found) = self.memo.as_ref().and_then(|m| m.get(pc, ws)) {
            return Some(Ok(found));
        }
        let found = match self.rows.lookup(pc) {
            Some(found) => found,
            None => {
                self.fills += 1;
                match scratch(|s| self.rows.fill(r, &self.hdr, ws, pc, s)) {
                    Ok(found) => found,
                    Err(e) => return Some(Err(e.cause())),
                }
            }
        };
        if let Some(m) = self.memo.as_mut() {
            m.put(pc, ws, found);
        }
        Some(Ok(found))
    }

    /// As the kernel's: the memo's or the compiled rows' answer, else
    /// pending (nothing counted).
    fn known(&mut self, pc: u64, ws: WordSize) -> Option<Option<Result<Found, Cause>>> {
        self.asked += 1;
        let pend = match self.pend {
            Pend::None => false,
            Pend::All => true,
            Pend::Odd => self.asked % 2 == 1,
            Pend::Even => self.asked.is_multiple_of(2),
        };
        if pend {
            return None;
        }
        let found = match self.memo.as_ref().and_then(|m| m.get(pc, ws)) {
            Some(found) => found,
            None => {
                let found = self.rows.lookup(pc)?;
                if let Some(m) = self.memo.as_mut() {
                    m.put(pc, ws, found);
                }
                found
            }
        };
        self.answers += 1;
        Some(Some(Ok(found)))
    }

    fn memo(&self) -> Option<&PcMemo> {
        self.memo.as_deref()
    }

    fn memo_hits(&mut self, n: u32) {
        self.usual_hits += n;
    }
}

/// A context of word size `ws`, no function-entry rule, no segment bases.
fn regs(ws: WordSize, ip: u64, sp: u64, fp: u64) -> UserRegs {
    // %rbx somewhat above sp, so that a CFA based on it can be used.
    let bx = sp + 6 * ws.bytes();
    match ws {
        WordSize::W8 => UserRegs {
            bx,
            ..walk_cases::regs64(ip, sp, fp)
        },
        WordSize::W4 => UserRegs {
            ws,
            bx,
            user_limit: walk_cases::LIMIT32,
            fp_frame: walk_cases::x86_fp_frame(ws),
            entry_frame: walk_cases::x86_entry_frame(ws),
            ..walk_cases::regs64(ip, sp, fp)
        },
    }
}

/// What a walk did: the trace, why it ended, and its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    trace: Vec<u64>,
    stop: Stop,
    table_frames: u32,
    fp_frames: u32,
    refused: [u32; Cause::COUNT],
}

/// `walk::walk_tables` with `cfi::step` as the table step: the reference.
/// Each frame is first stepped by `cfi::step` (search, FDE, interpreter,
/// `cfi::apply`); where it refuses, by x86's frame-pointer frame, as
/// `walk::walk` does.  Also returns the frame-0 step's result.
fn reference_walk(regs: &UserRegs, mem: &mut Mem, max: usize) -> (Outcome, Result<Step, Refusal>) {
    let ws = regs.ws;
    let w = ws.bytes();
    let mut f = Frame {
        ip: regs.ip,
        sp: regs.sp,
        fp: Some(regs.fp),
        ip_is_return_address: false,
        // %rbx from the registers, as the kernel's walk starts.
        bx: unwind_logic::cfi::Saved::Value(regs.bx),
    };
    let mut o = Outcome {
        trace: Vec::new(),
        stop: Stop::Full,
        table_frames: 0,
        fp_frames: 0,
        refused: [0; Cause::COUNT],
    };
    let mut first = None;
    loop {
        o.trace.push(f.ip);
        if o.trace.len() >= max {
            o.stop = Stop::Full;
            break;
        }
        let step = cfi::step(mem, HDR, ws, &f);
        first.get_or_insert(step);
        match step {
            Ok(Step::Caller(c)) => {
                if c.ip >= regs.user_limit {
                    o.stop = Stop::NotUser;
                    break;
                }
                f = c;
                o.table_frames += 1;
                continue;
            }
            Ok(Step::EndOfStack) => {
                o.stop = Stop::EndOfStack;
                break;
            }
            Err(e) => o.refused[e.cause() as usize] += 1,
        }
        // x86's frame-pointer frame: CFA = fp + 2 words, the caller's
        // frame pointer and return address just below it.
        let Some(fp) = f.fp else {
            o.stop = Stop::FpUnknown;
            break;
        };
        if fp < f.sp {
            o.stop = Stop::FramePointerBelowStack;
            break;
        }
        let Some(cfa) = fp
            .checked_add(2 * w)
            .filter(|&c| c > f.sp && ws.wrap(c) == c)
        else {
            o.stop = Stop::NotGrowing;
            break;
        };
        if cfa & (w - 1) != 0 {
            o.stop = Stop::Unaligned;
            break;
        }
        let (Some(nfp), Some(ra)) = (mem.read_word(cfa - 2 * w, ws), mem.read_word(cfa - w, ws))
        else {
            o.stop = Stop::Fault;
            break;
        };
        if ws.wrap(ra) >= regs.user_limit {
            o.stop = Stop::NotUser;
            break;
        }
        f = Frame {
            ip: ws.wrap(ra),
            sp: cfa,
            fp: Some(ws.wrap(nfp)),
            ip_is_return_address: true,
            bx: unwind_logic::cfi::Saved::Unknown,
        };
        o.fp_frames += 1;
    }
    (o, first.unwrap_or(Err(Refusal::NoFde)))
}

/// Which asks a [`OneObject`]'s `Tables::known` leaves pending though it
/// could answer them: none (as the kernel's), all, or every other one
/// (so that a step's first ask is answered and its second left pending,
/// and the other way round).
#[derive(Clone, Copy, Debug)]
enum Pend {
    None,
    All,
    Odd,
    Even,
}

/// Tables whose walk [`table_walk`] runs four times: as they are, and
/// with the asks of the walk left pending as each [`Pend`] says, so that
/// those asks go through `Tables::row` from `walk_tables_from`'s frame
/// and the walk goes on with its answer.
trait Twin: Tables + Clone {
    fn pend(&mut self, pend: Pend);
    /// Counts of how the walk asked (fills, memo hits, answers).
    fn counts(&self) -> (u32, u32, u32);
}

impl Twin for OneObject {
    fn pend(&mut self, pend: Pend) {
        self.pend = pend;
    }
    fn counts(&self) -> (u32, u32, u32) {
        OneObject::counts(self)
    }
}

impl Twin for Leave {
    fn pend(&mut self, pend: Pend) {
        self.t.pend = pend;
    }
    fn counts(&self) -> (u32, u32, u32) {
        self.t.counts()
    }
}

/// `walk::walk_tables` over `mem` with `tables`; the same walk with its
/// asks left pending as each [`Pend`] says and answered by `Tables::row`
/// (a copy of `tables` each) must end the same: its trace, stop, every
/// counter and read, and the tables' fills, memo hits and answers.
fn table_walk<T: Twin>(
    regs: &UserRegs,
    mem: &mut Mem,
    tables: &mut T,
    max: usize,
) -> (Outcome, TableStats) {
    let walk_with = |mem: &mut Mem, tables: &mut T| {
        let mut out = vec![0u64; max];
        let mut stats = TableStats::default();
        let (n, stop) = walk::walk_tables(regs, mem, tables, &mut out, &mut stats);
        out.truncate(n);
        (
            Outcome {
                trace: out,
                stop,
                table_frames: stats.table_frames,
                fp_frames: stats.fp_frames,
                refused: stats.refused,
            },
            stats,
        )
    };
    let twins: Vec<_> = [Pend::All, Pend::Odd, Pend::Even]
        .into_iter()
        .map(|pend| {
            let mut t = tables.clone();
            t.pend(pend);
            (pend, walk_with(&mut mem.clone(), &mut t), t.counts())
        })
        .collect();
    let got = walk_with(mem, tables);
    for (pend, twin, counts) in twins {
        assert_eq!(twin, got, "asks pending ({pend:?}): another walk");
        assert_eq!(
            counts,
            tables.counts(),
            "asks pending ({pend:?}): other counts"
        );
    }
    got
}

/// Which rules the probe FDE over the stack has (see [`walk_object`]).
#[derive(Clone, Copy, Debug)]
enum Probe {
    /// CFA = sp + word, return address at CFA - word: the next ip is the
    /// word at the caller's sp, which tells the sp.
    Sp,
    /// x86's frame-pointer frame: the next ip is the word at the caller's
    /// fp + word, which tells the fp.
    Fp,
}

/// The object of a walk case: the FDE under test at CODE (0x100 bytes,
/// from the usual or the signal frame's CIE), and probes that make what
/// the step computed visible in the trace:
///
/// - the stack's words are their addresses + PATTERN, and an FDE covers
///   them as code: a return address read from the stack is such a word,
///   and the next frame, stepped by that FDE's `probe` rules, reads a word
///   that tells the caller's sp or fp;
/// - around PROBE two FDEs meet, whose rules differ (CFA = sp + 1 or 2
///   words): a return address of PROBE tells whether the caller's rules
///   were looked up at its ip or ip - 1 (after a signal frame or not).
fn walk_object(ws: WordSize, cie: usize, insns: Vec<u8>, probe: Probe) -> Obj {
    let a = Arch::of(ws);
    let w = ws.bytes() as u8;
    let pattern = match probe {
        Probe::Sp => vec![],
        Probe::Fp => vec![0x0c, a.fp as u8, 2 * w, 0x80 | a.fp as u8, 2],
    };
    Obj::new(ws)
        .fde_of(cie, CODE, 0x100, insns)
        .fde(PROBE - 0x10, 0x10, vec![])
        .fde(PROBE, 0x10, vec![0x0e, 2 * w])
        .fde(STACK, STACK_LEN + 2 * PATTERN, pattern)
}

/// A walk case: the FDE under test and the interrupted frame in it.
#[derive(Clone, Debug)]
struct WalkCase {
    name: String,
    ws: WordSize,
    cie: usize,
    insns: Vec<u8>,
    /// The pc's offset in the FDE.
    off: u64,
    sp: u64,
    fp: u64,
}

/// The frame-0 return-address slot of the case on the patterned stack
/// (where `cfi::step` read the return address), if it is a word of the
/// pattern.
fn ra_slot(mem: &mut Mem, c: &WalkCase) -> Option<u64> {
    let f = Frame {
        ip: CODE + c.off,
        sp: c.sp,
        fp: Some(c.fp),
        ip_is_return_address: false,
        bx: unwind_logic::cfi::Saved::Unknown,
    };
    let Ok(Step::Caller(caller)) = cfi::step(mem, HDR, c.ws, &f) else {
        return None;
    };
    let slot = caller.ip.checked_sub(PATTERN)?;
    (slot % c.ws.bytes() == 0 && mem.read_word(slot, c.ws) == Some(caller.ip)).then_some(slot)
}

/// What a case exercised (to check the hand-written cases cover every
/// kind of row).
fn kinds(row: &PackedRow, signal: bool) -> Vec<&'static str> {
    let mut k = vec![match row.cfa_rule() {
        Some(CfaRule::Sp(_)) => "cfa sp",
        Some(CfaRule::Fp(_)) => "cfa fp",
        Some(CfaRule::Plt(_)) => "cfa plt",
        Some(CfaRule::DerefFp(_)) => "cfa deref fp",
        Some(CfaRule::DerefSp(_)) => "cfa deref sp",
        Some(CfaRule::Bx(_)) => "cfa bx",
        None => "refused",
    }];
    if row.refusal().is_none() {
        k.push(match row.ra_rule() {
            RaRule::At(_) => "ra at",
            RaRule::AtSp(_) => "ra at sp",
            RaRule::Undefined => "ra undefined",
        });
        k.push(match row.fp_rule() {
            FpRule::Keep => "fp keep",
            FpRule::At(_) => "fp at",
            FpRule::Val(_) => "fp val",
            FpRule::AtFp(_) => "fp at fp",
            FpRule::AtSp(_) => "fp at sp",
            FpRule::Undefined => "fp undefined",
        });
        if signal {
            k.push("signal");
        }
    }
    k
}

/// Walk `c` both ways, with each probe, on the patterned stack and with
/// the return address replaced by PROBE (and by a kernel address): the
/// same trace, stop and steps.  Also: the rows of the FDE under test are
/// `rules_in`'s at every pc of it.  Returns what frame 0 exercised and
/// the causes of the reference's refused steps.
fn check_walk_case(c: &WalkCase) -> Result<(Vec<&'static str>, Vec<Cause>), String> {
    let ws = c.ws;
    let mut exercised = Vec::new();
    let mut refused = Vec::new();
    for probe in [Probe::Sp, Probe::Fp] {
        let (mem, _) = walk_object(ws, c.cie, c.insns.clone(), probe).build();
        let mut mem = mem.with_stack(ws);
        // The rows of the FDE under test, pc by pc.
        let h = hdr_of(&mut mem, ws);
        let mut rows = Rows::default();
        for pc in CODE..CODE + 0x100 {
            let want = oracle(&mut mem, &h, ws, pc);
            let (got, _) = compiled(&mut rows, &mut mem, &h, ws, pc);
            if !agrees(&got, &want) {
                return Err(format!(
                    "{}: pc {pc:#x}: rows {got:?}, rules_in {want:?}",
                    c.name
                ));
            }
        }
        let slot = ra_slot(&mut mem, c);
        let mut variants = vec![("patterned stack", mem.clone())];
        if let Some(slot) = slot {
            let mut m = mem.clone();
            m.put_word(slot, PROBE, ws);
            variants.push(("return address PROBE", m));
            if ws == WordSize::W8 {
                let mut m = mem.clone();
                m.put_word(slot, 0xffff_ffff_8100_0000, ws);
                variants.push(("return address in the kernel", m));
            }
        }
        for (what, mem) in variants {
            let r = regs(ws, CODE + c.off, c.sp, c.fp);
            let (want, step) = reference_walk(&r, &mut mem.clone(), 8);
            refused.extend(Cause::ALL.iter().filter(|&&k| want.refused[k as usize] > 0));
            let mut m = mem.clone();
            let mut tables = OneObject::new(&mut m, ws);
            let (got, _) = table_walk(&r, &mut m, &mut tables, 8);
            if got != want {
                return Err(format!(
                    "{} ({probe:?} probe, {what}): walk_tables {got:x?}, by cfi::step {want:x?}",
                    c.name
                ));
            }
            // Again with every row remembered: nothing compiled, the same
            // (usual rows now stepped by the walk's run from the memo).
            let fills = tables.fills;
            let hits = tables.usual_hits;
            let (again, stats) = table_walk(&r, &mut m, &mut tables, 8);
            if tables.usual_hits > 0 {
                exercised.push("usual run");
            }
            // A walk that ended at its first frame's end row, counted as
            // a hit of the run: the memo's end row (`PcMemo::end`).  (An
            // end row whose CFA is refused, the walk goes on by the frame
            // pointer: the same walk as the reference's, above.)
            if again.trace.len() == 1
                && again.stop == Stop::EndOfStack
                && tables.usual_hits == hits + 1
            {
                exercised.push("end run");
            }
            if again != want || tables.fills != fills {
                return Err(format!(
                    "{} ({probe:?} probe, {what}): second walk {again:x?} ({} fills), first {want:x?}",
                    c.name,
                    tables.fills - fills
                ));
            }
            // Nothing compiled: the reads are the table steps' stack
            // reads, at most three words a step (the last one may end
            // the walk).
            let steps = stats.table_frames + stats.refused.iter().sum::<u32>() + 1;
            if stats.reads > 3 * steps {
                return Err(format!(
                    "{}: {} reads for {} table steps",
                    c.name, stats.reads, steps
                ));
            }
            let stepped = step.is_ok();
            if stepped {
                if let Some((row, signal)) = tables.rows.lookup(CODE + c.off) {
                    exercised.extend(kinds(&row, signal));
                }
            }
        }
    }
    Ok((exercised, refused))
}

/// Bytes of `DW_CFA_def_cfa_expression` of x86's PLT pattern.
fn plt_insns(ws: WordSize, threshold: u8, shift: u8) -> Vec<u8> {
    let a = Arch::of(ws);
    let w = ws.bytes() as u8;
    vec![
        0x0f,
        11,
        0x70 + a.sp as u8,
        w,
        0x70 + a.ra as u8,
        0,
        0x3f,
        0x1a,
        0x30 + threshold,
        0x2a,
        0x30 + shift,
        0x24,
        0x22,
    ]
}

/// `DW_CFA_def_cfa_expression: DW_OP_breg<fp> off; DW_OP_deref`.
fn deref_fp_insns(ws: WordSize, off: i64) -> Vec<u8> {
    let e = [vec![0x70 + Arch::of(ws).fp as u8], sleb(off), vec![0x06]].concat();
    [vec![0x0f, e.len() as u8], e].concat()
}

/// `DW_CFA_expression <fp>: DW_OP_breg<fp> off`.
fn at_fp_insns(ws: WordSize, off: i64) -> Vec<u8> {
    let fp = Arch::of(ws).fp as u8;
    let e = [vec![0x70 + fp], sleb(off)].concat();
    [vec![0x10, fp, e.len() as u8], e].concat()
}

/// A signal frame's (`__restore_rt`): `DW_CFA_def_cfa_expression:
/// DW_OP_breg<sp> cfa; DW_OP_deref`, and the return address and frame
/// pointer `DW_CFA_expression: DW_OP_breg<sp> off`.
fn sigreturn_insns(ws: WordSize, cfa: i64, ra: i64, fp: i64) -> Vec<u8> {
    let a = Arch::of(ws);
    let sp = 0x70 + a.sp as u8;
    let e = [vec![sp], sleb(cfa), vec![0x06]].concat();
    let at = |reg: u8, off: i64| {
        let e = [vec![sp], sleb(off)].concat();
        [vec![0x10, reg, e.len() as u8], e].concat()
    };
    [
        vec![0x0f, e.len() as u8],
        e,
        at(a.ra as u8, ra),
        at(a.fp as u8, fp),
    ]
    .concat()
}

/// A signal frame's rules as the i386 vDSO's sigreturn gives them since
/// 7.3 (`CFI_DEF_CFA esp, K; CFI_OFFSET esp/eip/ebp, ...`): CFA = sp +
/// `k` words, and the interrupted sp, ip and fp saved at CFA + 8, 9 and
/// 3 words (`DW_CFA_offset_extended_sf`, factored by the data alignment
/// of -1 word).
fn sigcontext_insns(ws: WordSize, k: u8) -> Vec<u8> {
    let a = Arch::of(ws);
    let (sp, fp, ra) = (a.sp as u8, a.fp as u8, a.ra as u8);
    let w = ws.bytes() as u8;
    let mut v = vec![0x0c, sp, k * w];
    // sleb128 -8, -9, -3.
    for (reg, n) in [(sp, 0x78), (ra, 0x77), (fp, 0x7d)] {
        v.extend([0x11, reg, n]);
    }
    v
}

/// The hand-written cases of word size `ws`.
fn walk_cases_of(ws: WordSize) -> Vec<WalkCase> {
    let a = Arch::of(ws);
    let (sp, fp, ra) = (a.sp as u8, a.fp as u8, a.ra as u8);
    let w = ws.bytes() as u8;
    let (sp0, fp0) = (STACK + 0x800, STACK + 0xc00);
    let case = |name: &str, insns: Vec<u8>, off: u64| WalkCase {
        name: format!("{ws:?} {name}"),
        ws,
        cie: CIE_USUAL,
        insns,
        off,
        sp: sp0,
        fp: fp0,
    };
    // push %rbp; mov %rsp,%rbp; ...; leave
    let fp_frame = vec![
        0x41,
        0x0e,
        2 * w,
        0x80 | fp,
        2,
        0x43,
        0x0d,
        fp,
        0x4c,
        0x0c,
        sp,
        w,
    ];
    let mut v = vec![
        case("CIE's row: sp + word", vec![], 0),
        case("sp + offset", vec![0x41, 0x0e, 4 * w], 1),
        case("fp frame, entry", fp_frame.clone(), 0),
        case("fp frame, after push", fp_frame.clone(), 1),
        case("fp frame, body", fp_frame.clone(), 8),
        case("fp frame, after leave", fp_frame.clone(), 0x10),
        case("end of stack", vec![0x07, ra], 0),
        case(
            "end of stack, CFA unaligned",
            vec![0x0e, w + 1, 0x07, ra],
            0,
        ),
        case("end of stack, CFA fp", vec![0x0c, fp, 2 * w, 0x07, ra], 0),
        case("fp val_offset", vec![0x0e, 4 * w, 0x14, fp, 3], 0),
        case("fp val_offset_sf", vec![0x0e, 4 * w, 0x15, fp, 2], 0),
        case("fp undefined", vec![0x07, fp], 0),
        case("fp same_value", vec![0x08, fp], 0),
        case("fp in itself", vec![0x09, fp, fp], 0),
        case("fp restored", vec![0x80 | fp, 1, 0xc0 | fp], 0),
        case(
            "DRAP: CFA at fp - word, fp at fp",
            [deref_fp_insns(ws, -i64::from(w)), at_fp_insns(ws, 0)].concat(),
            0,
        ),
        case(
            "DRAP: CFA at fp + 2 words, fp at fp - word",
            [
                deref_fp_insns(ws, 2 * i64::from(w)),
                at_fp_insns(ws, -i64::from(w)),
            ]
            .concat(),
            0,
        ),
        case(
            "DRAP CFA after fp undefined",
            [vec![0x07, fp], deref_fp_insns(ws, 0)].concat(),
            0,
        ),
        case(
            "remember, change, restore",
            vec![0x0a, 0x0e, 4 * w, 0x41, 0x0b],
            1,
        ),
        // Refused rows: the walk goes on by the frame pointer.
        case("ra same_value", vec![0x08, ra], 0),
        case("ra in another register", vec![0x09, ra, 3], 0),
        case("ra val_offset", vec![0x14, ra, 1], 0),
        case("CFA from another register", vec![0x0c, 2, 16], 0),
        case(
            "CFA from rbx (ld.so's lazy-binding trampoline)",
            vec![0x0c, 3, 16],
            0,
        ),
        case("CFA another expression", vec![0x0f, 1, 0x30], 0),
        case("fp in another register", vec![0x09, fp, 3], 0),
        case("fp expression", vec![0x10, fp, 1, 0x30], 0),
        case("fp val_expression", vec![0x16, fp, 1, 0x30], 0),
        case("unsupported opcode, before", vec![0x41, 0x2d], 0),
        case("unsupported opcode, after", vec![0x41, 0x2d], 1),
        case("CFA not above sp", vec![0x0e, 0], 0),
        case("CFA below sp", vec![0x13, 1], 0),
        case("restore_state without remember", vec![0x0b], 0),
        case(
            "advance in the middle of an FDE",
            vec![0x48, 0x0e, 3 * w],
            9,
        ),
        WalkCase {
            fp: sp0 - 0x40,
            ..case(
                "CFA from fp, fp below sp",
                vec![0x0c, fp, 2 * w, 0x80 | fp, 2],
                0,
            )
        },
    ];
    for (name, off) in [
        ("PLT, below threshold", 3),
        ("PLT, at threshold", 11),
        ("PLT, above", 15),
    ] {
        v.push(case(name, plt_insns(ws, 11, 3), off));
        v.push(case(
            &format!("{name} (IBT)"),
            plt_insns(ws, 10, ws.bytes().trailing_zeros() as u8),
            off + 0x10,
        ));
    }
    // Signal frames: the caller's rules are those of its ip, not ip - 1.
    for (name, insns) in [
        ("signal frame", vec![0x0e, 0x40, 0x80 | ra, 2, 0x80 | fp, 3]),
        ("signal frame, fp kept", vec![0x0e, 0x10]),
        (
            "signal frame, CFA from fp",
            vec![0x0c, fp, 0x20, 0x80 | ra, 1],
        ),
        (
            "sigreturn: CFA the saved sp, ra and fp at sp + off",
            sigreturn_insns(ws, 20 * i64::from(w), 21 * i64::from(w), 15 * i64::from(w)),
        ),
        (
            "sigcontext by register rules (the i386 vDSO's since 7.3): CFA sp + 4 words, sp, ra, fp saved at CFA + 8, 9, 3 words",
            sigcontext_insns(ws, 4),
        ),
        (
            "sigcontext by register rules, CFA from fp: refused",
            vec![0x0c, fp, 2 * w, 0x11, sp, 0x78, 0x80 | ra, 1],
        ),
    ] {
        v.push(WalkCase {
            cie: CIE_SIGNAL,
            ..case(name, insns, 4)
        });
    }
    // Faults: the return address or saved fp beyond the stack.
    v.push(WalkCase {
        sp: STACK + STACK_LEN - u64::from(w),
        ..case("return address beyond the stack", vec![0x0e, 2 * w], 0)
    });
    v.push(WalkCase {
        fp: STACK + STACK_LEN - u64::from(w),
        ..case(
            "DRAP CFA beyond the stack",
            deref_fp_insns(ws, 2 * i64::from(w)),
            0,
        )
    });
    v.push(WalkCase {
        fp: STACK + STACK_LEN,
        ..case("fp at fp beyond the stack", at_fp_insns(ws, 0), 0)
    });
    v.push(WalkCase {
        sp: STACK + STACK_LEN - u64::from(w),
        ..case(
            "usual frame pair beyond the stack",
            vec![0x0e, 3 * w, 0x80 | fp, 2],
            0,
        )
    });
    // An unaligned sp.
    v.push(WalkCase {
        sp: sp0 + 3,
        ..case("unaligned sp", vec![0x0e, 4 * w, 0x80 | fp, 3], 0)
    });
    v
}

#[test]
fn walk_by_rows_is_walk_by_step() {
    let mut exercised = BTreeSet::new();
    let mut refused = BTreeSet::new();
    let mut n = 0;
    for ws in [WordSize::W8, WordSize::W4] {
        for c in walk_cases_of(ws) {
            let (k, causes) = check_walk_case(&c).unwrap_or_else(|e| panic!("{e}"));
            exercised.extend(k);
            refused.extend(causes.iter().map(|k| k.name()));
            n += 1;
        }
    }
    println!("rows walk: {n} cases, kinds {exercised:?}, refusals {refused:?}");
    for k in [
        "cfa sp",
        "cfa fp",
        "cfa plt",
        "cfa deref fp",
        "cfa deref sp",
        "cfa bx",
        "ra at",
        "ra at sp",
        "ra undefined",
        "fp keep",
        "fp at",
        "fp val",
        "fp at fp",
        "fp at sp",
        "fp undefined",
        "signal",
        "usual run",
        "end run",
    ] {
        assert!(exercised.contains(k), "no case steps by {k}: {exercised:?}");
    }
    for k in [
        "ra_rule",
        "fp_rule",
        "cfa_register",
        "cfa_expression",
        "cfa_not_above",
        "cfa_unaligned",
        "opcode",
        "malformed",
        "fault",
        "fp_unknown",
    ] {
        assert!(refused.contains(k), "no case refused by {k}: {refused:?}");
    }
}

/// A handler returns into a signal trampoline whose FDE starts at its
/// first instruction, with no FDE for the byte before (the i386 vDSO's
/// `__kernel_rt_sigreturn` since 7.3, after its nop): the return
/// address's pc - 1 has no FDE, and the walk takes the trampoline's rows
/// at the return address itself, as no call returns to a trampoline; the
/// same layout whose FDE is not a signal frame's is not taken so.
#[test]
fn return_into_a_trampoline_whose_fde_starts_at_it() {
    for ws in [WordSize::W8, WordSize::W4] {
        for signal in [true, false] {
            let w = ws.bytes();
            let tramp = PROBE + 0x21;
            let cie = if signal { CIE_SIGNAL } else { CIE_USUAL };
            let (mem, _) = Obj::new(ws)
                .fde(CODE, 0x40, vec![])
                .fde(PROBE, 0x20, vec![])
                .fde_of(cie, tramp, 0x10, sigcontext_insns(ws, 4))
                .build();
            let mut mem = mem.with_stack(ws);
            let (sp0, fp0) = (STACK + 0x400, STACK + 0x900);
            // The handler's return address; the sigcontext from the
            // trampoline's CFA (sp0 + 1 word) + 4 words: the interrupted
            // sp, ip (in PROBE's FDE) and fp.
            let ctx = sp0 + w + 4 * w;
            let (int_sp, int_ip, int_fp) = (STACK + 0xc00, PROBE + 4, STACK + 0xd00);
            mem.put_word(sp0, tramp, ws);
            mem.put_word(ctx + 8 * w, int_sp, ws);
            mem.put_word(ctx + 9 * w, int_ip, ws);
            mem.put_word(ctx + 3 * w, int_fp, ws);
            let mut tables = OneObject::new(&mut mem, ws);
            let r = regs(ws, CODE + 4, sp0, fp0);
            // Four frames: the walk is full before it steps the last.
            let (o, _) = table_walk(&r, &mut mem, &mut tables, 4);
            let through = o.trace == [CODE + 4, tramp, int_ip, int_sp + PATTERN];
            assert_eq!(
                through, signal,
                "{ws:?}, signal frame {signal}: {o:?} (want CODE+4, {tramp:#x}, {int_ip:#x}, {:#x} if a signal frame)",
                int_sp + PATTERN
            );
            if signal {
                assert_eq!(o.refused, [0; Cause::COUNT], "{ws:?}: {o:?}");
                assert_eq!(o.table_frames, 3, "{ws:?}: {o:?}");
            } else {
                // The handler's frame only; the trampoline's is the
                // frame pointer's.
                assert_eq!(o.table_frames, 1, "{ws:?}: {o:?}");
                assert!(o.refused[Cause::NoFde as usize] >= 1, "{ws:?}: {o:?}");
            }
        }
    }
}

/// A transient refusal while compiling (instructions that cannot be
/// read, a read budget too small) is returned and not remembered; the
/// next fill compiles the FDE.
#[test]
fn transient_refusals_are_not_remembered() {
    for ws in [WordSize::W8, WordSize::W4] {
        let w = ws.bytes() as u8;
        // Rows at 0, 1, 2, then nops past the first window of the
        // instructions, then a last row: compiling reads past the window,
        // the row at pc 0 does not.
        let mut insns = vec![0x41, 0x0e, 2 * w, 0x41, 0x0e, 3 * w];
        insns.extend([0u8; 200]);
        insns.extend([0x41, 0x0e, 4 * w]);
        let (mut mem, fde_at) = Obj::new(ws)
            .fde(CODE - 0x100, 0x10, vec![])
            .fde(CODE, 0x20, insns)
            .build();
        let h = hdr_of(&mut mem, ws);
        let mut rows = Rows::default();
        // An FDE compiled before: the faulting one must not disturb it.
        let mut r = Reader::new(&mut mem);
        scratch(|s| rows.fill(&mut r, &h, ws, CODE - 0x100, s)).unwrap();
        let before = (rows.fdes.clone(), rows.rows.clone());

        let hole = fde_at[1] + 4 + 4 + 4 + 4 + 1 + 150;
        let saved: Vec<(u64, u8)> = (hole..hole + 8).map(|a| (a, mem.bytes[&a])).collect();
        for &(a, _) in &saved {
            mem.bytes.remove(&a);
        }
        // The uncompiled row at pc 0 does not need the hole.
        let want = oracle(&mut mem, &h, ws, CODE);
        assert!(
            matches!(want, Answer::Row(v, _) if v.refusal.is_none()),
            "{want:?}"
        );
        for pc in [CODE, CODE + 3] {
            let mut r = Reader::new(&mut mem);
            let got = scratch(|s| rows.fill(&mut r, &h, ws, pc, s));
            assert_eq!(got, Err(Refusal::Fault(cfi::Where::Instructions)), "{ws:?}");
            assert_eq!(
                (rows.fdes.clone(), rows.rows.clone()),
                before,
                "{ws:?}: remembered"
            );
            assert_eq!(rows.lookup(pc), None);
        }
        // A read budget too small.
        for &(a, b) in &saved {
            mem.bytes.insert(a, b);
        }
        for limit in 0..4 {
            let mut r = Reader::with_limit(&mut mem, limit);
            let got = scratch(|s| rows.fill(&mut r, &h, ws, CODE + 3, s));
            assert_eq!(
                got,
                Err(Refusal::Bound(Bound::Reads)),
                "{ws:?} limit {limit}"
            );
            assert_eq!((rows.fdes.clone(), rows.rows.clone()), before);
        }
        // Readable again: compiled, and every pc answers as rules_in.
        let mut r = Reader::new(&mut mem);
        assert!(scratch(|s| rows.fill(&mut r, &h, ws, CODE + 3, s)).is_ok());
        assert_eq!(rows.fdes.len(), 2);
        assert_eq!(rows.rows.len(), before.1.len() + 4);
        for pc in CODE..CODE + 0x20 {
            let want = oracle(&mut mem, &h, ws, pc);
            let got = rows.lookup(pc).ok_or(Refusal::NoFde);
            assert!(agrees(&got, &want), "{ws:?} pc {pc:#x}: {got:?} {want:?}");
        }
        check_invariants(&rows).unwrap();
    }
}

/// A pc no FDE covers is remembered (as refused, `no_fde`): the second
/// lookup answers without a read.  So are malformed FDEs.
#[test]
fn pcs_without_fde_are_remembered() {
    let ws = WordSize::W8;
    let (mut mem, fde_at) = Obj::new(ws)
        .fde(CODE, 0x10, vec![])
        .fde(CODE + 0x20, 0x10, vec![0x0e, 16])
        .build();
    let h = hdr_of(&mut mem, ws);
    let mut tables = OneObject {
        hdr: h,
        rows: Rows::default(),
        fills: 0,
        memo: None,
        usual_hits: 0,
        pend: Pend::None,
        asked: 0,
        answers: 0,
    };
    for pc in [
        CODE - 1,
        CODE + 0x10,
        CODE + 0x1f,
        CODE + 0x30,
        0,
        u64::MAX - 1,
    ] {
        for round in 0..2 {
            let before = mem.reads;
            let mut r = Reader::new(&mut mem);
            let got = tables.row(&mut r, pc, ws);
            let reads = r.reads();
            assert_eq!(
                got.map(|g| g.map(|(row, _)| row.refusal())),
                Some(Ok(Some(Cause::NoFde))),
                "pc {pc:#x}"
            );
            if round == 1 {
                assert_eq!(reads, 0, "pc {pc:#x}: second lookup read");
                assert_eq!(mem.reads, before);
            } else {
                assert!(reads > 0);
            }
        }
    }
    assert_eq!(tables.fills, 6);
    // Only the pc itself: its neighbours are looked up anew.
    assert_eq!(tables.rows.lookup(CODE + 0x11), None);
    assert_eq!(tables.rows.lookup(CODE + 0x1e), None);
    // The FDEs around are compiled as usual, in between the pcs.
    let mut r = Reader::new(&mut mem);
    assert!(tables.row(&mut r, CODE + 0x25, ws).unwrap().is_ok());
    let mut r = Reader::new(&mut mem);
    assert!(tables.row(&mut r, CODE + 5, ws).unwrap().is_ok());
    check_invariants(&tables.rows).unwrap();
    for pc in CODE - 2..CODE + 0x32 {
        let want = oracle(&mut mem, &h, ws, pc);
        let (got, _) = compiled(&mut tables.rows, &mut mem, &h, ws, pc);
        assert!(agrees(&got, &want), "pc {pc:#x}: {got:?} {want:?}");
    }
    // A malformed FDE (its CIE pointer points after it) is remembered as
    // refused for the pc, as rules_in refuses it.
    let mut bad = mem.clone();
    bad.put(fde_at[1] + 4, &0xffff_0000u32.to_le_bytes());
    let mut rows = Rows::default();
    let want = oracle(&mut bad, &h, ws, CODE + 0x25);
    let (got, hit) = compiled(&mut rows, &mut bad, &h, ws, CODE + 0x25);
    assert!(!hit && agrees(&got, &want), "{got:?} {want:?}");
    assert!(
        matches!(want, Answer::Row(v, None) if v.refusal == Some(Cause::Malformed)),
        "{want:?}"
    );
    assert!(rows.lookup(CODE + 0x25).is_some());
}

/// The two documented bounds: an FDE over 4 GiB is not compiled (a
/// transient `Bound::Memory`, nothing remembered); a return address or
/// frame pointer saved beyond `i16` from the CFA is a refused row
/// (`bound`) where the interpreter has a row.
#[test]
fn documented_bounds() {
    let ws = WordSize::W8;
    let a = Arch::X86_64;
    let big = Obj::new(ws).fde_of(CIE_ABS, CODE, 1 << 33, vec![]);
    let (mut mem, _) = big.build();
    let h = hdr_of(&mut mem, ws);
    let mut rows = Rows::default();
    let mut r = Reader::new(&mut mem);
    assert_eq!(
        scratch(|s| rows.fill(&mut r, &h, ws, CODE + 5, s)),
        Err(Refusal::Bound(Bound::Memory))
    );
    assert!(rows.fdes.is_empty() && rows.rows.is_empty());
    assert!(
        matches!(oracle(&mut mem, &h, ws, CODE + 5), Answer::Row(v, Some(false)) if v.refusal.is_none())
    );

    for (reg, off) in [(a.ra, 4096u64), (a.fp, 4096), (a.ra, 4095), (a.fp, 4095)] {
        // offset_extended: reg at CFA - 8 * off.
        let insns = [vec![0x05], uleb(reg), uleb(off)].concat();
        let (mut mem, _) = Obj::new(ws).fde(CODE, 0x10, insns).build();
        let h = hdr_of(&mut mem, ws);
        let row = cfi::rules_in(&mut Reader::new(&mut mem), &h, ws, &at_pc(CODE))
            .unwrap()
            .0;
        assert!(row.check(a).is_ok());
        let mut rows = Rows::default();
        let (got, _) = compiled(&mut rows, &mut mem, &h, ws, CODE);
        let refusal = got.unwrap().0.refusal();
        if off * 8 > 32768 {
            assert_eq!(refusal, Some(Cause::Bound), "reg {reg} off {off}");
        } else {
            assert_eq!(refusal, None, "reg {reg} off {off}");
        }
    }
}

/// FDEs filled in every order of a few give the same rows, sorted.
#[test]
fn sorted_insertion() {
    let ws = WordSize::W8;
    let mut o = Obj::new(ws);
    for i in 0..5u64 {
        o = o.fde(
            CODE + 0x100 * i,
            0x40 + i,
            vec![0x41, 0x0e, 16 + 8 * i as u8],
        );
    }
    let (mut mem, _) = o.build();
    let h = hdr_of(&mut mem, ws);
    let pcs: Vec<u64> = (0..5)
        .flat_map(|i| [CODE + 0x100 * i + 1, CODE + 0x100 * i + 0x80])
        .collect();
    let mut rng = Rng(7);
    let mut reference: Option<Vec<FdeEntry>> = None;
    for _ in 0..50 {
        let mut order = pcs.clone();
        rng.shuffle(&mut order);
        let mut rows = Rows::default();
        for &pc in &order {
            let want = oracle(&mut mem, &h, ws, pc);
            let (got, _) = compiled(&mut rows, &mut mem, &h, ws, pc);
            assert!(agrees(&got, &want), "pc {pc:#x}: {got:?} {want:?}");
        }
        check_invariants(&rows).unwrap();
        // Same entries whatever the order (rows may sit elsewhere).
        let entries: Vec<FdeEntry> = rows
            .fdes
            .iter()
            .map(|f| FdeEntry { first: 0, ..*f })
            .collect();
        match &reference {
            None => reference = Some(entries),
            Some(r) => assert_eq!(&entries, r),
        }
        for pc in CODE - 1..CODE + 0x500 {
            let want = oracle(&mut mem, &h, ws, pc);
            let (got, _) = compiled(&mut rows, &mut mem, &h, ws, pc);
            assert!(agrees(&got, &want), "pc {pc:#x}: {got:?} {want:?}");
        }
    }
}

// ---------------------------------------------------------------------
// Property tests.
// ---------------------------------------------------------------------

/// A register, as the arch names it.
#[derive(Clone, Copy, Debug)]
enum Reg {
    Sp,
    Fp,
    Ra,
    Other,
}

fn reg(r: Reg, a: Arch) -> u64 {
    match r {
        Reg::Sp => a.sp,
        Reg::Fp => a.fp,
        Reg::Ra => a.ra,
        Reg::Other => 3,
    }
}

/// A call-frame instruction, registers by role.
#[derive(Clone, Debug)]
enum Insn {
    Advance(u8),
    Advance1(u8),
    Advance2(u16),
    /// `set_loc` to the FDE's first pc + this (with an absolute `R`
    /// encoding only; a nop otherwise).
    SetLoc(u16),
    DefCfa(Reg, u64),
    DefCfaSf(Reg, i64),
    DefCfaReg(Reg),
    DefCfaOff(u64),
    DefCfaOffSf(i64),
    Offset(Reg, u64),
    OffsetExt(Reg, u64),
    OffsetExtSf(Reg, i64),
    ValOffset(Reg, u64),
    ValOffsetSf(Reg, i64),
    NegOffsetExt(Reg, u64),
    Restore(Reg),
    RestoreExt(Reg),
    Undefined(Reg),
    SameValue(Reg),
    Register(Reg, Reg),
    Remember,
    RestoreState,
    Nop,
    ArgsSize(u64),
    Plt(u8, u8),
    DerefFp(i64),
    CfaExprOther,
    /// `DW_CFA_expression reg: DW_OP_breg<fp> off`.
    ExprBregFp(Reg, i64),
    ExprOther(Reg),
    ValExpr(Reg),
    Bad(u8),
}

fn encode(i: &Insn, ws: WordSize, abs: Option<u64>) -> Vec<u8> {
    let a = Arch::of(ws);
    let r = |x: Reg| uleb(reg(x, a));
    let fp = a.fp as u8;
    match *i {
        Insn::Advance(d) => vec![0x40 | (d & 0x3f)],
        Insn::Advance1(d) => vec![0x02, d],
        Insn::Advance2(d) => [vec![0x03], d.to_le_bytes().to_vec()].concat(),
        Insn::SetLoc(d) => match abs {
            Some(begin) if ws == WordSize::W8 => {
                [vec![0x01], (begin + u64::from(d)).to_le_bytes().to_vec()].concat()
            }
            Some(begin) => [
                vec![0x01],
                ((begin + u64::from(d)) as u32).to_le_bytes().to_vec(),
            ]
            .concat(),
            None => vec![0x00],
        },
        Insn::DefCfa(x, o) => [vec![0x0c], r(x), uleb(o)].concat(),
        Insn::DefCfaSf(x, o) => [vec![0x12], r(x), sleb(o)].concat(),
        Insn::DefCfaReg(x) => [vec![0x0d], r(x)].concat(),
        Insn::DefCfaOff(o) => [vec![0x0e], uleb(o)].concat(),
        Insn::DefCfaOffSf(o) => [vec![0x13], sleb(o)].concat(),
        Insn::Offset(x, o) => [vec![0x80 | reg(x, a) as u8], uleb(o)].concat(),
        Insn::OffsetExt(x, o) => [vec![0x05], r(x), uleb(o)].concat(),
        Insn::OffsetExtSf(x, o) => [vec![0x11], r(x), sleb(o)].concat(),
        Insn::ValOffset(x, o) => [vec![0x14], r(x), uleb(o)].concat(),
        Insn::ValOffsetSf(x, o) => [vec![0x15], r(x), sleb(o)].concat(),
        Insn::NegOffsetExt(x, o) => [vec![0x2f], r(x), uleb(o)].concat(),
        Insn::Restore(x) => vec![0xc0 | reg(x, a) as u8],
        Insn::RestoreExt(x) => [vec![0x06], r(x)].concat(),
        Insn::Undefined(x) => [vec![0x07], r(x)].concat(),
        Insn::SameValue(x) => [vec![0x08], r(x)].concat(),
        Insn::Register(x, y) => [vec![0x09], r(x), r(y)].concat(),
        Insn::Remember => vec![0x0a],
        Insn::RestoreState => vec![0x0b],
        Insn::Nop => vec![0x00],
        Insn::ArgsSize(n) => [vec![0x2e], uleb(n)].concat(),
        Insn::Plt(k, s) => {
            let mut v = plt_insns(ws, 0, 0);
            v[8] = 0x30 + (k & 31);
            v[10] = 0x30 + (s & 31);
            v
        }
        Insn::DerefFp(o) => deref_fp_insns(ws, o),
        Insn::CfaExprOther => vec![0x0f, 1, 0x30],
        Insn::ExprBregFp(x, o) => {
            let e = [vec![0x70 + fp], sleb(o)].concat();
            [vec![0x10], r(x), vec![e.len() as u8], e].concat()
        }
        Insn::ExprOther(x) => [vec![0x10], r(x), vec![1, 0x30]].concat(),
        Insn::ValExpr(x) => [vec![0x16], r(x), vec![1, 0x30]].concat(),
        Insn::Bad(op) => vec![op],
    }
}

fn reg_s() -> impl Strategy<Value = Reg> {
    prop_oneof![
        2 => Just(Reg::Sp),
        3 => Just(Reg::Fp),
        3 => Just(Reg::Ra),
        1 => Just(Reg::Other),
    ]
}

fn insn_s() -> impl Strategy<Value = Insn> {
    prop_oneof![
        6 => (1u8..8).prop_map(Insn::Advance),
        1 => (1u8..64).prop_map(Insn::Advance),
        1 => any::<u8>().prop_map(Insn::Advance1),
        1 => (0u16..300).prop_map(Insn::Advance2),
        1 => (0u16..80).prop_map(Insn::SetLoc),
        2 => (reg_s(), 0u64..64).prop_map(|(r, o)| Insn::DefCfa(r, o)),
        1 => (reg_s(), -8i64..8).prop_map(|(r, o)| Insn::DefCfaSf(r, o)),
        2 => reg_s().prop_map(Insn::DefCfaReg),
        3 => (0u64..128).prop_map(Insn::DefCfaOff),
        1 => (-16i64..16).prop_map(Insn::DefCfaOffSf),
        4 => (reg_s(), 0u64..8).prop_map(|(r, o)| Insn::Offset(r, o)),
        1 => (reg_s(), prop_oneof![0u64..8, 4000u64..5000]).prop_map(|(r, o)| Insn::OffsetExt(r, o)),
        1 => (reg_s(), -8i64..8).prop_map(|(r, o)| Insn::OffsetExtSf(r, o)),
        1 => (reg_s(), 0u64..8).prop_map(|(r, o)| Insn::ValOffset(r, o)),
        1 => (reg_s(), -8i64..8).prop_map(|(r, o)| Insn::ValOffsetSf(r, o)),
        1 => (reg_s(), 0u64..8).prop_map(|(r, o)| Insn::NegOffsetExt(r, o)),
        1 => reg_s().prop_map(Insn::Restore),
        1 => reg_s().prop_map(Insn::RestoreExt),
        1 => reg_s().prop_map(Insn::Undefined),
        1 => reg_s().prop_map(Insn::SameValue),
        1 => (reg_s(), reg_s()).prop_map(|(r, s)| Insn::Register(r, s)),
        2 => Just(Insn::Remember),
        2 => Just(Insn::RestoreState),
        1 => Just(Insn::Nop),
        1 => (0u64..1000).prop_map(Insn::ArgsSize),
        1 => (prop_oneof![9u8..12, 0u8..20], prop_oneof![2u8..4, 0u8..8]).prop_map(|(k, s)| Insn::Plt(k, s)),
        2 => (-24i64..24).prop_map(Insn::DerefFp),
        1 => Just(Insn::CfaExprOther),
        2 => (reg_s(), -24i64..24).prop_map(|(r, o)| Insn::ExprBregFp(r, o)),
        1 => reg_s().prop_map(Insn::ExprOther),
        1 => reg_s().prop_map(Insn::ValExpr),
        1 => prop_oneof![Just(0x2du8), Just(0x17), Just(0x1c), Just(0x3f)].prop_map(Insn::Bad),
    ]
}

/// An FDE to generate: a gap before it (negative: it starts inside the
/// previous one, whose end it may or may not pass), its length, CIE,
/// instructions.
fn fde_s() -> impl Strategy<Value = (i64, u64, usize, Vec<Insn>)> {
    (
        prop_oneof![3 => 0i64..6, 1 => -60i64..0],
        1u64..80,
        prop_oneof![3 => Just(CIE_USUAL), 1 => Just(CIE_SIGNAL), 1 => Just(CIE_ABS)],
        proptest::collection::vec(insn_s(), 0..24),
    )
}

/// The FDEs laid out from CODE; returns the object and the end of the
/// last pc covered.
fn object_of(ws: WordSize, fdes: &[(i64, u64, usize, Vec<Insn>)]) -> (Obj, u64) {
    let mut o = Obj::new(ws);
    let (mut at, mut end) = (CODE, CODE);
    for (gap, len, cie, insns) in fdes {
        at = at.saturating_add_signed(*gap).max(CODE);
        let abs = (*cie == CIE_ABS).then_some(at);
        let bytes: Vec<u8> = insns.iter().flat_map(|i| encode(i, ws, abs)).collect();
        o = o.fde_of(*cie, at, *len, bytes);
        at += len;
        end = end.max(at);
    }
    (o, end)
}

/// Collects what `cfi::compile` gives.
struct Collect(Vec<(u64, Result<Row, Refusal>)>);

impl RowSink for Collect {
    fn row(&mut self, loc: u64, row: Result<&Row, Refusal>) -> Result<(), Refusal> {
        self.0.push((loc, row.copied()));
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// `cfi::compile` gives, for every pc of an FDE, `cfi::row_at`'s
    /// answer; the object's rows, filled in a random order, give
    /// `rules_in`'s for every pc in and around the FDEs.
    #[test]
    fn compiled_rows_are_row_at(
        w4 in any::<bool>(),
        fdes in proptest::collection::vec(fde_s(), 1..4),
        seed in any::<u64>(),
    ) {
        let ws = if w4 { WordSize::W4 } else { WordSize::W8 };
        let (o, end) = object_of(ws, &fdes);
        let (mut mem, fde_at) = o.build();
        let h = hdr_of(&mut mem, ws);
        for &at in &fde_at {
            let fde = cfi::read_fde(&mut Reader::new(&mut mem), h.eh_frame, at, ws).unwrap();
            let mut rows = Collect(Vec::new());
            scratch(|s| cfi::compile(&mut Reader::with_limit(&mut mem, LOTS), &fde, ws, &mut rows, s))
                .unwrap();
            prop_assert!(!rows.0.is_empty());
            prop_assert_eq!(rows.0[0].0, fde.pc_begin);
            prop_assert!(rows.0.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", rows.0);
            for pc in fde.pc_begin..fde.pc_end {
                let want = cfi::row_at(&mut Reader::with_limit(&mut mem, LOTS), &fde, ws, pc);
                let got = rows.0.iter().rev().find(|r| r.0 <= pc).map(|r| r.1);
                prop_assert_eq!(got, Some(want), "pc {:#x} rows {:?}", pc, rows.0);
            }
        }
        let mut pcs: Vec<u64> = (CODE - 2..end + 2).collect();
        Rng(seed | 1).shuffle(&mut pcs);
        let mut rows = Rows::default();
        for &pc in &pcs {
            let want = oracle(&mut mem, &h, ws, pc);
            let (got, hit) = compiled(&mut rows, &mut mem, &h, ws, pc);
            prop_assert!(agrees(&got, &want), "pc {:#x}: rows {:?} (hit {}), rules_in {:?}", pc, got, hit, want);
        }
        prop_assert!(check_invariants(&rows).is_ok(), "{:?}", check_invariants(&rows));
    }

    /// A frame in an FDE of random instructions, at a random pc with a
    /// random sp and fp: `walk_tables` walks what the walk by `cfi::step`
    /// walks.
    #[test]
    fn walk_by_rows_is_walk_by_step_random(
        w4 in any::<bool>(),
        signal in any::<bool>(),
        insns in proptest::collection::vec(insn_s(), 0..10),
        off in 0u64..0x100,
        sp in 0u64..STACK_LEN,
        fp in 0u64..STACK_LEN + 0x10,
        aligned in any::<bool>(),
    ) {
        let ws = if w4 { WordSize::W4 } else { WordSize::W8 };
        let w = ws.bytes();
        let (sp, fp) = if aligned { (sp & !(w - 1), fp & !(w - 1)) } else { (sp, fp) };
        let c = WalkCase {
            name: format!("random {insns:?}"),
            ws,
            cie: if signal { CIE_SIGNAL } else { CIE_USUAL },
            insns: insns.iter().flat_map(|i| encode(i, ws, None)).collect(),
            off,
            sp: STACK + sp,
            fp: STACK + fp,
        };
        // The documented bound: offsets beyond i16 are refused by the rows
        // where the interpreter has a rule; such a row is not compared.
        let (mut mem, _) = walk_object(ws, c.cie, c.insns.clone(), Probe::Sp).build();
        let h = hdr_of(&mut mem, ws);
        let mut rows = Rows::default();
        let (got, _) = compiled(&mut rows, &mut mem, &h, ws, CODE + off);
        prop_assume!(!matches!(got, Ok((row, _)) if row.refusal() == Some(Cause::Bound)));
        if let Err(e) = check_walk_case(&c) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// FDEs with more rows than the room made before a compilation (as many
/// as their instructions allow, up to `ROW_ROOM_MAX`): each is compiled a
/// second time with room for the rest, its first rows skipped.  Every pc of every FDE, filled in order and in a random
/// order, gives `rules_in`'s answer, and the rows keep their invariants;
/// FDEs of 1 to 300 rows (the CFA offset changes at each pc), several in
/// one object so that the room is made both from spare capacity and by
/// growing the store.  With two or three instruction bytes a row, the
/// FDEs of more than 64 rows pass the room.
#[test]
fn fdes_with_more_rows_than_the_room() {
    let sizes = [
        1,
        2,
        ROW_ROOM_MAX / 2 - 1,
        ROW_ROOM_MAX / 2 + 1,
        ROW_ROOM_MAX - 1,
        ROW_ROOM_MAX,
        ROW_ROOM_MAX + 1,
        2 * ROW_ROOM_MAX + 3,
        300,
    ];
    for ws in [WordSize::W8, WordSize::W4] {
        let w = ws.bytes();
        let fdes: Vec<(i64, u64, usize, Vec<Insn>)> = sizes
            .iter()
            .map(|&n| {
                let mut insns = Vec::new();
                for k in 1..n as u64 {
                    insns.push(Insn::Advance(1));
                    insns.push(Insn::DefCfaOff(w * (k + 1)));
                }
                (0, n as u64 + 1, CIE_USUAL, insns)
            })
            .collect();
        let (o, end) = object_of(ws, &fdes);
        let (mut mem, fde_at) = o.build();
        let h = hdr_of(&mut mem, ws);
        // Each FDE has as many rows as its size: the room is passed.
        for (&at, &n) in fde_at.iter().zip(&sizes) {
            let fde = cfi::read_fde(&mut Reader::new(&mut mem), h.eh_frame, at, ws).unwrap();
            let mut rows = Collect(Vec::new());
            scratch(|s| {
                cfi::compile(
                    &mut Reader::with_limit(&mut mem, LOTS),
                    &fde,
                    ws,
                    &mut rows,
                    s,
                )
            })
            .unwrap();
            assert_eq!(rows.0.len(), n, "{ws:?}");
        }
        for seed in [None, Some(7u64), Some(0x5eed)] {
            let mut pcs: Vec<u64> = (CODE - 2..end + 2).collect();
            if let Some(seed) = seed {
                Rng(seed | 1).shuffle(&mut pcs);
            }
            let mut rows = Rows::default();
            for &pc in &pcs {
                let want = oracle(&mut mem, &h, ws, pc);
                let (got, hit) = compiled(&mut rows, &mut mem, &h, ws, pc);
                assert!(
                    agrees(&got, &want),
                    "{ws:?} seed {seed:?} pc {pc:#x}: rows {got:?} (hit {hit}), rules_in {want:?}"
                );
            }
            assert!(
                check_invariants(&rows).is_ok(),
                "{:?}",
                check_invariants(&rows)
            );
        }
    }
}

/// FDEs that overlap in the table (one inside another, one across
/// another's end, two at the same pc): the hdr search finds, for each pc,
/// the last entry starting at or below it, and the rows answer the same
/// whatever order they were filled in (each FDE is remembered for the pcs
/// the search finds it for only).
#[test]
fn overlapping_fdes_answer_as_the_search() {
    let ws = WordSize::W8;
    let layouts: [&[(u64, u64)]; 5] = [
        // Nested.
        &[(0, 0x100), (0x40, 0x10)],
        // Across the end.
        &[(0, 0x40), (0x20, 0x40)],
        // Same start (the later entry is found), and one inside both.
        &[(0, 0x40), (0, 0x20), (0x10, 0x8)],
        // Empty FDE inside another.
        &[(0, 0x40), (0x18, 0)],
        // Chains.
        &[
            (0, 0x80),
            (0x10, 0x60),
            (0x20, 0x10),
            (0x28, 0x30),
            (0x70, 0x20),
        ],
    ];
    for (k, layout) in layouts.iter().enumerate() {
        let mut o = Obj::new(ws);
        for (i, &(b, len)) in layout.iter().enumerate() {
            // Each FDE its own CFA offset, and a row change in its middle.
            let mid = (len / 2).min(63) as u8;
            o = o.fde(
                CODE + b,
                len,
                vec![0x0e, 16 + 8 * i as u8, 0x40 | mid, 0x0e, 0x80, 1],
            );
        }
        let (mut mem, _) = o.build();
        let h = hdr_of(&mut mem, ws);
        let end = layout.iter().map(|&(b, l)| CODE + b + l).max().unwrap();
        let mut pcs: Vec<u64> = (CODE - 1..end + 1).collect();
        let mut rng = Rng(k as u64 + 1);
        for round in 0..20 {
            if round > 0 {
                rng.shuffle(&mut pcs);
            }
            let mut rows = Rows::default();
            for &pc in &pcs {
                let want = oracle(&mut mem, &h, ws, pc);
                let (got, hit) = compiled(&mut rows, &mut mem, &h, ws, pc);
                assert!(
                    agrees(&got, &want),
                    "layout {layout:x?}, round {round}: pc {pc:#x}: rows {got:?} (hit {hit}), rules_in {want:?}"
                );
            }
            check_invariants(&rows).unwrap_or_else(|e| panic!("layout {layout:x?}: {e}"));
        }
    }
}

/// The last pc has no one-pc range: a fill of it answers as `rules_in`
/// and remembers nothing (before, it stored an entry that no lookup could
/// find, at every fill).
#[test]
fn last_pc_is_not_remembered() {
    for ws in [WordSize::W8, WordSize::W4] {
        let (mut mem, _) = Obj::new(ws).fde(CODE, 0x10, vec![]).build();
        let h = hdr_of(&mut mem, ws);
        let mut rows = Rows::default();
        let want = oracle(&mut mem, &h, ws, u64::MAX);
        for _ in 0..3 {
            let mut r = Reader::new(&mut mem);
            let got = scratch(|s| rows.fill(&mut r, &h, ws, u64::MAX, s));
            assert_eq!(got, Err(Refusal::NoFde), "{ws:?}");
            assert!(agrees(&got, &want), "{got:?} {want:?}");
            assert!(rows.fdes.is_empty() && rows.rows.is_empty(), "{ws:?}");
        }
    }
}

/// A compat frame at the top of the 32-bit space: a caller's frame
/// pointer that is the CFA + an offset past 4 GiB wraps, as `cfi::apply`
/// wraps it, and the walks by rows and by steps end the same way.
#[test]
fn compat_fp_val_offset_wraps() {
    let ws = WordSize::W4;
    let fp = Arch::I386.fp as u8;
    let sp0 = 0xffff_ff00u64;
    // CFA = sp + 8, the return address at CFA - 4, the caller's fp =
    // CFA + 0x400 (past 4 GiB) or CFA + 0x40.
    for (name, n, stop) in [
        ("past 4 GiB", -0x100, Stop::FramePointerBelowStack),
        ("below 4 GiB", -0x10, Stop::Full),
    ] {
        let insns = [vec![0x0e, 8, 0x15, fp], sleb(n)].concat();
        let (mut mem, _) = Obj::new(ws)
            .fde(CODE, 0x10, insns)
            // The caller: CFA = fp + 8, so its return address tells fp.
            .fde(CODE + 0x80, 0x10, vec![0x0c, fp, 8])
            .build();
        mem.put_word(sp0 + 4, CODE + 0x81, ws);
        mem.put_word(0xffff_ff4c, CODE + 0x400, ws);
        let r = regs(ws, CODE, sp0, 0x1000);
        let (want, _) = reference_walk(&r, &mut mem.clone(), 3);
        let mut m = mem.clone();
        let mut tables = OneObject::new(&mut m, ws);
        let (got, _) = table_walk(&r, &mut m, &mut tables, 3);
        assert_eq!(got, want, "{name}");
        assert_eq!(got.stop, stop, "{name}: {got:x?}");
    }
}

/// The memo of recent pcs' rows (`PcMemo`, the kernel's per-mm front of
/// the rows) answers, for a pc, only what was last put for that pc and
/// word size, or nothing: never another pc's row; a cleared memo nothing;
/// a pc from 2^60 is never remembered (`memo_keys_end_below_2_60`).
#[test]
fn memo_answers_only_what_was_put() {
    let mut rng = Rng(0x5eed_0123_4567_89ab);
    let mut memo = Box::new(PcMemo::empty());
    let mut model: BTreeMap<(u64, bool), Found> = BTreeMap::new();
    let row = |rng: &mut Rng| {
        let b = rng.next();
        let mut p = PackedRow::default();
        p.start = b as u32;
        p.cfa = (b >> 32) as i32;
        (p, b & 1 != 0)
    };
    let mut hits = 0;
    for round in 0..200_000u32 {
        // Pcs clustered (collisions in the 256 slots are common) and
        // spread, both word sizes.
        let pc = match rng.next() % 4 {
            0 => 0x40_0000 + rng.next() % 4096,
            1 => rng.next() >> 17,
            2 => (rng.next() % 4096) << 36,
            // From 2^60 (too large to have a key) to 2^64 - 1.
            _ => rng.next() | (1 << 60),
        };
        let ws = if rng.next().is_multiple_of(3) {
            WordSize::W4
        } else {
            WordSize::W8
        };
        if rng.next().is_multiple_of(2) {
            let f = row(&mut rng);
            memo.put(pc, ws, f);
            model.insert((pc, ws == WordSize::W4), f);
        }
        if let Some(got) = memo.get(pc, ws) {
            hits += 1;
            assert!(pc >> 60 == 0, "pc {pc:#x} remembered");
            assert_eq!(
                Some(&got),
                model.get(&(pc, ws == WordSize::W4)),
                "pc {pc:#x} {ws:?}"
            );
        }
        if round % 50_000 == 49_999 {
            memo.clear();
            for (&(pc, w4), _) in model.iter() {
                let ws = if w4 { WordSize::W4 } else { WordSize::W8 };
                assert_eq!(memo.get(pc, ws), None, "{pc:#x} after clear");
            }
            model.clear();
        }
    }
    assert!(hits > 10_000, "the memo answered only {hits} times");
    // A key's own slot: the same pc of the other word size is another key.
    let f = (PackedRow::default(), true);
    memo.clear();
    memo.put(0x1234, WordSize::W8, f);
    assert_eq!(memo.get(0x1234, WordSize::W8), Some(f));
    assert_eq!(memo.get(0x1234, WordSize::W4), None);
    assert_eq!(MEMO_SLOTS.count_ones(), 1);
    assert_eq!(MEMO_SLOTS % MEMO_WAYS, 0);
    // The sizes the documentation states (rows.rs, docs/design.md): a row is 20
    // bytes, the memo 8 KiB.
    assert_eq!(std::mem::size_of::<PackedRow>(), 20);
    assert_eq!(std::mem::size_of::<PcMemo>(), 8192);
}

/// Four pcs from 0x401000 whose keys fall in one set of the memo, by a
/// replica of its hash (Fibonacci hashing of the key, the word size's bit
/// in it; the top bits for the set): a stack's pcs are a few KiB apart.
fn same_set_pcs(ws: WordSize) -> Vec<u64> {
    let sets = MEMO_SLOTS / MEMO_WAYS;
    let set = |pc: u64| {
        let key = ((pc << 1) | u64::from(ws == WordSize::W4)) + 1;
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - sets.trailing_zeros())) as usize
    };
    let base = 0x40_1000u64;
    let same: Vec<u64> = (base..base + 0x10_0000)
        .filter(|&pc| set(pc) == set(base))
        .take(4)
        .collect();
    assert_eq!(same.len(), 4);
    same
}

/// Two pcs of one stack whose keys share a set are both remembered (a
/// one-way memo let them evict each other at every walk: perl's and this
/// project's own test programs had such a pair): the memo is two-way,
/// and a third pc of the set forgets the older of the two.  The model
/// replicates the memo's hash (Fibonacci hashing of the key, the top 7
/// bits for 128 sets); were it another, the pcs below would not share a
/// set and the evictions checked would not happen.
#[test]
fn memo_keeps_the_last_two_pcs_of_a_set() {
    let ws = WordSize::W8;
    let same = same_set_pcs(ws);
    let found = |i: u64| {
        let mut p = PackedRow::default();
        p.start = i as u32;
        (p, false)
    };
    let mut memo = Box::new(PcMemo::empty());
    memo.put(same[0], ws, found(0));
    memo.put(same[1], ws, found(1));
    // Both, whichever is asked first, again and again.
    for _ in 0..3 {
        assert_eq!(memo.get(same[1], ws), Some(found(1)));
        assert_eq!(memo.get(same[0], ws), Some(found(0)));
    }
    // A pc put again keeps its way; the other stays.
    memo.put(same[0], ws, found(10));
    assert_eq!(memo.get(same[0], ws), Some(found(10)));
    assert_eq!(memo.get(same[1], ws), Some(found(1)));
    memo.put(same[1], ws, found(11));
    assert_eq!(memo.get(same[0], ws), Some(found(10)));
    assert_eq!(memo.get(same[1], ws), Some(found(11)));
    // A third forgets the one in the second way (same[0], put first:
    // rewriting a way does not move it).
    memo.put(same[2], ws, found(2));
    assert_eq!(memo.get(same[2], ws), Some(found(2)));
    assert_eq!(memo.get(same[1], ws), Some(found(11)));
    assert_eq!(memo.get(same[0], ws), None);
    // An exact model of the policy over random puts in one set: the way
    // that holds the pc is rewritten, else the first, its row moving to
    // the second.
    let mut model: Vec<(u64, Found)> = Vec::new();
    memo.clear();
    let mut rng = Rng(0x2_3a11);
    for i in 0..20_000u64 {
        let pc = same[(rng.next() % 4) as usize];
        if rng.next().is_multiple_of(2) {
            let f = found(i);
            match model.iter().position(|&(p, _)| p == pc) {
                Some(j) => model[j] = (pc, f),
                None => {
                    model.insert(0, (pc, f));
                    model.truncate(MEMO_WAYS);
                }
            }
            memo.put(pc, ws, f);
        }
        for &p in &same {
            let want = model.iter().find(|&&(q, _)| q == p).map(|&(_, f)| f);
            assert_eq!(memo.get(p, ws), want, "pc {p:#x} after {i} rounds");
        }
    }
}

/// Rows of every kind the memo keys apart (`PcMemo::put`'s key flags),
/// for word size `ws`, each with its FDE's signal flag and a name: usual
/// rows (the plain key: `PcMemo::usual`), end of the stack's rows (the
/// END bit: `PcMemo::end`), and the others (the NOT_USUAL bit: a signal
/// frame's usual or end row, a row for the general step, an end row
/// whose CFA is not above its register, a refused row).  Their starts
/// differ, so that an answer tells which row it is.
fn memo_rows(ws: WordSize) -> Vec<(&'static str, Found)> {
    use cfi::{Cfa, Rule};
    let a = Arch::of(ws);
    let w = ws.bytes() as i32;
    // The other word size's: a frame pointer saved just below the
    // return address for it, not for `ws`.
    let other = 12 - w;
    let (sp, fp) = (a.sp as u16, a.fp as u16);
    let keep = Rule::Unmentioned;
    let pack = |cfa: Cfa, ra: Rule, fp: Rule, bx: Rule| {
        PackedRow::pack(
            0,
            Ok(Row {
                cfa,
                ra,
                fp,
                bx,
                sp: keep,
            }),
            a,
        )
    };
    let usual = pack(Cfa::RegOffset(sp, w), Rule::Offset(-w), keep, keep);
    let end = pack(Cfa::RegOffset(sp, w), Rule::Undefined, keep, keep);
    let rows = [
        ("usual", usual, false),
        (
            "usual, CFA fp, fp and bx saved, a pair",
            pack(
                Cfa::RegOffset(fp, 2 * w),
                Rule::Offset(-w),
                Rule::Offset(-2 * w),
                Rule::Offset(-3 * w),
            ),
            false,
        ),
        (
            "usual, fp saved, a pair for the other word size",
            pack(
                Cfa::RegOffset(sp, 4 * w),
                Rule::Offset(-w),
                Rule::Offset(-w - other),
                keep,
            ),
            false,
        ),
        ("end, CFA sp", end, false),
        (
            "end, CFA fp",
            pack(Cfa::RegOffset(fp, 2 * w), Rule::Undefined, keep, keep),
            false,
        ),
        ("end, signal frame", end, true),
        ("usual, signal frame", usual, true),
        (
            "fp val_offset",
            pack(
                Cfa::RegOffset(sp, 4 * w),
                Rule::Offset(-w),
                Rule::ValOffset(-2 * w),
                keep,
            ),
            false,
        ),
        (
            "end, CFA below sp",
            pack(Cfa::RegOffset(sp, -w), Rule::Undefined, keep, keep),
            false,
        ),
        ("refused", PackedRow::pack(0, Err(Refusal::NoFde), a), false),
    ];
    rows.iter()
        .enumerate()
        .map(|(i, &(name, mut row, signal))| {
            row.start = 0x100 + i as u32;
            (name, (row, signal))
        })
        .collect()
}

/// What `PcMemo::usual` answers for a pc whose row is `f`: the usual
/// rules, for a usual row not of a signal frame.
fn memo_usual(ws: WordSize, f: Found) -> Option<Usual> {
    let (row, signal) = f;
    row.usual(ws).filter(|_| !signal)
}

/// What `PcMemo::end` answers for a pc whose row is `f`: the CFA rule,
/// for an end of the stack's row not of a signal frame.
fn memo_end(f: Found) -> Option<(bool, u32)> {
    let (row, signal) = f;
    row.end().filter(|_| !signal)
}

/// The rows of `memo_rows` are of the kinds they say: three usual ones
/// (one a pair for `ws`, one only for the other word size), two end rows,
/// and a signal frame's usual and end rows that the memo must not answer
/// as such.
fn check_memo_rows(ws: WordSize, rows: &[(&'static str, Found)]) {
    let row = |name: &str| rows.iter().find(|r| r.0 == name).expect(name).1 .0;
    for name in ["usual", "usual, signal frame"] {
        let u = row(name).usual(ws).expect(name);
        assert_eq!((u.fp, u.pair), (None, None), "{ws:?} {name}");
    }
    let w = ws.bytes() as u16;
    let u = row("usual, CFA fp, fp and bx saved, a pair").usual(ws);
    assert!(u.is_some_and(|u| u.cfa_fp && u.pair == Some(2 * w) && u.bx == Some(3 * w)));
    let u = row("usual, fp saved, a pair for the other word size").usual(ws);
    assert!(
        u.is_some_and(|u| u.fp.is_some() && u.pair.is_none()),
        "{u:?}"
    );
    for (name, end) in [
        ("end, CFA sp", Some((false, w as u32))),
        ("end, CFA fp", Some((true, 2 * w as u32))),
        ("end, signal frame", Some((false, w as u32))),
        ("end, CFA below sp", None),
        ("fp val_offset", None),
        ("refused", None),
    ] {
        assert_eq!(row(name).end(), end, "{ws:?} {name}");
        assert_eq!(row(name).usual(ws), None, "{ws:?} {name}");
    }
    assert_eq!(rows.iter().filter(|r| r.1 .1).count(), 2);
}

/// The largest pc the memo remembers is 2^60 - 1, for either word size:
/// its key (`(pc << 1 | 1 for 4-byte words) + 1`, at most 2^61) stays
/// clear of the bits that say what the slot's row is (END, bit 62;
/// NOT_USUAL, bit 63), so that each kind of row put for it is answered
/// as for any other pc (`get` the row, `usual` only a usual row, `end`
/// only an end row).  A pc from 2^60 on is not remembered: 2^61 - 1's
/// key would be 2^62 with 4-byte words, the END bit itself, and `usual`
/// would answer that key's slot whatever its row.
#[test]
fn memo_keys_end_below_2_60() {
    let top = (1u64 << 60) - 1;
    let too_large = [
        1u64 << 60,
        (1 << 60) + 1,
        (1 << 61) - 1,
        1 << 61,
        (1 << 62) - 1,
        1 << 62,
        (1 << 63) - 1,
        1 << 63,
        u64::MAX,
    ];
    let mut memo = Box::new(PcMemo::empty());
    for ws in [WordSize::W8, WordSize::W4] {
        let other = match ws {
            WordSize::W8 => WordSize::W4,
            WordSize::W4 => WordSize::W8,
        };
        let rows = memo_rows(ws);
        check_memo_rows(ws, &rows);
        for &(name, f) in &rows {
            let what = format!("{ws:?} {name}");
            memo.clear();
            memo.put(top, ws, f);
            assert_eq!(memo.get(top, ws), Some(f), "{what}");
            assert_eq!(memo.usual(top, ws), memo_usual(ws, f), "{what}");
            assert_eq!(memo.end(top, ws), memo_end(f), "{what}");
            // Not for the other word size, nor for the pcs with top's
            // low bits.
            for (pc, ws) in [(top, other), (top >> 1, ws), (top >> 2, ws), (0, ws)] {
                assert_eq!(memo.get(pc, ws), None, "{what}: {pc:#x} {ws:?}");
                assert_eq!(memo.usual(pc, ws), None, "{what}: {pc:#x} {ws:?}");
                assert_eq!(memo.end(pc, ws), None, "{what}: {pc:#x} {ws:?}");
            }
            for pc in too_large {
                for ws in [ws, other] {
                    memo.put(pc, ws, f);
                    assert_eq!(memo.get(pc, ws), None, "{what}: {pc:#x} {ws:?}");
                    assert_eq!(memo.usual(pc, ws), None, "{what}: {pc:#x} {ws:?}");
                    assert_eq!(memo.end(pc, ws), None, "{what}: {pc:#x} {ws:?}");
                }
            }
            // Puts that were not remembered did not take top's way.
            assert_eq!(memo.get(top, ws), Some(f), "{what}");
        }
    }
}

/// A way of a set in the model of `memo_ways_answer_every_kind_of_row`:
/// the pc, the kind of its row (in `memo_rows`), the row.
type Way = (u64, usize, Found);

/// The two ways of a set hold rows of every kind (`memo_rows`) under the
/// key flags `put` gives them: after every put, for each of four pcs of
/// one set, `get` answers the row last put for it while the set holds it
/// (the last two pcs put: a pc put again keeps its way, a new one takes
/// the first and moves the first's row to the second), `usual` only for
/// a usual row not of a signal frame, and `end` only for an end row not
/// of a signal frame, whichever way holds it.  A scripted start, then a
/// model of the two ways over 20,000 random puts, every kind seen in
/// both ways.
#[test]
fn memo_ways_answer_every_kind_of_row() {
    for ws in [WordSize::W8, WordSize::W4] {
        let same = same_set_pcs(ws);
        let rows = memo_rows(ws);
        check_memo_rows(ws, &rows);
        let kind = |name: &str| rows.iter().position(|r| r.0 == name).expect(name);
        let mut memo = Box::new(PcMemo::empty());
        // The ways, first first: pc, kind, row.
        let mut model: Vec<Way> = Vec::new();
        // Kinds checked in each way.
        let mut seen = BTreeSet::new();
        let mut evictions = 0;
        let mut put = |memo: &mut PcMemo, model: &mut Vec<Way>, pc: u64, k: usize, n: u32| {
            let (mut row, signal) = rows[k].1;
            row.start += n << 8;
            let f = (row, signal);
            memo.put(pc, ws, f);
            match model.iter().position(|m| m.0 == pc) {
                Some(j) => model[j] = (pc, k, f),
                None => {
                    model.insert(0, (pc, k, f));
                    if model.len() > MEMO_WAYS {
                        model.pop();
                        evictions += 1;
                    }
                }
            }
        };
        let mut check = |memo: &PcMemo, model: &[Way], what: &str| {
            for &pc in &same {
                let way = model.iter().position(|m| m.0 == pc);
                let f = way.map(|j| model[j].2);
                let what = format!(
                    "{ws:?} pc {pc:#x} ({way:?}: {:?}) {what}",
                    way.map(|j| rows[model[j].1].0)
                );
                assert_eq!(memo.get(pc, ws), f, "{what}");
                assert_eq!(
                    memo.usual(pc, ws),
                    f.and_then(|f| memo_usual(ws, f)),
                    "{what}"
                );
                assert_eq!(memo.end(pc, ws), f.and_then(memo_end), "{what}");
                if let Some(j) = way {
                    seen.insert((model[j].1, j));
                }
            }
        };
        // Scripted: a usual row in the second way, an end row in the
        // first; a signal frame's end row evicts the usual one; a usual
        // row put over the end row keeps its (second) way and is answered
        // as usual, no longer as an end; a new pc then evicts it, put
        // again or not.
        let script = [
            (0, "usual"),
            (1, "end, CFA sp"),
            (2, "end, signal frame"),
            (1, "usual, CFA fp, fp and bx saved, a pair"),
            (3, "fp val_offset"),
            (2, "end, CFA fp"),
            (0, "usual, signal frame"),
        ];
        let w = ws.bytes() as u32;
        for (n, &(i, name)) in script.iter().enumerate() {
            put(&mut memo, &mut model, same[i], kind(name), n as u32);
            check(&memo, &model, &format!("after script put {n}"));
            // The same, spelled out.
            let (p0, p1, p2, p3) = (same[0], same[1], same[2], same[3]);
            let (usual, end) = (|pc| memo.usual(pc, ws), |pc| memo.end(pc, ws));
            match n {
                0 => assert!(usual(p0).is_some() && end(p0).is_none()),
                // p1 first, p0 second.
                1 => assert!(usual(p0).is_some() && end(p1) == Some((false, w))),
                // p2 first (not an end for the run), p1 second.
                2 => {
                    assert!(memo.get(p2, ws).is_some() && end(p2).is_none());
                    assert!(usual(p2).is_none() && end(p1).is_some());
                    assert!(memo.get(p0, ws).is_none());
                }
                // p1 second, now usual.
                3 => assert!(usual(p1).is_some_and(|u| u.pair.is_some()) && end(p1).is_none()),
                // p3 first, p2 second: p1 forgotten, though put last.
                4 => assert!(memo.get(p1, ws).is_none() && memo.get(p2, ws).is_some()),
                // p2 second, an end row based on fp.
                5 => assert_eq!(end(p2), Some((true, 2 * w))),
                // p0 first (a signal frame's usual row), p3 second.
                6 => {
                    assert!(memo.get(p0, ws).is_some() && usual(p0).is_none());
                    assert!(memo.get(p3, ws).is_some() && memo.get(p2, ws).is_none());
                }
                _ => unreachable!(),
            }
        }
        let mut rng = Rng(0x7a11_e4d5 ^ ws.bytes());
        for n in 0..20_000u32 {
            let pc = same[rng.below(same.len() as u64) as usize];
            let k = rng.below(rows.len() as u64) as usize;
            put(&mut memo, &mut model, pc, k, n);
            check(&memo, &model, &format!("after random put {n}"));
        }
        for (k, (name, _)) in rows.iter().enumerate() {
            for way in 0..MEMO_WAYS {
                assert!(seen.contains(&(k, way)), "{ws:?} {name} never in way {way}");
            }
        }
        assert!(evictions > 5_000, "{ws:?}: {evictions} evictions");
    }
}

/// The usual FDE of [`end_chain`] (at CODE, 0x100 bytes) has two rows:
/// from 0 the CIE's (CFA = sp + word, the return address just below it:
/// one read), from 0x40 the frame pointer saved below the return address
/// (CFA = sp + 2 words: both read at once, two reads counted).  The
/// chain's usual frames are at these offsets, in this order.
const CHAIN_PCS: [u64; 3] = [0x10, 0x50, 0x30];

/// Where the chain's last usual frame returns to: in the end FDE (at
/// CODE + 0x100, 0x100 bytes).
const CHAIN_END: u64 = CODE + 0x121;

/// A stack of usual frames whose last caller is in another FDE, whose
/// row is the end of the stack's.
struct Chain {
    mem: Mem,
    regs: UserRegs,
    /// Every frame's ip: the usual frames', then the end frame's.
    trace: Vec<u64>,
    /// The reads of the usual frames' steps.
    reads: u32,
}

/// [`Chain`] of `usual` frames (at most 3, at [`CHAIN_PCS`], the first
/// interrupted there) on the patterned stack, the end FDE from CIE `cie`
/// with `end_insns`; the frame pointer is `fp` in every frame.
fn end_chain(ws: WordSize, cie: usize, end_insns: Vec<u8>, usual: usize, fp: u64) -> Chain {
    let a = Arch::of(ws);
    let w = ws.bytes();
    let (mem, _) = Obj::new(ws)
        .fde(
            CODE,
            0x100,
            vec![0x02, 0x40, 0x0e, 2 * w as u8, 0x80 | a.fp as u8, 2],
        )
        .fde_of(cie, CODE + 0x100, 0x100, end_insns)
        .build();
    let mut mem = mem.with_stack(ws);
    let sp0 = STACK + 0x800;
    let mut sp = sp0;
    let mut trace = vec![CODE + CHAIN_PCS[0]];
    let mut reads = 0;
    for (i, &pc) in CHAIN_PCS.iter().enumerate().take(usual) {
        let ra = match CHAIN_PCS.get(i + 1) {
            Some(next) if i + 1 < usual => CODE + next + 1,
            _ => CHAIN_END,
        };
        let cfa = if pc < 0x40 {
            reads += 1;
            sp + w
        } else {
            reads += 2;
            mem.put_word(sp, fp, ws);
            sp + 2 * w
        };
        mem.put_word(cfa - w, ra, ws);
        trace.push(ra);
        sp = cfa;
    }
    Chain {
        mem,
        regs: regs(ws, CODE + CHAIN_PCS[0], sp0, fp),
        trace,
        reads,
    }
}

/// The refusal counters with one refusal of `cause`, if any.
fn refused_once(cause: Option<Cause>) -> [u32; Cause::COUNT] {
    let mut r = [0; Cause::COUNT];
    if let Some(c) = cause {
        r[c as usize] = 1;
    }
    r
}

/// A run of memoised usual frames that ends at a later frame's end of
/// the stack's row (`_start`'s: the return address undefined), in
/// another FDE: one, two or three usual steps, then the end row checked
/// where the run is (`end_cfa`), its CFA from sp or fp, accepted (the
/// end of the stack) or refused (then the frame pointer, below the
/// stack: the walk ends there); a signal frame's end row is not the
/// run's to end at (it asks, and the general step ends the walk).  With
/// as many output slots as frames (full before the end row is looked
/// at), one more (the run's last slot is the end frame's, and the walk
/// ends at the end of the stack, not full) and plenty: the exact trace,
/// stop, steps and reads, the same by `cfi::step` (the reference), by
/// the general step with no memo, and from the memo, where every frame
/// up to the end row is a hit of the run.
#[test]
fn usual_run_ends_at_a_later_end_row() {
    for ws in [WordSize::W8, WordSize::W4] {
        let a = Arch::of(ws);
        let (fp, ra) = (a.fp as u8, a.ra as u8);
        let w = ws.bytes() as u8;
        let (high, low) = (STACK + 0xc00, STACK + 0x10);
        // The end FDE: its CIE and rows, the frame pointer, the walk's
        // stop and refusal there, and whether the run ends at its row.
        let ends = [
            (
                "end row, CFA sp",
                CIE_USUAL,
                vec![0x07, ra],
                high,
                Stop::EndOfStack,
                None,
                true,
            ),
            (
                "end row, CFA fp",
                CIE_USUAL,
                vec![0x0c, fp, 2 * w, 0x07, ra],
                high,
                Stop::EndOfStack,
                None,
                true,
            ),
            (
                "end row, CFA unaligned",
                CIE_USUAL,
                vec![0x0e, w + 1, 0x07, ra],
                low,
                Stop::FramePointerBelowStack,
                Some(Cause::CfaUnaligned),
                true,
            ),
            (
                "end row, CFA fp below sp",
                CIE_USUAL,
                vec![0x0c, fp, 2 * w, 0x07, ra],
                low,
                Stop::FramePointerBelowStack,
                Some(Cause::CfaNotAbove),
                true,
            ),
            (
                "signal frame's end row",
                CIE_SIGNAL,
                vec![0x07, ra],
                high,
                Stop::EndOfStack,
                None,
                false,
            ),
        ];
        let mut ended = 0;
        for (name, cie, insns, fp0, stop, cause, run_ends) in ends {
            for usual in 1..=CHAIN_PCS.len() {
                let c = end_chain(ws, cie, insns.clone(), usual, fp0);
                assert_eq!(c.trace.len(), usual + 1);
                assert_eq!(c.trace.last(), Some(&CHAIN_END));
                assert_eq!(c.reads, [1, 3, 4][usual - 1]);
                for max in [usual + 1, usual + 2, 16] {
                    let what = format!("{ws:?} {name}, {usual} usual frames, {max} slots");
                    let full = max == usual + 1;
                    let want = Outcome {
                        trace: c.trace.clone(),
                        stop: if full { Stop::Full } else { stop },
                        table_frames: usual as u32,
                        fp_frames: 0,
                        refused: refused_once(cause.filter(|_| !full)),
                    };
                    let (reference, _) = reference_walk(&c.regs, &mut c.mem.clone(), max);
                    assert_eq!(reference, want, "{what}: by cfi::step");
                    // The general step: no memo, the rows compiled by a
                    // first walk.
                    let mut m = c.mem.clone();
                    let mut general = OneObject::new(&mut m, ws);
                    general.memo = None;
                    table_walk(&c.regs, &mut m, &mut general, max);
                    let fills = general.fills;
                    let (got, stats) = table_walk(&c.regs, &mut m, &mut general, max);
                    assert_eq!(got, want, "{what}: general step");
                    assert_eq!(stats.reads, c.reads, "{what}: general step");
                    assert_eq!(general.fills, fills, "{what}: general step");
                    assert_eq!(general.usual_hits, 0, "{what}: general step");
                    // From the memo, filled by a first walk.
                    let mut m = c.mem.clone();
                    let mut tables = OneObject::new(&mut m, ws);
                    table_walk(&c.regs, &mut m, &mut tables, max);
                    let (fills, hits) = (tables.fills, tables.usual_hits);
                    let (got, stats) = table_walk(&c.regs, &mut m, &mut tables, max);
                    assert_eq!(got, want, "{what}: memo");
                    assert_eq!(stats.reads, c.reads, "{what}: memo");
                    assert!(!stats.budget_exhausted, "{what}: memo");
                    assert_eq!(tables.fills, fills, "{what}: memo");
                    let end_hit = run_ends && !full;
                    assert_eq!(
                        tables.usual_hits - hits,
                        usual as u32 + u32::from(end_hit),
                        "{what}: memo hits"
                    );
                    ended += usize::from(end_hit);
                }
            }
        }
        assert_eq!(ended, 4 * 3 * 2);
    }
}

/// [`OneObject`] whose walk has `leave` reads left after its first
/// `Tables::row` (which charges the rest of the budget), and whose memo
/// the walk sees only from then on: the interrupted frame is stepped by
/// the general step, the frames after it from the memo (if there is
/// one), with that budget.
#[derive(Clone)]
struct Leave {
    t: OneObject,
    leave: Option<u32>,
}

impl Tables for Leave {
    fn row<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        if let Some(n) = self.leave.take() {
            assert!(r.charge(r.left().saturating_sub(n)));
            assert_eq!(r.left(), n);
        }
        self.t.row(r, pc, ws)
    }

    fn known(&mut self, pc: u64, ws: WordSize) -> Option<Option<Result<Found, Cause>>> {
        // The first ask charges the budget: `row`'s.
        if self.leave.is_some() {
            return None;
        }
        self.t.known(pc, ws)
    }

    fn memo(&self) -> Option<&PcMemo> {
        self.leave.map_or(self.t.memo(), |_| None)
    }

    fn memo_hits(&mut self, n: u32) {
        self.t.memo_hits(n);
    }
}

/// [`OneObject`] whose `Tables::row` uses up the walk's read budget
/// after its work (as a compilation that took the last reads would).
#[derive(Clone)]
struct UseUp(OneObject);

impl Tables for UseUp {
    fn row<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Option<Result<Found, Cause>> {
        let a = self.0.row(r, pc, ws);
        assert!(r.charge(r.left()));
        a
    }
}

/// A step whose ask was left pending goes on with `Tables::row`'s answer
/// even where the work took the last reads of the walk's budget: the
/// step had passed the budget's check before it asked, as when the work
/// is done under the step.  So the interrupted frame's usual row is
/// applied and refused for want of reads (`Cause::Bound`), and the walk
/// ends at the frame pointer, below the stack: the budget is not
/// reported exhausted, and no frame is stepped by the tables.
#[test]
fn a_pending_step_goes_on_when_its_work_took_the_last_reads() {
    for ws in [WordSize::W8, WordSize::W4] {
        let ra = Arch::of(ws).ra as u8;
        let c = end_chain(ws, CIE_USUAL, vec![0x07, ra], 3, STACK + 0x10);
        let mut m = c.mem.clone();
        let mut t = UseUp(OneObject::new(&mut m, ws));
        let mut out = vec![0u64; 16];
        let mut stats = TableStats::default();
        let (n, stop) = walk::walk_tables(&c.regs, &mut m, &mut t, &mut out, &mut stats);
        assert_eq!((n, stop), (1, Stop::FramePointerBelowStack), "{ws:?}");
        assert_eq!(out[0], c.trace[0]);
        assert_eq!(t.0.fills, 1);
        let mut refused = [0; Cause::COUNT];
        refused[Cause::Bound as usize] = 1;
        assert_eq!(
            stats,
            TableStats {
                fp_frames: 0,
                refused,
                refusals: 1,
                reads: walk::MAX_TABLE_READS,
                ..TableStats::default()
            },
            "{ws:?}"
        );
    }
}

/// The run's end at a later frame's end row on a read budget ([`Leave`]):
/// the interrupted frame (one read) by the general step, then two usual
/// frames (three reads) by the memo's run, then the end frame, with 0
/// to 4 reads left before it.  From 2 on, the end row ends a run: with 3
/// or more left the first run steps both usual frames and takes the end
/// frame's slot (a run takes as many frames as two reads each go into
/// the budget); with 2, the first run stops short of it and a second run
/// of one frame ends there; with 1 left, no run can start and the
/// general step ends the walk at the same row; with none, the budget is
/// exhausted and the walk takes the frame pointer (below the stack).
/// The exact trace, stop, steps, reads and hits, the same by the general
/// step with the same budget (and, with reads left, by `cfi::step`).
#[test]
fn usual_run_ends_at_the_end_row_on_a_budget() {
    for ws in [WordSize::W8, WordSize::W4] {
        let ra = Arch::of(ws).ra as u8;
        let c = end_chain(ws, CIE_USUAL, vec![0x07, ra], 3, STACK + 0x10);
        assert_eq!(c.reads, 4);
        let (reference, _) = reference_walk(&c.regs, &mut c.mem.clone(), 16);
        // The reads left at the end frame, the walk's stop, and the
        // frames the memo's runs stepped or ended at.
        for (left, stop, hits) in [
            (0, Stop::FramePointerBelowStack, 1),
            (1, Stop::EndOfStack, 2),
            (2, Stop::EndOfStack, 3),
            (3, Stop::EndOfStack, 3),
            (4, Stop::EndOfStack, 3),
        ] {
            let want = Outcome {
                trace: c.trace.clone(),
                stop,
                table_frames: 3,
                fp_frames: 0,
                refused: [0; Cause::COUNT],
            };
            if left > 0 {
                assert_eq!(reference, want, "{ws:?} {left} left: by cfi::step");
            }
            for memo in [false, true] {
                let what = format!("{ws:?} {left} reads left, memo {memo}");
                let mut m = c.mem.clone();
                let mut t = OneObject::new(&mut m, ws);
                if !memo {
                    t.memo = None;
                }
                // Rows compiled, the memo filled.
                table_walk(&c.regs, &mut m, &mut t, 16);
                let (fills, hits0) = (t.fills, t.usual_hits);
                let mut t = Leave {
                    t,
                    leave: Some(left + c.reads),
                };
                let (got, stats) = table_walk(&c.regs, &mut m, &mut t, 16);
                assert_eq!(got, want, "{what}");
                assert_eq!(stats.reads, walk::MAX_TABLE_READS - left, "{what}");
                assert_eq!(stats.budget_exhausted, left == 0, "{what}");
                assert_eq!(t.t.fills, fills, "{what}");
                let hits = if memo { hits } else { 0 };
                assert_eq!(t.t.usual_hits - hits0, hits, "{what}: hits");
            }
        }
    }
}

/// A DRAP frame (a function that realigned its stack: i386 `main`) in a
/// run of memoised frames: the interrupted frame (usual: CFA = sp + word,
/// one read), its caller's DRAP row (CFA = the word at fp - `k` words,
/// the return address below the CFA, the frame pointer saved at fp: three
/// reads), then `_start`'s end row.  The run steps the DRAP frame
/// (`drap_step`) without asking for the whole row: every frame a hit of
/// the run, where before the DRAP frame ended a run (two hits).  Its CFA
/// accepted; below the stack pointer or unaligned (refused: the walk goes
/// on by the frame pointer); its CFA slot or its return address unmapped
/// (a fault): the exact trace, stop, steps, reads and refusal, the same
/// by `cfi::step`, by the general step with no memo, and from the memo;
/// and on budgets around a DRAP step's three reads, the same as the
/// general step with that budget.
#[test]
fn drap_frames_are_stepped_by_the_run() {
    let mut accepted = 0;
    for ws in [WordSize::W8, WordSize::W4] {
        let a = Arch::of(ws);
        let w = ws.bytes();
        let ra = a.ra as u8;
        for k in [1u64, 4] {
            let (mem, _) = Obj::new(ws)
                .fde(CODE, 0x100, vec![])
                .fde(
                    CODE + 0x100,
                    0x100,
                    [deref_fp_insns(ws, -((k * w) as i64)), at_fp_insns(ws, 0)].concat(),
                )
                .fde(CODE + 0x200, 0x100, vec![0x07, ra])
                .build();
            let base = mem.with_stack(ws);
            let sp0 = STACK + 0x400;
            let (ret1, ret2) = (CODE + 0x121, CODE + 0x221);
            // The DRAP frame's frame pointer (realigned, below its CFA),
            // the CFA its slot holds, and the refusal there; the caller's
            // frame pointer.
            let (fp1, cfa1, fp2) = (STACK + 0x600, STACK + 0x800, STACK + 0xa00);
            let above = STACK + STACK_LEN + 0x100;
            let cases = [
                ("CFA accepted", fp1, cfa1, None),
                ("CFA below sp", fp1, STACK + 0x100, Some(Cause::CfaNotAbove)),
                ("CFA unaligned", fp1, cfa1 + 1, Some(Cause::CfaUnaligned)),
                ("CFA slot unmapped", above, cfa1, Some(Cause::Fault)),
                ("return address unmapped", fp1, above, Some(Cause::Fault)),
            ];
            for (name, fp, cfa, cause) in cases {
                let what = format!("{ws:?} DRAP at fp - {k} words, {name}");
                let mut mem = base.clone();
                mem.put_word(sp0, ret1, ws);
                if mem.in_stack(fp).is_some() {
                    mem.put_word(fp - k * w, cfa, ws);
                    mem.put_word(fp, fp2, ws);
                }
                mem.put_word(cfa1 - w, ret2, ws);
                let regs = regs(ws, CODE + 0x10, sp0, fp);
                let (want, _) = reference_walk(&regs, &mut mem.clone(), 16);
                assert_eq!(
                    want.trace.get(..2),
                    Some(&[CODE + 0x10, ret1][..]),
                    "{what}: by cfi::step {want:x?}"
                );
                // The DRAP frame's refusal (the frame-pointer walk after it
                // meets pcs of the stack's pattern, which no FDE covers).
                let mut refused = want.refused;
                refused[Cause::NoFde as usize] = 0;
                assert_eq!(
                    refused,
                    refused_once(cause),
                    "{what}: by cfi::step {want:x?}"
                );
                if cause.is_some() {
                    assert_eq!(want.table_frames, 1, "{what}: by cfi::step");
                } else {
                    assert_eq!(
                        want.trace,
                        [CODE + 0x10, ret1, ret2],
                        "{what}: by cfi::step"
                    );
                    assert_eq!(want.stop, Stop::EndOfStack, "{what}: by cfi::step");
                    assert_eq!(want.table_frames, 2, "{what}: by cfi::step");
                    accepted += 1;
                }
                // The general step, no memo.
                let mut m = mem.clone();
                let mut general = OneObject::new(&mut m, ws);
                general.memo = None;
                table_walk(&regs, &mut m, &mut general, 16);
                let (got, gstats) = table_walk(&regs, &mut m, &mut general, 16);
                assert_eq!(got, want, "{what}: general step");
                // From the memo, filled by a first walk: the DRAP frame a
                // hit of the run, accepted or refused, and the end row one
                // when reached.
                let mut m = mem.clone();
                let mut tables = OneObject::new(&mut m, ws);
                table_walk(&regs, &mut m, &mut tables, 16);
                let (fills, hits) = (tables.fills, tables.usual_hits);
                let (got, stats) = table_walk(&regs, &mut m, &mut tables, 16);
                assert_eq!(got, want, "{what}: memo");
                assert_eq!(stats.reads, gstats.reads, "{what}: memo reads");
                assert_eq!(tables.fills, fills, "{what}: memo");
                let want_hits = if cause.is_none() { 3 } else { 2 };
                assert_eq!(
                    tables.usual_hits - hits,
                    want_hits,
                    "{what}: hits of the run"
                );
                // On budgets around a DRAP step's three reads: the memo's
                // walk is the general step's with the same budget.
                for left in 0..8 {
                    let walk = |memo: bool| {
                        let mut m = mem.clone();
                        let mut t = OneObject::new(&mut m, ws);
                        if !memo {
                            t.memo = None;
                        }
                        table_walk(&regs, &mut m, &mut t, 16);
                        let mut t = Leave {
                            t,
                            leave: Some(left),
                        };
                        table_walk(&regs, &mut m, &mut t, 16)
                    };
                    let ((tw, ts), (gw, gs)) = (walk(true), walk(false));
                    assert_eq!(tw, gw, "{what}, {left} reads left: memo vs general");
                    assert_eq!(ts.reads, gs.reads, "{what}, {left} reads left");
                    assert_eq!(
                        ts.budget_exhausted, gs.budget_exhausted,
                        "{what}, {left} reads left"
                    );
                }
            }
        }
    }
    assert_eq!(accepted, 4);
}

// ---------------------------------------------------------------------
// Rows compiled from the file (the kernel's shared rows).
// ---------------------------------------------------------------------

/// The file's bytes at their offsets (the kernel's `FileBytes` before the
/// layout is known).
struct FileAt<'a>(&'a [u8]);

impl UserBytes for FileAt<'_> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        let off = usize::try_from(addr).ok()?;
        buf.copy_from_slice(self.0.get(off..off.checked_add(buf.len())?)?);
        Some(())
    }
}

/// The file's bytes at offsets from the object's base, through its
/// layout (the kernel's `FileBytes` of a shared object).
struct FileByLayout<'a> {
    data: &'a [u8],
    layout: &'a unwind_logic::elf::Layout,
}

impl UserBytes for FileByLayout<'_> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        let off = self.layout.file_offset(addr, buf.len() as u64)?;
        FileAt(self.data).read_bytes(off, buf)
    }
}

/// Every FDE of `path` compiled twice: from its loaded image at link-time
/// addresses (what a process's memory holds, bias 0) and from its file
/// through `elf::layout` at offsets from the base (the kernel's shared
/// rows): at every FDE's first pc, last pc and middle, the same rows.
/// The number of pcs compared.
fn file_rows_match(path: &str) -> Result<u64, String> {
    use unwind_logic::elf;
    let data = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let (file, ws) = parse_object(&data)?;
    let mut image = Image { segs: Vec::new() };
    let mut first = None;
    for seg in file.segments() {
        let d = seg.data().map_err(|e| e.to_string())?;
        image.segs.push((seg.address(), d.to_vec()));
        first.get_or_insert(seg.address() & !0xfff);
    }
    let first = first.ok_or("no PT_LOAD")?;
    let mut layout = elf::Layout::default();
    elf::layout(&mut FileAt(&data), 0, ws, &mut layout).ok_or("no layout")?;
    if layout.nr_loads > elf::MAX_LOADS {
        return Err(format!("{} PT_LOADs", layout.nr_loads));
    }
    // The layout's hdr is the image's, less the base.
    let hdr_sec = file
        .section_by_name(".eh_frame_hdr")
        .ok_or("no .eh_frame_hdr")?;
    if layout.hdr != hdr_sec.address() - first {
        return Err(format!(
            "layout's hdr {:#x}, the section at {:#x} - {first:#x}",
            layout.hdr,
            hdr_sec.address()
        ));
    }
    // elf::locate on the image at its link-time base finds the same.
    if elf::locate(&mut image, first, ws) != Some(hdr_sec.address()) {
        return Err("locate disagrees".into());
    }
    let h_img = cfi::read_hdr(&mut Reader::new(&mut image), hdr_sec.address(), ws)
        .map_err(|e| format!("hdr: {e:?}"))?;
    let mut by_file = FileByLayout {
        data: &data,
        layout: &layout,
    };
    let h_file = cfi::read_hdr(&mut Reader::new(&mut by_file), layout.hdr, ws)
        .map_err(|e| format!("hdr from the file: {e:?}"))?;
    if h_file.count != h_img.count || h_file.addr + first != h_img.addr {
        return Err(format!("hdrs differ: {h_file:?} vs {h_img:?}"));
    }
    let (mut img_rows, mut file_rows) = (Rows::default(), Rows::default());
    let mut n = 0;
    for i in 0..h_img.count {
        let mut b = [0u8; 8];
        image
            .read_bytes(h_img.table + 8 * i, &mut b)
            .ok_or("table outside the image")?;
        let v = i32::from_le_bytes(b[..4].try_into().unwrap());
        let start = ws.wrap(h_img.addr.wrapping_add(v as i64 as u64));
        let end = match compiled(&mut img_rows, &mut image, &h_img, ws, start) {
            (Ok(_), _) => img_rows
                .fdes
                .iter()
                .find(|f| f.begin <= start && start < f.end)
                .map_or(start + 1, |f| f.end),
            _ => start + 1,
        };
        for pc in [start, start + (end - start) / 2, end - 1] {
            let want = compiled(&mut img_rows, &mut image, &h_img, ws, pc).0;
            let got = compiled(&mut file_rows, &mut by_file, &h_file, ws, pc - first).0;
            if got != want {
                return Err(format!(
                    "pc {pc:#x}: from the file {got:?}, from memory {want:?}"
                ));
            }
            n += 1;
        }
    }
    // And the same FDE ranges, shifted by the base.
    let shifted: Vec<(u64, u64)> = file_rows
        .fdes
        .iter()
        .map(|f| (f.begin + first, f.end + first))
        .collect();
    let img: Vec<(u64, u64)> = img_rows.fdes.iter().map(|f| (f.begin, f.end)).collect();
    if shifted != img {
        return Err("FDE ranges differ".into());
    }
    Ok(n)
}

#[test]
fn rows_from_the_file_are_rows_from_memory() {
    let mut checked = Vec::new();
    let mut total = 0;
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for path in candidates() {
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        if !seen.insert(real) {
            continue;
        }
        match file_rows_match(&path) {
            Ok(n) => {
                println!("file rows: {path}: {n} pcs, the same rows from the file and from memory");
                total += n;
                checked.push(path);
            }
            Err(why) if why.starts_with("cannot read") || why.starts_with("architecture") => {
                println!("file rows: {path}: skipped ({why})")
            }
            Err(why) => {
                println!("file rows: {path}: FAILED: {why}");
                failures.push(format!("{path}: {why}"));
            }
        }
    }
    assert!(
        checked.iter().any(|p| p.contains("libc.so")),
        "no libc to check on this machine (checked {checked:?})"
    );
    assert!(total >= 10_000, "only {total} pcs compared");
    assert!(failures.is_empty(), "{failures:?}");
}

/// `Layout::file_offset`: a read inside one `PT_LOAD`'s file bytes maps
/// to its offset; across its end, past its file size (the zero-filled
/// tail), outside every load, or with more loads than kept: none.
#[test]
fn layout_file_offsets() {
    use unwind_logic::elf::{Layout, Load, MAX_LOADS};
    let mut l = Layout::default();
    l.loads[0] = Load {
        at: 0,
        offset: 0,
        size: 0x800,
    };
    l.loads[1] = Load {
        at: 0x1000,
        offset: 0x1000,
        size: 0x2000,
    };
    l.loads[2] = Load {
        at: 0x4010,
        offset: 0x3010,
        size: 0x100,
    };
    l.nr_loads = 3;
    assert_eq!(l.file_offset(0x10, 8), Some(0x10));
    assert_eq!(l.file_offset(0x7f8, 8), Some(0x7f8));
    assert_eq!(l.file_offset(0x7f9, 8), None);
    assert_eq!(l.file_offset(0x900, 1), None);
    assert_eq!(l.file_offset(0x2ff8, 8), Some(0x2ff8));
    assert_eq!(l.file_offset(0x4010, 4), Some(0x3010));
    assert_eq!(l.file_offset(0x410c, 4), Some(0x310c));
    assert_eq!(l.file_offset(0x410d, 4), None);
    assert_eq!(l.file_offset(u64::MAX - 2, 8), None);
    l.nr_loads = MAX_LOADS + 1;
    assert_eq!(l.file_offset(0x10, 8), None);
}

proptest! {
    /// `rows::keep_first` (the kernel's retain without a panicking index:
    /// `Inner::retain`, the files' registry) keeps what `Vec::retain`
    /// keeps, in order, and says how many.
    #[test]
    fn keep_first_is_retain(items in proptest::collection::vec(any::<u8>(), 0..64), k in 1u8..8) {
        let keep = |v: &u8| v % k != 0;
        let mut want = items.clone();
        want.retain(keep);
        let mut got = items.clone();
        let kept = unwind_logic::rows::keep_first(&mut got, keep);
        got.truncate(kept);
        prop_assert_eq!(got, want);
    }
}
