// SPDX-License-Identifier: GPL-2.0

//! The frame-pointer walk of a user stack, as rules over an abstract memory.
//!
//! Nothing here knows about the kernel: the kernel glue (`walk.rs` one level
//! up) supplies the registers of the interrupted user context and a
//! fault-tolerant reader of user words, and the host tests supply made-up
//! stacks.  Every step of the walk is checked before it is taken, so that a
//! hostile stack (loops, unaligned or downward frame pointers, kernel
//! addresses, unmapped pages) ends the walk, never the kernel:
//!
//! - the canonical frame address (CFA) must be strictly above the previous
//!   stack pointer, so the walk only moves up the stack and always ends;
//! - the CFA must be aligned to the word size;
//! - every read may fail, and a failed read ends the walk;
//! - a return address that is not a user address ends the walk, so no
//!   kernel address is ever reported (upstream C records it; see below);
//! - at most `out.len()` entries are produced.
//!
//! Compat (32-bit) tasks use 4-byte words.  Their addresses are offsets in
//! the code and stack segments; a non-zero segment base is added to every
//! instruction pointer (code segment) and stack address (stack segment), in
//! 32-bit arithmetic, so the trace holds linear addresses.
//!
//! Deliberate difference from upstream `kernel/unwind/user.c`: upstream
//! records whatever return address it reads, kernel addresses included, and
//! ignores segment bases.  The two agree on every stack whose return
//! addresses are user addresses and whose segments have base zero.
//!
//! [`walk_tables`] is the same walk with a step by the objects' unwind
//! tables ([`super::cfi`]) tried first at every frame, and the
//! frame-pointer step as the fallback.

use super::cfi::{self, Cause, Reader};
use super::rows::{CfaRule, Found, FpRule, PackedRow, PcMemo, RaRule, Usual};

pub use super::word::WordSize;

/// Where to find a frame's CFA, return address and saved frame pointer:
/// the arch's `struct unwind_user_frame`.  The kernel takes the rules from
/// the arch macros (`ARCH_INIT_USER_FP_FRAME()`,
/// `ARCH_INIT_USER_FP_ENTRY_FRAME()`) through [`UserRegs`]; nothing here
/// has a copy of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRule {
    /// CFA = (frame pointer or stack pointer) + `cfa_off`.
    pub cfa_off: i64,
    /// The return address is at CFA + `ra_off`.
    pub ra_off: i64,
    /// The caller's frame pointer is at CFA + `fp_off`; 0: not saved.
    pub fp_off: i64,
    /// Whether the CFA is based on the frame pointer (else the stack pointer).
    pub use_fp: bool,
}

impl FrameRule {
    /// The rule from the arch's `struct unwind_user_frame` fields.
    #[inline]
    pub const fn new(cfa_off: i32, ra_off: i32, fp_off: i32, use_fp: bool) -> Self {
        FrameRule {
            cfa_off: cfa_off as i64,
            ra_off: ra_off as i64,
            fp_off: fp_off as i64,
            use_fp,
        }
    }
}

/// Reads words of user memory.  Every read may fail.
pub trait UserMemory {
    /// Read one word of size `ws` at linear address `addr`; `None` if it
    /// cannot be read (unmapped, not a user address, would fault).
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64>;

    /// Read the two adjacent words at `addr` and `addr + ws`: a frame's
    /// saved frame pointer and return address, in one access where the
    /// memory allows it.  `None` if either cannot be read.
    fn read_pair(&mut self, addr: u64, ws: WordSize) -> Option<(u64, u64)> {
        let first = self.read_word(addr, ws)?;
        let second = self.read_word(addr.checked_add(ws.bytes())?, ws)?;
        Some((first, second))
    }
}

/// The interrupted user context a walk starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer (offset in the code segment for compat).
    pub ip: u64,
    /// Stack pointer (offset in the stack segment for compat).
    pub sp: u64,
    /// Frame pointer (offset in the stack segment for compat).
    pub fp: u64,
    /// `%rbx` (`%ebx`): a table step's CFA may be based on it.
    pub bx: u64,
    /// Word size of the task.
    pub ws: WordSize,
    /// The topmost frame is at a function's first instruction.
    pub at_function_entry: bool,
    /// Base of the code segment (0 unless compat with an LDT segment).
    pub cs_base: u64,
    /// Base of the stack segment (0 unless compat with an LDT segment).
    pub ss_base: u64,
    /// Return addresses at or above this are not user addresses.
    pub user_limit: u64,
    /// The rule of a frame set up with a frame pointer.
    pub fp_frame: FrameRule,
    /// The rule of the topmost frame at a function's first instruction.
    pub entry_frame: FrameRule,
}

/// Why a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The output was full.
    Full,
    /// The frame pointer was below the stack pointer (the usual end: the
    /// outermost frame has a zero frame pointer).
    FramePointerBelowStack,
    /// The CFA did not grow (or overflowed): a loop or a corrupt frame.
    NotGrowing,
    /// The CFA was not aligned to the word size.
    Unaligned,
    /// A word could not be read.
    Fault,
    /// A return address was not a user address.
    NotUser,
    /// The unwind tables say the frame is the outermost one (its return
    /// address is undefined, as in `_start`): the usual end of a walk by
    /// tables ([`walk_tables`]).
    EndOfStack,
    /// A table step left the frame pointer unknown and the next frame had
    /// no usable table, so neither method could go on ([`walk_tables`]).
    FpUnknown,
}

/// State of a frame-pointer walk.
#[derive(Clone, Debug)]
pub struct Walk {
    ip: u64,
    sp: u64,
    fp: u64,
    ws: WordSize,
    topmost: bool,
    at_function_entry: bool,
    cs_base: u64,
    ss_base: u64,
    user_limit: u64,
    fp_frame: FrameRule,
    entry_frame: FrameRule,
}

/// What a [`FrameRule`] asks of a step, apart from its offsets.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shape {
    /// The CFA is based on the frame pointer.
    use_fp: bool,
    /// The caller's frame pointer is saved.
    saves_fp: bool,
    /// ... just below the return address: one read of the pair.
    pair: bool,
}

impl Shape {
    /// The shape of the frame-pointer frame of every arch that has one:
    /// the CFA from the frame pointer, and the saved frame pointer just
    /// below the return address.
    const FP_PAIR: Shape = Shape {
        use_fp: true,
        saves_fp: true,
        pair: true,
    };

    #[inline(always)]
    fn of(rule: &FrameRule, ws: WordSize) -> Shape {
        let saves_fp = rule.fp_off != 0;
        Shape {
            use_fp: rule.use_fp,
            saves_fp,
            pair: saves_fp && rule.fp_off.checked_add(ws.bytes() as i64) == Some(rule.ra_off),
        }
    }
}

impl Walk {
    /// Start a walk at the given user context.
    pub fn new(r: &UserRegs) -> Self {
        Self::with_word_size(r, r.ws)
    }

    /// [`Walk::new`] with the word size given apart, so that a caller that
    /// passes a constant gets code specialised for it.
    #[inline(always)]
    fn with_word_size(r: &UserRegs, ws: WordSize) -> Self {
        Walk {
            ip: ws.wrap(r.cs_base.wrapping_add(r.ip)),
            sp: ws.wrap(r.ss_base.wrapping_add(r.sp)),
            fp: ws.wrap(r.ss_base.wrapping_add(r.fp)),
            ws,
            topmost: true,
            at_function_entry: r.at_function_entry,
            cs_base: r.cs_base,
            ss_base: r.ss_base,
            user_limit: r.user_limit,
            fp_frame: r.fp_frame,
            entry_frame: r.entry_frame,
        }
    }

    /// The current frame's instruction pointer (a linear address).
    #[inline]
    pub fn ip(&self) -> u64 {
        self.ip
    }

    /// Step to the caller's frame.
    pub fn next(&mut self, mem: &mut impl UserMemory) -> Result<(), Stop> {
        let rule = if self.topmost && self.at_function_entry {
            self.entry_frame
        } else {
            self.fp_frame
        };
        self.step(&rule, mem)
    }

    /// Step to the caller's frame by `rule`: [`Walk::next`] once the rule
    /// is known (every frame but the topmost one uses `fp_frame`).
    #[inline(always)]
    fn step(&mut self, rule: &FrameRule, mem: &mut impl UserMemory) -> Result<(), Stop> {
        self.step_shaped(rule, Shape::of(rule, self.ws), mem)
    }

    /// [`Walk::step`] with `rule`'s shape given apart, so that a caller
    /// that passes a constant gets code specialised for it.
    #[inline(always)]
    fn step_shaped(
        &mut self,
        rule: &FrameRule,
        shape: Shape,
        mem: &mut impl UserMemory,
    ) -> Result<(), Stop> {
        let ws = self.ws;
        let base = if shape.use_fp {
            if self.fp < self.sp {
                return Err(Stop::FramePointerBelowStack);
            }
            self.fp
        } else {
            self.sp
        };
        let cfa = base
            .checked_add_signed(rule.cfa_off)
            .ok_or(Stop::NotGrowing)?;
        if cfa <= self.sp || ws.wrap(cfa) != cfa {
            return Err(Stop::NotGrowing);
        }
        if cfa & (ws.bytes() - 1) != 0 {
            return Err(Stop::Unaligned);
        }

        let at = |off: i64| cfa.checked_add_signed(off).ok_or(Stop::Fault);
        let (ra, fp) = if shape.pair {
            // The usual frame: saved frame pointer, then return address.
            let (fp, ra) = mem.read_pair(at(rule.fp_off)?, ws).ok_or(Stop::Fault)?;
            (ra, Some(fp))
        } else {
            let ra = mem.read_word(at(rule.ra_off)?, ws).ok_or(Stop::Fault)?;
            let fp = if shape.saves_fp {
                Some(mem.read_word(at(rule.fp_off)?, ws).ok_or(Stop::Fault)?)
            } else {
                None
            };
            (ra, fp)
        };

        let ip = ws.wrap(self.cs_base.wrapping_add(ra));
        if ip >= self.user_limit {
            return Err(Stop::NotUser);
        }
        self.ip = ip;
        self.sp = cfa;
        if let Some(fp) = fp {
            self.fp = ws.wrap(self.ss_base.wrapping_add(fp));
        }
        self.topmost = false;
        Ok(())
    }
}

/// Walk the user stack from `regs` into `out`: the first entry is the
/// interrupted instruction pointer, then one return address per frame.
/// Returns the number of entries written and why the walk ended.
pub fn walk(regs: &UserRegs, mem: &mut impl UserMemory, out: &mut [u64]) -> (usize, Stop) {
    // One copy of the loop per word size, in which it is a constant.
    match regs.ws {
        WordSize::W8 => walk_as::<true>(regs, mem, out),
        WordSize::W4 => walk_as::<false>(regs, mem, out),
    }
}

/// [`walk`] of a 64-bit (`W8`) or compat task.
fn walk_as<const W8: bool>(
    regs: &UserRegs,
    mem: &mut impl UserMemory,
    out: &mut [u64],
) -> (usize, Stop) {
    let ws = if W8 { WordSize::W8 } else { WordSize::W4 };
    // `w` is only ever used by inlined steps, so that it lives in
    // registers, its word size a constant.
    let mut w = Walk::with_word_size(regs, ws);
    let Some((first, rest)) = out.split_first_mut() else {
        return (0, Stop::Full);
    };
    *first = w.ip();
    if rest.is_empty() {
        return (1, Stop::Full);
    }
    // The topmost frame may be at a function's entry (the rule
    // [`Walk::next`] picks).  Every other frame is a frame-pointer frame,
    // and the loop below has that rule as a loop invariant.
    let rule = regs.fp_frame;
    let topmost = if regs.at_function_entry {
        regs.entry_frame
    } else {
        rule
    };
    if let Err(stop) = w.step(&topmost, mem) {
        return (1, stop);
    }
    // The arch's usual frame gets a copy of the loop specialised for it.
    let stop = if Shape::of(&rule, ws) == Shape::FP_PAIR {
        fill(&mut w, rest, |w| w.step_shaped(&rule, Shape::FP_PAIR, mem))
    } else {
        fill(&mut w, rest, |w| w.step(&rule, mem))
    };
    match stop {
        Ok(()) => (out.len(), Stop::Full),
        Err((n, stop)) => (n + 1, stop),
    }
}

/// Fill `out` with the walk's instruction pointers, one `step` between
/// two; `Err((entries written, why))` if a step fails before `out` is full.
#[inline(always)]
fn fill(
    w: &mut Walk,
    out: &mut [u64],
    mut step: impl FnMut(&mut Walk) -> Result<(), Stop>,
) -> Result<(), (usize, Stop)> {
    let last = out.len().saturating_sub(1);
    for (nr, slot) in out.iter_mut().enumerate() {
        *slot = w.ip();
        if nr == last {
            break;
        }
        step(w).map_err(|stop| (nr + 1, stop))?;
    }
    Ok(())
}

/// What [`Tables::row`] answers for a pc: its compiled row and whether
/// its FDE is a signal frame's; `None` if no object with usable tables
/// maps the pc; the cause if the tables give no usable row for it.
pub type Answer = Option<Result<Found, Cause>>;

/// The unwind tables of the objects a walk by tables meets, compiled
/// ([`super::rows`]).
pub trait Tables {
    /// The compiled row for `pc` and whether its FDE is a signal frame's;
    /// `None` if no object with usable tables maps `pc`, the cause if the
    /// tables give no usable row for it.  Every user read it does (object
    /// lookups, compiling an FDE) goes through `r`, the walk's reader, and
    /// counts against the walk's budget.  The walk calls it from
    /// [`walk_tables_from`]'s frame, below the walk's, for a pc whose
    /// [`Tables::known`] was `None`.
    fn row<M: cfi::UserBytes>(&mut self, r: &mut Reader<'_, M>, pc: u64, ws: WordSize) -> Answer;

    /// [`Tables::row`]'s answer written into `slot` (the walk's, off the
    /// stack), for tables that would rather not return it through their
    /// caller's frame, which is over their work.  By default
    /// [`Tables::row`].
    fn row_into<M: cfi::UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
        slot: &mut Option<Answer>,
    ) {
        *slot = Some(self.row(r, pc, ws));
    }

    /// What [`Tables::row`] would answer for `pc`, if the tables have it
    /// without any work (no user read, no object lookup, no compilation:
    /// the pc's object known and its row compiled, or remembered as
    /// refused), counted as [`Tables::row`] counts that answer; `None`
    /// (nothing counted) if the answer needs work.  The walk asks this at
    /// its steps, and where it is `None` returns to [`walk_tables_from`]
    /// to have [`Tables::row`] do the work and goes on where it was
    /// ([`TableWalk`]): the frames of the lookups and compilations are
    /// never on the stack above the walk's.  By default nothing is known
    /// without work: every ask goes to [`Tables::row`].
    fn known(&mut self, pc: u64, ws: WordSize) -> Option<Answer> {
        let _ = (pc, ws);
        None
    }

    /// After [`Tables::row`] answered `None` for `pc`: the pcs `[start,
    /// end)` around it that have no tables either (the mapping of an
    /// object without them: a static binary, JIT code), which the walk
    /// then steps by frame pointers without asking again; `None` if not
    /// known.
    fn bare(&self, pc: u64) -> Option<(u64, u64)> {
        let _ = pc;
        None
    }

    /// A memo of recent pcs' rows whose answers are what [`Tables::row`]
    /// would answer (without a user read or any other work), if the
    /// tables keep one: the walk steps the frames whose pcs it holds with
    /// a usual row ([`PcMemo::usual`]) in a run, without asking
    /// [`Tables::row`], and counts them with [`Tables::memo_hits`].
    fn memo(&self) -> Option<&PcMemo> {
        None
    }

    /// `n` rows found in [`Tables::memo`]: counted as [`Tables::row`]
    /// counts a hit.
    fn memo_hits(&mut self, n: u32) {
        let _ = n;
    }
}

/// Reads of user memory that one walk by tables may do in all (object
/// lookups, compiling FDEs, the table steps' stack reads); after that the
/// walk goes on by frame pointers.
pub const MAX_TABLE_READS: u32 = 16 * 1024;

/// What a walk by tables did, for counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Frames stepped by the tables.
    pub table_frames: u32,
    /// Frames stepped by the frame pointer.
    pub fp_frames: u32,
    /// Frames whose pc no object with tables maps (JIT code, anonymous
    /// memory, an object without `PT_GNU_EH_FRAME`).
    pub no_tables: u32,
    /// Steps refused by the tables, by [`cfi::Cause`].
    pub refused: [u32; cfi::Cause::COUNT],
    /// Steps refused by the tables in all (the sum of `refused`, so that
    /// whoever counts them can tell there are none at once).
    pub refusals: u32,
    /// User reads done by the walk's table work (lookups, compiling, the
    /// table steps' stack reads).
    pub reads: u32,
    /// The walk used up [`MAX_TABLE_READS`].
    pub budget_exhausted: bool,
}

impl TableStats {
    fn refuse(&mut self, cause: Cause) {
        if let Some(n) = self.refused.get_mut(cause as usize) {
            *n = n.saturating_add(1);
        }
        self.refusals = self.refusals.saturating_add(1);
    }
}

/// The frame a walk by tables is at, beyond [`Walk`].
struct TableFrame {
    /// The frame pointer is known (a table step may find it undefined).
    fp_known: bool,
    /// The ip is a return address: the rules of `ip - 1` apply.  False for
    /// the interrupted frame and the frame a signal frame returns to.
    ip_is_ra: bool,
    /// `%rbx`, as far as table steps from the interrupted frame know it;
    /// unknown after a frame-pointer step.
    bx: cfi::Saved,
}

/// Walk the user stack from `regs` into `out` as [`walk`] does, but step
/// each frame by the unwind tables of the object that maps its pc where
/// there are usable ones, and by the frame pointer where not (if it is
/// known).  Frame-pointer steps use the same rules as [`walk`]; table
/// steps check what a frame-pointer step checks (the CFA grows, the
/// return address is a user address).  `mem` must read the same memory
/// as words and as bytes.  A task with segment bases (compat with LDT
/// segments) is walked by frame pointers only: the tables hold linear
/// addresses.
pub fn walk_tables<M: UserMemory + cfi::UserBytes>(
    regs: &UserRegs,
    mem: &mut M,
    tables: &mut impl Tables,
    out: &mut [u64],
    stats: &mut TableStats,
) -> (usize, Stop) {
    match TableWalk::new(regs) {
        Some(mut tw) => walk_tables_from(&mut tw, mem, tables, out, stats),
        None => walk(regs, mem, out),
    }
}

/// A walk by tables ([`walk_tables`]) that can leave its step and go on
/// with it: the walk made from the registers, the table walk's frame
/// beyond it, the reads done, and the answers of the step it is at.
///
/// Where a step's [`Tables::known`] has no answer, [`TableWalk::run`]
/// returns with the ask pending, [`walk_tables_from`] has [`Tables::row`]
/// do the work (an object lookup, a compilation) in a frame below the
/// walk's, and runs the walk again: it goes on at the same step, with
/// that answer, as if [`Tables::row`] had answered at once.  The walk's
/// outcome, counters and reads are the same whichever asks go pending,
/// none or all (the host tests walk every case both ways).
///
/// It is the caller's, and need not be on the stack: the kernel keeps it
/// in the mm's cache and starts it in place ([`TableWalk::start`]), from
/// registers read in a frame that has returned before the walk.
pub struct TableWalk {
    w: Walk,
    t: TableFrame,
    /// Pcs known to have no tables ([`Tables::bare`]): their frames go
    /// straight to the frame-pointer step.
    bare: (u64, u64),
    /// `out[nr]` holds the current frame's ip.
    nr: usize,
    /// User reads done by the walk's table work so far.
    reads: u32,
    /// The answers the current step's asks got (the pc's row; then, at a
    /// return address no FDE covers, the return address's own), kept
    /// while a later ask of the step is pending, or given by
    /// [`Tables::row`] to an ask that was; `None` when the step has not
    /// asked.
    got: [Option<Answer>; 2],
    /// The ask left pending: its index in `got`, and its pc.
    pending: Option<(usize, u64)>,
}

/// How a [`TableWalk::run`] ended.
enum Ran {
    /// The walk ended: entries written, and why.
    Done((usize, Stop)),
    /// A step's ask needs [`Tables::row`] ([`TableWalk::pending`]).
    Pending,
}

impl TableWalk {
    /// A walk that has not started: [`TableWalk::start`] starts it.
    pub const IDLE: TableWalk = {
        let rule = FrameRule::new(0, 0, 0, false);
        TableWalk {
            w: Walk {
                ip: 0,
                sp: 0,
                fp: 0,
                ws: WordSize::W8,
                topmost: true,
                at_function_entry: false,
                cs_base: 0,
                ss_base: 0,
                user_limit: 0,
                fp_frame: rule,
                entry_frame: rule,
            },
            t: TableFrame {
                fp_known: true,
                ip_is_ra: false,
                bx: cfi::Saved::Unknown,
            },
            bare: (0, 0),
            nr: 0,
            reads: 0,
            got: [None; 2],
            pending: None,
        }
    };

    /// The walk by tables from `regs`; `None` for a task with segment
    /// bases (compat with LDT segments), which [`walk_tables`] walks by
    /// frame pointers only: the tables hold linear addresses.
    pub fn new(regs: &UserRegs) -> Option<Self> {
        let mut tw = Self::IDLE;
        tw.start(regs).then_some(tw)
    }

    /// Whether a task in `regs` is walked by tables: not with segment
    /// bases (compat with LDT segments), which [`walk_tables`] walks by
    /// frame pointers only, as the tables hold linear addresses.
    pub fn walks(regs: &UserRegs) -> bool {
        regs.cs_base == 0 && regs.ss_base == 0
    }

    /// [`TableWalk::new`] in place (in a walk that is kept off the stack):
    /// `false`, and the walk left as it was, where [`TableWalk::walks`]
    /// says no.
    pub fn start(&mut self, regs: &UserRegs) -> bool {
        if !Self::walks(regs) {
            return false;
        }
        self.w = Walk::new(regs);
        self.t = TableFrame {
            fp_known: true,
            ip_is_ra: false,
            bx: cfi::Saved::Value(regs.bx),
        };
        self.bare = (0, 0);
        self.nr = 0;
        self.reads = 0;
        self.got = [None; 2];
        self.pending = None;
        true
    }

    /// The step's ask `i`, for `pc`: the answer it got if it has one,
    /// else [`Tables::known`]'s, kept; `Err` (the ask left pending) if
    /// the tables have none without work.
    #[inline]
    fn ask(&mut self, tables: &mut impl Tables, i: usize, pc: u64) -> Result<Answer, Pending> {
        let slot = self.got.get_mut(i).ok_or(Pending)?;
        if let Some(a) = *slot {
            return Ok(a);
        }
        match tables.known(pc, self.w.ws) {
            Some(a) => {
                *slot = Some(a);
                Ok(a)
            }
            None => {
                self.pending = Some((i, pc));
                Err(Pending)
            }
        }
    }

    /// The pending ask answered by [`Tables::row`], through a reader of
    /// what is left of the walk's budget, for the next [`TableWalk::run`]:
    /// in [`walk_tables_from`]'s frame, where the walk's was (its work
    /// under it; docs/design.md, "Stack use").
    #[inline(always)]
    fn settle<M: UserMemory + cfi::UserBytes>(&mut self, mem: &mut M, tables: &mut impl Tables) {
        let Some((i, pc)) = self.pending.take() else {
            return;
        };
        let mut r = Reader::with_reads(mem, MAX_TABLE_READS, self.reads);
        let ws = self.w.ws;
        if let Some(slot) = self.got.get_mut(i) {
            tables.row_into(&mut r, pc, ws, slot);
        }
        self.reads = r.reads();
    }

    /// The walk from where it is, into `out`: [`Ran::Done`] when it ends,
    /// [`Ran::Pending`] when a step needs [`Tables::row`].  A run that
    /// goes on with a step (its first ask answered) does not try the
    /// memo's run nor the budget first: the step had done that before it
    /// asked.  Out of line: its frame is the walk's, which
    /// [`TableWalk::settle`]'s replaces.
    #[inline(never)]
    fn run<M: UserMemory + cfi::UserBytes>(
        &mut self,
        mem: &mut M,
        tables: &mut impl Tables,
        out: &mut [u64],
        stats: &mut TableStats,
    ) -> Ran {
        let mut r = Reader::with_reads(mem, MAX_TABLE_READS, self.reads);
        let ran = self.frames(&mut r, tables, out, stats);
        self.reads = r.reads();
        ran
    }

    /// [`TableWalk::run`]'s loop over the frames.
    #[inline(always)]
    fn frames<M: UserMemory + cfi::UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        tables: &mut impl Tables,
        out: &mut [u64],
        stats: &mut TableStats,
    ) -> Ran {
        let last = match out.len().checked_sub(1) {
            Some(last) => last,
            None => return Ran::Done((0, Stop::Full)),
        };
        if let Some(slot) = out.get_mut(self.nr) {
            *slot = self.w.ip();
        }
        let fp_pair = Shape::of(&self.w.fp_frame, self.w.ws) == Shape::FP_PAIR;
        loop {
            let nr = self.nr;
            if nr >= last {
                return Ran::Done((nr + 1, Stop::Full));
            }
            let w = &mut self.w;
            let t = &mut self.t;
            let pc = if t.ip_is_ra {
                w.ip.wrapping_sub(1)
            } else {
                w.ip
            };
            let bare = self.bare;
            if bare.0 <= pc && pc < bare.1 {
                stats.no_tables = stats.no_tables.saturating_add(1);
                if t.fp_known && fp_pair && !w.topmost {
                    // A run of frames in a mapping without tables (a
                    // static binary): the frame-pointer walk's own loop,
                    // the rule a constant, while the frames stay in it.
                    match bare_run(w, r, out, &mut self.nr, last, bare, stats) {
                        Ok(()) => {
                            t.ip_is_ra = true;
                            t.bx = cfi::Saved::Unknown;
                            continue;
                        }
                        Err(res) => return Ran::Done(res),
                    }
                }
            } else {
                // A step that asked goes on; else the memo's run first.
                let goes_on = self.got[0].is_some();
                let run = if goes_on {
                    Run::Ask
                } else if w.ws == WordSize::W8 {
                    usual_run::<true, M>(w, t, r, tables, out, &mut self.nr, stats)
                } else {
                    usual_run::<false, M>(w, t, r, tables, out, &mut self.nr, stats)
                };
                match run {
                    Run::Moved => continue,
                    Run::Stop(res) => return Ran::Done(res),
                    Run::Refused => {}
                    Run::Ask => {
                        let step = table_step(self, r, tables, stats, pc, goes_on);
                        let Ok(step) = step else {
                            return Ran::Pending;
                        };
                        self.got = [None; 2];
                        match step {
                            Some(Ok(())) => {
                                self.nr += 1;
                                if let Some(slot) = out.get_mut(self.nr) {
                                    *slot = self.w.ip();
                                }
                                continue;
                            }
                            Some(Err(stop)) => return Ran::Done((nr + 1, stop)),
                            None => {}
                        }
                        if let Some(range) = tables.bare(pc) {
                            self.bare = range;
                        }
                    }
                }
            }
            // A memo's run that refused may have stepped frames first.
            let nr = self.nr;
            let w = &mut self.w;
            let t = &mut self.t;
            if !t.fp_known {
                return Ran::Done((nr + 1, Stop::FpUnknown));
            }
            // The arch's usual frame-pointer frame (every frame but the
            // topmost) by the step specialised for it, as `walk` does.
            let stepped = if fp_pair && !w.topmost {
                let rule = w.fp_frame;
                w.step_shaped(&rule, Shape::FP_PAIR, r.mem())
            } else {
                w.next(r.mem())
            };
            if let Err(stop) = stepped {
                return Ran::Done((nr + 1, stop));
            }
            stats.fp_frames = stats.fp_frames.saturating_add(1);
            t.ip_is_ra = true;
            t.bx = cfi::Saved::Unknown;
            self.nr = nr + 1;
            if let Some(slot) = out.get_mut(self.nr) {
                *slot = w.ip();
            }
        }
    }
}

/// An ask of a step that [`Tables::known`] could not answer: the walk
/// leaves the step for [`Tables::row`] ([`TableWalk`]).
struct Pending;

/// [`walk_tables`] from `tw`, which it uses up.  Each ask of a step that
/// the tables cannot answer without work ([`Tables::known`]) is answered
/// by [`Tables::row`] from this frame, where the walk has returned to,
/// and the walk goes on with it.
///
/// Bounded: a step asks at most twice, and each ask is left pending at
/// most once (its answer is kept for the step); each step ends with the
/// walk one frame further, or ended.  So a walk leaves its steps at most
/// twice per entry of `out`.
#[inline(always)]
pub fn walk_tables_from<M: UserMemory + cfi::UserBytes>(
    tw: &mut TableWalk,
    mem: &mut M,
    tables: &mut impl Tables,
    out: &mut [u64],
    stats: &mut TableStats,
) -> (usize, Stop) {
    let runs = out.len().saturating_mul(2).saturating_add(1);
    let mut res = (tw.nr.saturating_add(1).min(out.len()), Stop::Full);
    for _ in 0..runs {
        match tw.run(mem, tables, out, stats) {
            Ran::Done(done) => {
                res = done;
                break;
            }
            Ran::Pending => tw.settle(mem, tables),
        }
    }
    stats.reads = tw.reads;
    res
}

/// Frames of a mapping without tables, `bare`, from `out[*nr]` on (whose
/// pc is in it; not the topmost frame, the frame pointer known): stepped
/// by the arch's usual frame-pointer frame, as [`walk`] steps them, each
/// caller's ip written to `out`, while the frames' pcs stay in `bare`.
/// `Ok` when a caller's pc leaves it (`out[*nr]` is that caller), else
/// the walk's outcome: `out` full, or the step's stop.  The frames are
/// stepped by [`bare_loop`] and counted when it ends.
#[inline(always)]
fn bare_run<M: UserMemory + cfi::UserBytes>(
    w: &mut Walk,
    r: &mut Reader<'_, M>,
    out: &mut [u64],
    nr: &mut usize,
    last: usize,
    bare: (u64, u64),
    stats: &mut TableStats,
) -> Result<(), (usize, Stop)> {
    // The callers' slots, to the end of `out` (never empty: the walk's
    // loop calls this only while `*nr < last`; `out` full otherwise).
    let slots = match out.get_mut(nr.saturating_add(1)..=last) {
        Some(slots) if !slots.is_empty() => slots,
        _ => return Err((*nr + 1, Stop::Full)),
    };
    let (k, end) = if w.ws == WordSize::W8 {
        bare_loop::<true, M>(w, r.mem(), slots, bare)
    } else {
        bare_loop::<false, M>(w, r.mem(), slots, bare)
    };
    *nr += k;
    let k32 = u32::try_from(k).unwrap_or(u32::MAX);
    stats.fp_frames = stats.fp_frames.saturating_add(k32);
    // Every frame stepped but the last stayed in `bare`; the last too
    // where a step ended the loop.
    let stayed = match end {
        BareEnd::Stop(_) => k32,
        _ => k32.saturating_sub(1),
    };
    stats.no_tables = stats.no_tables.saturating_add(stayed);
    match end {
        BareEnd::Left => Ok(()),
        BareEnd::Full => Err((*nr + 1, Stop::Full)),
        BareEnd::Stop(stop) => Err((*nr + 1, stop)),
    }
}

/// Why a [`bare_loop`] ended.
enum BareEnd {
    /// The last caller's pc left the mapping.
    Left,
    /// The last slot was written.
    Full,
    /// A step ended the walk.
    Stop(Stop),
}

/// The loop of a [`bare_run`]: frames stepped from `w` by its usual
/// frame-pointer frame, each caller's ip written to the next of `slots`
/// (not empty), until a caller's pc leaves `bare`, the slots are full or
/// a step stops.  The frames stepped, and why it ended.  Out of line and
/// one copy per word size (`W8`: 8 bytes, else 4), as [`usual_loop`]:
/// the walk is copied into a local, so that its registers stay in
/// registers (the walk's own state is the mm's, in memory), and written
/// back once.
#[inline(never)]
fn bare_loop<const W8: bool, M: UserMemory>(
    w: &mut Walk,
    mem: &mut M,
    slots: &mut [u64],
    bare: (u64, u64),
) -> (usize, BareEnd) {
    let mut lw = w.clone();
    lw.ws = if W8 { WordSize::W8 } else { WordSize::W4 };
    let rule = lw.fp_frame;
    let mut run = slots.iter_mut();
    let mut k = 0usize;
    let end = loop {
        // Not `None` at the first frame (`slots` is not empty); after a
        // slot is written the check below ends the loop at the last one.
        let Some(slot) = run.next() else {
            break BareEnd::Full;
        };
        if let Err(stop) = lw.step_shaped(&rule, Shape::FP_PAIR, mem) {
            break BareEnd::Stop(stop);
        }
        k += 1;
        *slot = lw.ip;
        if run.len() == 0 {
            break BareEnd::Full;
        }
        let pc = lw.ip.wrapping_sub(1);
        if !(bare.0 <= pc && pc < bare.1) {
            break BareEnd::Left;
        }
    };
    *w = lw;
    (k, end)
}

/// How a [`usual_run`] ended.
enum Run {
    /// It stepped one frame or more, and the tables do not know the
    /// current frame's row as a usual one without being asked.
    Moved,
    /// It stepped no frame, for that reason: [`table_step`] asks.
    Ask,
    /// The tables refused the current frame (counted): the walk tries
    /// the frame pointer.
    Refused,
    /// The walk ended ([`walk_tables`]'s outcome).
    Stop((usize, Stop)),
}

/// Frames whose rows the tables' memo holds as usual ones
/// ([`Tables::memo`]: frames a walk met before, the common case at a warm
/// mm's every sample), from `out[*nr]` on: each stepped as [`table_step`]
/// steps a usual row, by [`usual_step`], in a loop that keeps the frame,
/// the memo and the read budget in locals and has nothing else to decide
/// ([`usual_loop`]), each caller's ip written to `out`; where the loop
/// meets a frame whose DRAP row the memo holds ([`drap_step`]: i386
/// `main`), that frame stepped and the loop entered again; the hits and
/// reads are counted when it ends.  `W8`: the walk's word size is 8 bytes
/// (else 4), a constant in each copy of the loop.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn usual_run<const W8: bool, M: UserMemory + cfi::UserBytes>(
    w: &mut Walk,
    t: &mut TableFrame,
    r: &mut Reader<'_, M>,
    tables: &mut impl Tables,
    out: &mut [u64],
    nr: &mut usize,
    stats: &mut TableStats,
) -> Run {
    let first = *nr;
    // `out[first]` holds the current frame's ip; the callers' go after
    // it, to the end of `out`.
    let slots = match out.get_mut(first..) {
        Some([_, slots @ ..]) if !slots.is_empty() => slots,
        _ => return Run::Ask,
    };
    let Some(memo) = tables.memo() else {
        return Run::Ask;
    };
    // A usual row keeps a known frame pointer known (and an unknown one
    // unknown: those frames are [`table_step`]'s).
    if !t.fp_known {
        return Run::Ask;
    }
    let total = slots.len();
    let left0 = r.left();
    let mut f = RunFrame {
        pc: if t.ip_is_ra {
            w.ip.wrapping_sub(1)
        } else {
            w.ip
        },
        sp: w.sp,
        fp: w.fp,
        bx: t.bx,
        left: left0,
    };
    let (left_slots, end) = usual_loop::<W8, M>(memo, r, w.user_limit, slots, &mut f);
    // Slots taken: the frames stepped.
    let mut done = total.saturating_sub(left_slots);
    let end = match end {
        End::Miss => drap_run::<W8, M>(memo, r, w.user_limit, slots, &mut f, &mut done),
        end => end,
    };
    let RunFrame {
        pc,
        sp,
        fp,
        bx,
        left,
    } = f;
    let stepped = done.min(total);
    // The memo held the row of the frame the run ended at, unless it
    // ended for want of one or of a slot.
    let hits = stepped + usize::from(!matches!(end, End::Ask | End::Miss | End::Full));
    tables.memo_hits(u32::try_from(hits).unwrap_or(u32::MAX));
    // At most what was left: the charge cannot fail.
    let _ = r.charge(left0.wrapping_sub(left));
    let n = first + stepped;
    if stepped > 0 {
        // Every caller's pc is its ip - 1.
        enter(w, t, (pc.wrapping_add(1), sp, Some(fp), bx), true);
        let frames = u32::try_from(stepped).unwrap_or(u32::MAX);
        stats.table_frames = stats.table_frames.saturating_add(frames);
        *nr = n;
    }
    match end {
        End::Ask | End::Miss if stepped == 0 => Run::Ask,
        End::Ask | End::Miss => Run::Moved,
        End::Refused(cause) => {
            stats.refuse(cause);
            Run::Refused
        }
        End::NotUser => Run::Stop((n + 1, Stop::NotUser)),
        End::Outermost => Run::Stop((n + 1, Stop::EndOfStack)),
        End::Full => Run::Stop((n + 1, Stop::Full)),
    }
}

/// The reads a usual step takes at most: a [`usual_run`] steps a frame
/// only if they are left.
const USUAL_READS: u32 = 2;

/// The reads a DRAP step takes at most ([`drap_step`]): a [`usual_run`]
/// steps a DRAP frame only if they are left.  (Not the loop's bound: with
/// three there, the loop of usual steps took four instructions more a
/// frame, `make bench`'s 64-bit walk at 263 frames.)
const DRAP_READS: u32 = 3;

/// The frame a [`usual_loop`] is at (its pc: the ip where it is the
/// interrupted frame, else the ip - 1; its frame pointer, known), and the
/// reads it has left.
struct RunFrame {
    pc: u64,
    sp: u64,
    fp: u64,
    bx: cfi::Saved,
    left: u32,
}

/// Why a [`usual_loop`] ended.
#[derive(Clone, Copy)]
enum End {
    /// The memo does not hold the pc as a usual, end or DRAP row, or
    /// fewer than [`USUAL_READS`] reads are left.
    Ask,
    /// The memo does not hold the pc as a usual or end row: the loop's
    /// end, where [`usual_run`] looks for its DRAP row ([`run_drap`]).
    Miss,
    /// The step was refused (the memo held the row).
    Refused(Cause),
    /// The caller's ip is not a user address (the memo held the row).
    NotUser,
    /// The frame's row is the end of the stack's (the memo held it).
    Outermost,
    /// `out` is full.
    Full,
}

/// The loop of a [`usual_run`], from frame `f`, while `memo` holds usual
/// rows for the frames' pcs: each caller stepped to, its ip written to the
/// next of `slots`.  The slots left, and why it ended.  Out of line, so
/// that the frame, the memo and the slots are the only values the loop
/// keeps in registers; it steps at most as many frames as [`USUAL_READS`]
/// go into the reads left, so that the one bound of the loop is its
/// slots.
#[inline(never)]
fn usual_loop<const W8: bool, M: UserMemory + cfi::UserBytes>(
    memo: &PcMemo,
    r: &mut Reader<'_, M>,
    user_limit: u64,
    slots: &mut [u64],
    f: &mut RunFrame,
) -> (usize, End) {
    let ws = if W8 { WordSize::W8 } else { WordSize::W4 };
    let RunFrame {
        mut pc,
        mut sp,
        mut fp,
        mut bx,
        mut left,
    } = *f;
    let len = slots.len();
    let frames = len.min((left / USUAL_READS) as usize);
    let mut run = slots.get_mut(..frames).unwrap_or_default().iter_mut();
    // The frames stepped when the loop ends with the slot of the next one
    // taken.
    let stepped =
        |run: &core::slice::IterMut<'_, u64>| frames.saturating_sub(run.len()).saturating_sub(1);
    let (end, done) = loop {
        let Some(slot) = run.next() else {
            // The budget's end is [`table_step`]'s to handle.
            break (if frames == len { End::Full } else { End::Ask }, frames);
        };
        let Some(u) = memo.usual(pc, ws) else {
            // The end of the stack's row ends the run as `table_step`
            // ends the walk there: its CFA checked, nothing read.
            let end = match memo.end(pc, ws) {
                Some((cfa_fp, off)) => match end_cfa(sp, fp, cfa_fp, off, ws) {
                    Ok(()) => End::Outermost,
                    Err(cause) => End::Refused(cause),
                },
                None => End::Miss,
            };
            break (end, stepped(&run));
        };
        let caller = match usual_step::<false, M>(sp, Some(fp), bx, ws, r, u, &mut left) {
            Ok(caller) => caller,
            Err(cause) => break (End::Refused(cause), stepped(&run)),
        };
        let ip = caller.0;
        if ip >= user_limit {
            break (End::NotUser, stepped(&run));
        }
        *slot = ip;
        pc = ip.wrapping_sub(1);
        (sp, bx) = (caller.1, caller.3);
        // A usual row saves the frame pointer or keeps it.
        if let Some(v) = caller.2 {
            fp = v;
        }
    };
    *f = RunFrame {
        pc,
        sp,
        fp,
        bx,
        left,
    };
    (len.saturating_sub(done), end)
}

/// The CFA of an end of the stack's row ([`PackedRow::end`]: based on the
/// frame pointer if `cfa_fp`, else on the stack pointer `sp`, plus `off`)
/// checked as [`apply_row`] checks it before it finds the return address
/// undefined.
#[inline]
fn end_cfa(sp: u64, fp: u64, cfa_fp: bool, off: u32, ws: WordSize) -> Result<(), Cause> {
    let base = if cfa_fp { fp } else { sp };
    let cfa = base.checked_add(u64::from(off)).ok_or(Cause::CfaNotAbove)?;
    cfi::check_cfa(cfa, sp, ws, false)
        .map(|_| ())
        .map_err(cfi::Refusal::cause)
}

/// One step of [`walk_tables`] by the tables: `None` if there are none
/// for the frame or they refuse it (then the caller tries the frame
/// pointer), else the step's outcome; `Err` if an ask is left pending
/// ([`TableWalk::ask`]).  A step that goes on (`goes_on`: its first ask
/// answered) does not check the budget again: it had passed the check
/// before it asked.
#[inline]
fn table_step<M: UserMemory + cfi::UserBytes>(
    tw: &mut TableWalk,
    r: &mut Reader<'_, M>,
    tables: &mut impl Tables,
    stats: &mut TableStats,
    pc: u64,
    goes_on: bool,
) -> Result<Option<Result<(), Stop>>, Pending> {
    if !goes_on && r.exhausted() {
        stats.budget_exhausted = true;
        return Ok(None);
    }
    let (row, signal) = match tw.ask(tables, 0, pc)? {
        None => {
            stats.no_tables = stats.no_tables.saturating_add(1);
            return Ok(None);
        }
        Some(Err(cause)) => {
            stats.refuse(cause);
            return Ok(None);
        }
        // A return address that no FDE covers the byte before, at the
        // first pc of a signal frame's FDE: a handler's return into a
        // signal trampoline whose FDE starts at its first instruction
        // (the i386 vDSO's since 7.3; glibc's starts a byte early, at a
        // nop, so that `pc - 1` finds it, as unwinders look up a return
        // address).  No call returns to a trampoline, so its rows are
        // the frame's.  Else the refused row is refused as any.
        Some(Ok((row, _))) if tw.t.ip_is_ra && row.refusal() == Some(Cause::NoFde) => {
            match tw.ask(tables, 1, tw.w.ip)? {
                Some(Ok(found @ (_, true))) => found,
                _ => (row, false),
            }
        }
        Some(Ok(found)) => found,
    };
    let (w, t) = (&mut tw.w, &mut tw.t);
    let step = match row.usual(w.ws) {
        Some(u) => {
            let fp = t.fp_known.then_some(w.fp);
            usual_step::<true, M>(w.sp, fp, t.bx, w.ws, r, u, &mut 0).map(Some)
        }
        None => apply_row(w, t.fp_known, t.bx, r, &row, signal).map(|c| {
            c.map(|(ip, sp, fp)| {
                let bx =
                    t.bx.caller(row.bx_rule(), w.sp, sp, cfi::Arch::of(w.ws).bx, w.ws);
                (ip, sp, fp, bx)
            })
        }),
    };
    Ok(match step {
        Ok(Some((ip, sp, fp, bx))) => {
            if ip >= w.user_limit {
                return Ok(Some(Err(Stop::NotUser)));
            }
            enter(w, t, (ip, sp, fp, bx), !signal);
            stats.table_frames = stats.table_frames.saturating_add(1);
            Some(Ok(()))
        }
        Ok(None) => Some(Err(Stop::EndOfStack)),
        Err(cause) => {
            stats.refuse(cause);
            None
        }
    })
}

/// A table step's caller: its ip, stack pointer (the CFA), frame pointer
/// (`None`: unknown) and `%rbx`.
type Caller = (u64, u64, Option<u64>, cfi::Saved);

/// Make a table step's `caller` the walk's current frame; `ip_is_ra`:
/// its ip is a return address (not after a signal frame).
#[inline(always)]
fn enter(w: &mut Walk, t: &mut TableFrame, caller: Caller, ip_is_ra: bool) {
    let (ip, sp, fp, bx) = caller;
    w.ip = ip;
    w.sp = sp;
    if let Some(fp) = fp {
        w.fp = fp;
    }
    w.topmost = false;
    t.fp_known = fp.is_some();
    t.ip_is_ra = ip_is_ra;
    t.bx = bx;
}

/// [`apply_row`] and the caller's `%rbx` ([`cfi::Saved::caller`]) for a
/// usual row ([`PackedRow::usual`]), the frame most steps meet, without
/// decoding the general row: the same outcome (the host tests walk every
/// hand table both ways), from the frame's stack pointer, frame pointer
/// (`None`: unknown) and `%rbx`.  Its reads are charged to `r` where
/// `CHARGE`, else taken from `left`, the reads a [`usual_run`] has left
/// (it makes sure of [`USUAL_READS`] before the step, and charges `r`
/// when it ends), at the same points.  It reads at most [`USUAL_READS`]
/// words: the run's arithmetic on `left` (wrapping) depends on it, so a
/// usual row that needs more reads needs that bound raised.
#[inline(always)]
fn usual_step<const CHARGE: bool, M: UserMemory + cfi::UserBytes>(
    sp: u64,
    fp: Option<u64>,
    bx: cfi::Saved,
    ws: WordSize,
    r: &mut Reader<'_, M>,
    u: Usual,
    left: &mut u32,
) -> Result<Caller, Cause> {
    let mut charge = |r: &mut Reader<'_, M>, n: u32| {
        if CHARGE {
            r.charge(n)
        } else {
            *left = left.wrapping_sub(n);
            true
        }
    };
    let base = if u.cfa_fp {
        fp.ok_or(Cause::FpUnknown)?
    } else {
        sp
    };
    let cfa = base
        .checked_add(u64::from(u.cfa))
        .ok_or(Cause::CfaNotAbove)?;
    let cfa = cfi::check_cfa(cfa, sp, ws, false).map_err(cfi::Refusal::cause)?;
    // Everything is saved below the CFA.
    let at = |below: u16| cfa.checked_sub(u64::from(below)).ok_or(Cause::Fault);
    let (ra, fp) = match u.pair {
        // The saved frame pointer just below the return address: both
        // words in one read.
        Some(off) => {
            let at = at(off)?;
            if !charge(r, 2) {
                return Err(Cause::Bound);
            }
            let (fp, ra) = r.mem().read_pair(at, ws).ok_or(Cause::Fault)?;
            (ra, Some(fp))
        }
        None => {
            let at_ra = at(u.ra)?;
            if !charge(r, 1) {
                return Err(Cause::Bound);
            }
            let ra = r.mem().read_word(at_ra, ws).ok_or(Cause::Fault)?;
            let fp = match u.fp {
                Some(off) => {
                    let at = at(off)?;
                    if !charge(r, 1) {
                        return Err(Cause::Bound);
                    }
                    Some(r.mem().read_word(at, ws).ok_or(Cause::Fault)?)
                }
                None => fp,
            };
            (ra, fp)
        }
    };
    let bx = match u.bx {
        Some(below) => cfa
            .checked_sub(u64::from(below))
            .map_or(cfi::Saved::Unknown, cfi::Saved::At),
        None => bx,
    };
    Ok((ra, cfa, fp, bx))
}

/// The rest of a [`usual_run`] whose loop ended at a frame the memo holds
/// no usual or end row for (`f`, `done` slots of `slots` taken): if the
/// memo holds its DRAP row, with a slot and [`DRAP_READS`] left, that
/// frame stepped ([`run_drap`]) and the loop entered again, as long as
/// that goes on (each round takes a slot: the slots bound it); how the
/// run ended.  Out of line: a walk of usual frames
/// (every 64-bit warm walk of the benchmark) never calls it, and its
/// frame is not on the deepest stack path (the compile's, under
/// [`walk_tables`]).
#[inline(never)]
fn drap_run<const W8: bool, M: UserMemory + cfi::UserBytes>(
    memo: &PcMemo,
    r: &mut Reader<'_, M>,
    user_limit: u64,
    slots: &mut [u64],
    f: &mut RunFrame,
    done: &mut usize,
) -> End {
    loop {
        let Some(slot) = slots.get_mut(*done) else {
            return End::Ask;
        };
        if f.left < DRAP_READS {
            return End::Ask;
        }
        match run_drap(memo, r, user_limit, W8, f) {
            Some(Ok(ip)) => {
                *slot = ip;
                *done += 1;
            }
            Some(Err(end)) => return end,
            None => return End::Ask,
        }
        let rest = slots.get_mut(*done..).unwrap_or_default();
        let len = rest.len();
        let (left_slots, end) = usual_loop::<W8, M>(memo, r, user_limit, rest, f);
        *done += len.saturating_sub(left_slots);
        if !matches!(end, End::Miss) {
            return end;
        }
    }
}

/// A [`usual_run`]'s frame `f` whose pc the memo holds no usual or end
/// row for, stepped by its DRAP row ([`drap_step`]) if the memo holds one
/// (`None` if not).  Inlined into [`drap_run`]: not in the loop of usual
/// frames, which stays as it is, nor in the walk's loop
/// ([`TableWalk::run`]), whose frame it grew by 64-80 bytes; as a call of its own it cost a 15-frame compat
/// walk 100 instructions more (`make bench`).
#[inline(always)]
fn run_drap<M: UserMemory + cfi::UserBytes>(
    memo: &PcMemo,
    r: &mut Reader<'_, M>,
    user_limit: u64,
    w8: bool,
    f: &mut RunFrame,
) -> Option<Result<u64, End>> {
    let ws = if w8 { WordSize::W8 } else { WordSize::W4 };
    let row = memo.drap(f.pc, ws)?;
    Some(drap_step(r, user_limit, ws, f, &row))
}

/// [`apply_row`] and the caller's `%rbx` for a DRAP row
/// ([`PackedRow::is_drap`]) at frame `f` of a [`usual_run`] (the frame
/// pointer known): the CFA read at the frame pointer + offset and
/// checked, the return address read at CFA + offset, the frame pointer at
/// the frame pointer + offset, in [`apply_row`]'s order and with its
/// outcome (the host tests walk every hand table with a DRAP row both
/// ways).  The caller's ip, `f` made its frame, or the run's end (refused,
/// or the ip not a user address); its reads (at most [`DRAP_READS`],
/// which `f.left` has) taken from `f.left`.  The frame is changed in
/// place, with no caller's tuple in between.
#[inline(always)]
fn drap_step<M: UserMemory + cfi::UserBytes>(
    r: &mut Reader<'_, M>,
    user_limit: u64,
    ws: WordSize,
    f: &mut RunFrame,
    row: &PackedRow,
) -> Result<u64, End> {
    let (CfaRule::DerefFp(cfa_off), RaRule::At(ra_off), FpRule::AtFp(fp_off)) = (
        row.cfa_rule().ok_or(End::Refused(Cause::Malformed))?,
        row.ra_rule(),
        row.fp_rule(),
    ) else {
        return Err(End::Refused(Cause::Malformed));
    };
    let fault = End::Refused(Cause::Fault);
    let word = |r: &mut Reader<'_, M>, f: &mut RunFrame, at: Option<u64>| {
        let at = at.ok_or(fault)?;
        f.left = f.left.wrapping_sub(1);
        r.mem().read_word(at, ws).ok_or(fault)
    };
    let (sp, fp) = (f.sp, f.fp);
    let cfa = word(r, f, fp.checked_add_signed(i64::from(cfa_off)))?;
    let cfa = cfi::check_cfa(cfa, sp, ws, false).map_err(|e| End::Refused(e.cause()))?;
    let ra = word(r, f, cfa.checked_add_signed(i64::from(ra_off)))?;
    let caller_fp = word(r, f, fp.checked_add_signed(i64::from(fp_off)))?;
    if ra >= user_limit {
        return Err(End::NotUser);
    }
    f.bx =
        f.bx.caller(row.bx_rule(), sp, cfa, cfi::Arch::of(ws).bx, ws);
    f.pc = ra.wrapping_sub(1);
    f.sp = cfa;
    f.fp = caller_fp;
    Ok(ra)
}

/// The caller's ip, CFA and frame pointer (`None`: unknown) by a compiled
/// row, or `None` at the end of the stack: what [`cfi::apply`] computes
/// from the row it was packed from (the host tests compare the two), or
/// the cause of a refusal (a stack read over the budget is
/// [`Cause::Bound`]), with
/// the usual frame's two words read in one user access.
#[inline]
fn apply_row<M: UserMemory + cfi::UserBytes>(
    w: &Walk,
    fp_known: bool,
    bx: cfi::Saved,
    r: &mut Reader<'_, M>,
    row: &PackedRow,
    signal: bool,
) -> Result<Option<(u64, u64, Option<u64>)>, Cause> {
    let ws = w.ws;
    let fault = Cause::Fault;
    let fp = fp_known.then_some(w.fp);
    let word = |r: &mut Reader<'_, M>, at: Option<u64>| -> Result<u64, Cause> {
        let at = at.ok_or(fault)?;
        if !r.charge(1) {
            return Err(Cause::Bound);
        }
        r.mem().read_word(at, ws).ok_or(fault)
    };
    let cfa = match row.cfa_rule() {
        Some(CfaRule::Sp(off)) => w.sp.checked_add_signed(i64::from(off)),
        Some(CfaRule::Fp(off)) => fp
            .ok_or(Cause::FpUnknown)?
            .checked_add_signed(i64::from(off)),
        Some(CfaRule::Plt(p)) => {
            let extra = if w.ip & 15 >= u64::from(p.threshold) {
                1u64 << (p.shift & 7)
            } else {
                0
            };
            w.sp.checked_add_signed(i64::from(p.sp_off))
                .and_then(|v| v.checked_add(extra))
        }
        Some(CfaRule::DerefFp(off)) => {
            let at = fp
                .ok_or(Cause::FpUnknown)?
                .checked_add_signed(i64::from(off));
            Some(word(r, at)?)
        }
        Some(CfaRule::DerefSp(off)) => Some(word(r, w.sp.checked_add_signed(i64::from(off)))?),
        Some(CfaRule::Bx(off)) => match bx {
            cfi::Saved::Unknown => return Err(Cause::CfaRegister),
            cfi::Saved::Value(v) => Some(v),
            cfi::Saved::At(a) => Some(word(r, Some(a))?),
        }
        .and_then(|v| v.checked_add_signed(i64::from(off))),
        None => return Err(row.refusal().unwrap_or(Cause::Malformed)),
    }
    .ok_or(Cause::CfaNotAbove)?;
    let signal_sp = signal && matches!(row.cfa_rule(), Some(CfaRule::DerefSp(_)));
    let cfa = cfi::check_cfa(cfa, w.sp, ws, signal_sp).map_err(cfi::Refusal::cause)?;
    let at = |off: i16| cfa.checked_add_signed(i64::from(off));
    let at_sp = |off: i16| w.sp.checked_add_signed(i64::from(off));
    let ra_off = match row.ra_rule() {
        RaRule::At(off) => off,
        RaRule::AtSp(off) => {
            let ra = word(r, at_sp(off))?;
            let fp = fp_by(row.fp_rule(), fp, r, &word, &at, &at_sp, ws)?;
            return Ok(Some((ra, cfa, fp)));
        }
        RaRule::Undefined => return Ok(None),
    };
    let fp_rule = row.fp_rule();
    // The usual frame: the saved frame pointer just below the return
    // address, both read at once.
    if let FpRule::At(fp_off) = fp_rule {
        if i64::from(fp_off) + ws.bytes() as i64 == i64::from(ra_off) {
            let at = at(fp_off).ok_or(fault)?;
            if !r.charge(2) {
                return Err(Cause::Bound);
            }
            let (fp, ra) = r.mem().read_pair(at, ws).ok_or(fault)?;
            return Ok(Some((ra, cfa, Some(fp))));
        }
    }
    let ra = word(r, at(ra_off))?;
    let fp = fp_by(fp_rule, fp, r, &word, &at, &at_sp, ws)?;
    Ok(Some((ra, cfa, fp)))
}

/// The caller's frame pointer by `rule` ([`apply_row`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fp_by<M: UserMemory + cfi::UserBytes>(
    rule: FpRule,
    fp: Option<u64>,
    r: &mut Reader<'_, M>,
    word: &impl Fn(&mut Reader<'_, M>, Option<u64>) -> Result<u64, Cause>,
    at: &impl Fn(i16) -> Option<u64>,
    at_sp: &impl Fn(i16) -> Option<u64>,
    ws: WordSize,
) -> Result<Option<u64>, Cause> {
    Ok(match rule {
        FpRule::At(off) => Some(word(r, at(off))?),
        FpRule::Val(off) => Some(ws.wrap(at(off).ok_or(Cause::Fault)?)),
        FpRule::AtFp(off) => match fp {
            Some(fp) => Some(word(r, fp.checked_add_signed(i64::from(off)))?),
            None => None,
        },
        FpRule::AtSp(off) => Some(word(r, at_sp(off))?),
        FpRule::Undefined => None,
        FpRule::Keep => fp,
    })
}
