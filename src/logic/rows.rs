// SPDX-License-Identifier: GPL-2.0

//! Compiled unwind rows: the call-frame information of an object run
//! through the interpreter ([`super::cfi`]) once per FDE, kept as a sorted
//! table of small fixed-size rows, so that a step of a walk is a lookup in
//! kernel memory and one or two reads of the stack.
//!
//! This is the shape ORC gives the kernel's own unwinder and SFrame gives
//! user space: the DWARF interpreter does not run per sample.  It runs when
//! a walk first meets a pc of an FDE ([`ObjectRows::fill`]): the
//! `.eh_frame_hdr` search finds the FDE, [`cfi::compile`] gives every row
//! of it, and they are appended to the object's rows; the FDE's pc range is
//! inserted in the object's sorted index (only the part of it for which the
//! search finds this FDE, [`cfi::search_range`]: all of it, unless FDEs
//! overlap in the table; so the ranges are disjoint, and a lookup finds
//! what the search would).  Every later pc of that FDE, in
//! this walk or any later one, is [`ObjectRows::lookup`]: two binary
//! searches in kernel memory, no user read.
//!
//! A row is [`PackedRow`], 20 bytes: the pc offset it starts at, the CFA
//! rule (stack or frame pointer plus offset, the PLT pattern, or the word
//! at frame or stack pointer plus offset), where the return address is (or
//! that it is undefined: the end of the stack), and the frame-pointer
//! rule, all as
//! [`cfi::Row::check`] accepts them; or a refusal with its [`Cause`].  A
//! lookup answers exactly what [`cfi::rules_in`] followed by
//! [`cfi::Row::check`] answers for the same pc (the host tests compare the
//! two on every FDE of real objects), except for two documented bounds:
//! an FDE covering more than 4 GiB is refused ([`Bound::Memory`], not
//! remembered), and a return address or frame pointer saved further than
//! 32 KiB from the CFA is a refused row ([`Cause::Bound`]).
//!
//! What is remembered is only what depends on the tables alone: a
//! [`cfi::transient`] refusal (a fault, the read budget, no memory) is
//! returned and nothing is stored, so the next walk tries again.  A pc no
//! FDE covers is remembered as a one-byte range with a refused row
//! ([`Cause::NoFde`]), so a frame without tables costs one search, once
//! (except the last pc, `u64::MAX`, which has no such range: refused, not
//! remembered).
//!
//! The storage is the caller's ([`Store`]: the kernel's `KVec` with
//! `GFP_KERNEL_ACCOUNT`, `Vec` on the host); the bounds here are per FDE
//! ([`MAX_FDE_ROWS`], and the interpreter's own bounds); the caller bounds the whole
//! (the kernel's per-mm cap).

use super::cfi::{self, Bound, Cause, Cfa, Hdr, PltCfa, Reader, Refusal, Row, Rule, UserBytes};
use super::word::WordSize;

/// Rows of one FDE at most (each row needs an instruction, so
/// [`cfi::MAX_OPS`] bounds them anyway).
pub const MAX_FDE_ROWS: usize = cfi::MAX_OPS as usize;

/// The CFA kinds of [`PackedRow::kind`] (bits 0-2).
const CFA_REFUSED: u8 = 0;
const CFA_SP: u8 = 1;
const CFA_FP: u8 = 2;
const CFA_PLT: u8 = 3;
const CFA_DEREF_FP: u8 = 4;
const CFA_DEREF_SP: u8 = 5;
const CFA_BX: u8 = 6;
const CFA_MASK: u8 = 7;
/// The return address is undefined (bit 3): the end of the stack.
const RA_UNDEFINED: u8 = 8;
/// The return address is saved at the stack pointer + `ra` (bit 7).
const RA_AT_SP: u8 = 0x80;
/// The frame-pointer rules (bits 4-6).
const FP_SHIFT: u8 = 4;
const FP_KEEP: u8 = 0;
const FP_AT: u8 = 1;
const FP_VAL: u8 = 2;
const FP_AT_FP: u8 = 3;
const FP_UNDEFINED: u8 = 4;
const FP_AT_SP: u8 = 5;

/// One compiled row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PackedRow {
    /// The first pc it holds for, as an offset from its FDE's first pc.
    pub start: u32,
    /// The CFA's offset (from the stack or frame pointer, or the PLT's
    /// offset from the stack pointer, or where the CFA is saved from the
    /// frame pointer).
    pub cfa: i32,
    /// Where the return address is saved, from the CFA.
    pub ra: i16,
    /// The frame pointer's offset (saved at CFA + it, or CFA + it itself,
    /// or saved at the frame pointer + it).
    pub fp: i16,
    /// `%rbx`'s offset (saved at CFA + it or at the stack pointer + it,
    /// or CFA + it itself).
    pub bx: i16,
    /// The kinds of the three rules.
    kind: u8,
    /// The PLT pattern's threshold (bits 0-3) and shift - 2 (bit 4), and
    /// `%rbx`'s rule (bits 5-7, `BX_*`); for a refused row, its [`Cause`].
    aux: u8,
    /// The usual row's rules again, decoded when packed (`FAST_*`), for
    /// [`PackedRow::usual`], or the end row's ([`PackedRow::end`]); 0
    /// for every other row.  A [`PcMemo`] keeps
    /// the signal flag and the usual row's pair flag in its top bits
    /// ([`MEMO_SIGNAL`], [`MEMO_PAIR`]).
    fast: u8,
}

/// [`PackedRow::fast`]: the row is the usual one ...
const FAST_USUAL: u8 = 1;
/// ... its CFA is based on the frame pointer (else the stack pointer) ...
const FAST_CFA_FP: u8 = 2;
/// ... the frame pointer is saved (else kept) ...
const FAST_FP_AT: u8 = 4;
/// ... `%rbx` is saved (else kept).
const FAST_BX_AT: u8 = 8;
/// The row is the end of the stack's: the return address undefined, the
/// CFA the stack or frame pointer (`FAST_CFA_FP`) plus a positive offset
/// ([`PackedRow::end`]).
const FAST_END: u8 = 16;
/// A [`PcMemo`]'s copy of a row of a signal frame's FDE.
const MEMO_SIGNAL: u8 = 0x80;
/// A [`PcMemo`]'s copy of a usual row whose frame pointer is saved just
/// below the return address ([`Usual::pair`], for the word size of its
/// key).
const MEMO_PAIR: u8 = 0x40;
/// The bits of [`PackedRow::fast`] that only a [`PcMemo`]'s copy has.
const MEMO_BITS: u8 = MEMO_SIGNAL | MEMO_PAIR;

/// `%rbx`'s rules (bits 5-7 of [`PackedRow::aux`]).
const BX_SHIFT: u8 = 5;
const BX_KEEP: u8 = 0;
const BX_AT: u8 = 1;
const BX_AT_SP: u8 = 2;
const BX_VAL: u8 = 3;
const BX_UNKNOWN: u8 = 4;

/// The rules of a [`PackedRow`], for a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfaRule {
    /// Stack pointer + offset.
    Sp(i32),
    /// Frame pointer + offset.
    Fp(i32),
    /// The PLT pattern.
    Plt(PltCfa),
    /// The word at the frame pointer + offset.
    DerefFp(i32),
    /// The word at the stack pointer + offset (a signal frame's).
    DerefSp(i32),
    /// `%rbx` + offset (ld.so's lazy-binding trampoline).
    Bx(i32),
}

/// The rules of a usual row ([`PackedRow::usual`]): the CFA above the
/// register it is based on, everything saved below the CFA, so that a
/// step checks each address it works out with one compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usual {
    /// The CFA is the frame pointer plus `cfa` (else the stack pointer).
    pub cfa_fp: bool,
    /// The CFA's offset, above the stack or frame pointer.
    pub cfa: u32,
    /// The return address is saved at CFA - `ra`.
    pub ra: u16,
    /// The caller's frame pointer is saved at CFA - it (`None`: kept).
    pub fp: Option<u16>,
    /// The caller's `%rbx` is saved at CFA - it (`None`: kept).
    pub bx: Option<u16>,
    /// `fp` again if the frame pointer is saved just below the return
    /// address (`fp` is `ra` + the word size): both are read at once.
    pub pair: Option<u16>,
}

/// The return-address rule of a [`PackedRow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaRule {
    /// Saved at CFA + offset.
    At(i16),
    /// Saved at the stack pointer + offset (a signal frame's).
    AtSp(i16),
    /// Undefined: the end of the stack.
    Undefined,
}

/// The frame-pointer rule of a [`PackedRow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpRule {
    /// The caller's frame pointer is the current one.
    Keep,
    /// Saved at CFA + offset.
    At(i16),
    /// CFA + offset.
    Val(i16),
    /// Saved at the frame pointer + offset.
    AtFp(i16),
    /// Saved at the stack pointer + offset (a signal frame's).
    AtSp(i16),
    /// Unknown in the caller.
    Undefined,
}

impl PackedRow {
    /// A refused row from `start`.
    fn refused(start: u32, cause: Cause) -> Self {
        PackedRow {
            start,
            aux: cause as u8,
            ..Default::default()
        }
    }

    /// Pack the outcome of the interpreter for the pcs from `start`,
    /// checked as [`cfi::apply`] checks it.
    pub fn pack(start: u32, row: Result<Row, Refusal>, arch: cfi::Arch) -> Self {
        Self::pack_ref(start, row.as_ref().map_err(|e| *e), arch)
    }

    /// [`PackedRow::pack`] from a borrowed row (the row sink's: no copy
    /// on the compilation's deepest frames).
    #[inline(always)]
    pub fn pack_ref(start: u32, row: Result<&Row, Refusal>, arch: cfi::Arch) -> Self {
        let row = match row.and_then(|row| row.check(arch).map(|()| row)) {
            Ok(row) => row,
            Err(e) => return Self::refused(start, e.cause()),
        };
        let (cfa_kind, cfa, aux) = match row.cfa {
            Cfa::RegOffset(reg, off) if u64::from(reg) == arch.sp => (CFA_SP, off, 0),
            Cfa::RegOffset(reg, off) if u64::from(reg) == arch.bx => (CFA_BX, off, 0),
            Cfa::RegOffset(_, off) => (CFA_FP, off, 0),
            // The shift is 2 or 3 (`cfi::plt_pattern`).
            Cfa::Plt(p) => (
                CFA_PLT,
                p.sp_off,
                (p.threshold & 15) | ((p.shift.wrapping_sub(2) & 1) << 4),
            ),
            Cfa::DerefFp(off) => (CFA_DEREF_FP, off, 0),
            Cfa::DerefSp(off) => (CFA_DEREF_SP, off, 0),
            // `check` refused it.
            Cfa::Expression => return Self::refused(start, Cause::CfaExpression),
        };
        let small = |off: i32| i16::try_from(off).ok();
        let (ra_kind, ra) = match row.ra {
            Rule::Offset(off) => (0, small(off)),
            Rule::AtSp(off) => (RA_AT_SP, small(off)),
            _ => (RA_UNDEFINED, Some(0)),
        };
        let Some(ra) = ra else {
            return Self::refused(start, Cause::Bound);
        };
        let (fp_kind, fp) = match row.fp {
            Rule::Offset(off) => (FP_AT, small(off)),
            Rule::ValOffset(off) => (FP_VAL, small(off)),
            Rule::AtFp(off) => (FP_AT_FP, small(off)),
            Rule::AtSp(off) => (FP_AT_SP, small(off)),
            Rule::Undefined => (FP_UNDEFINED, Some(0)),
            _ => (FP_KEEP, Some(0)),
        };
        let Some(fp) = fp else {
            return Self::refused(start, Cause::Bound);
        };
        let (bx_kind, bx) = match row.bx {
            Rule::Unmentioned | Rule::SameValue => (BX_KEEP, Some(0)),
            Rule::Register(r) if u64::from(r) == arch.bx => (BX_KEEP, Some(0)),
            Rule::Offset(off) => (BX_AT, small(off)),
            Rule::AtSp(off) => (BX_AT_SP, small(off)),
            Rule::ValOffset(off) => (BX_VAL, small(off)),
            _ => (BX_UNKNOWN, Some(0)),
        };
        let Some(bx) = bx else {
            return Self::refused(start, Cause::Bound);
        };
        // The CFA above its register, everything saved below it, as in
        // every frame of real code ([`Usual`]'s offsets).
        let usual = matches!(cfa_kind, CFA_SP | CFA_FP)
            && cfa > 0
            && ra_kind == 0
            && ra < 0
            && (fp_kind == FP_KEEP || (fp_kind == FP_AT && fp < 0))
            && (bx_kind == BX_KEEP || (bx_kind == BX_AT && bx < 0));
        let cfa_fp = if cfa_kind == CFA_FP { FAST_CFA_FP } else { 0 };
        let fast = if usual {
            FAST_USUAL
                | cfa_fp
                | if fp_kind == FP_AT { FAST_FP_AT } else { 0 }
                | if bx_kind == BX_AT { FAST_BX_AT } else { 0 }
        } else if matches!(cfa_kind, CFA_SP | CFA_FP) && cfa > 0 && ra_kind == RA_UNDEFINED {
            FAST_END | cfa_fp
        } else {
            0
        };
        PackedRow {
            start,
            cfa,
            ra,
            fp,
            bx,
            kind: cfa_kind | ra_kind | (fp_kind << FP_SHIFT),
            aux: aux | (bx_kind << BX_SHIFT),
            fast,
        }
    }

    /// The row's rules if they are the usual frame's, the one most
    /// steps meet: the CFA is the stack or frame pointer plus a positive
    /// offset, the return address is saved below the CFA, and the frame
    /// pointer and `%rbx` are kept or saved below the CFA.  A walk steps it with a few instructions
    /// ([`super::walk`]); every other row takes the general path.  `ws`:
    /// the walk's word size (whether the frame pointer is saved just below
    /// the return address depends on it).
    #[inline(always)]
    pub fn usual(&self, ws: WordSize) -> Option<Usual> {
        if self.fast & FAST_USUAL == 0 {
            return None;
        }
        Some(self.usual_rules(self.is_pair(ws)))
    }

    /// The CFA rule of the end of the stack's row (the return address
    /// undefined): whether it is based on the frame pointer (else the
    /// stack pointer), and its offset, positive.  `None` for any other
    /// row, and for an end row whose CFA is worked out otherwise (the
    /// general step's).
    #[inline]
    pub fn end(&self) -> Option<(bool, u32)> {
        (self.fast & FAST_END != 0).then_some((self.fast & FAST_CFA_FP != 0, self.cfa as u32))
    }

    /// The usual row's frame pointer is saved just below its return
    /// address, for word size `ws` ([`Usual::pair`]).
    #[inline]
    fn is_pair(&self, ws: WordSize) -> bool {
        self.fast & FAST_FP_AT != 0 && i64::from(self.fp) + ws.bytes() as i64 == i64::from(self.ra)
    }

    /// The rules of a usual row, `pair` as [`PackedRow::is_pair`] says.
    /// Its offsets' signs are what [`PackedRow::pack`] made sure of before
    /// it set [`FAST_USUAL`] (`fast` is only ever set there): the CFA's
    /// positive, the others negative, so that the casts below give their
    /// magnitudes (of `-32768` too).
    #[inline(always)]
    fn usual_rules(&self, pair: bool) -> Usual {
        let f = self.fast;
        let below = |off: i16| (off as u16).wrapping_neg();
        Usual {
            cfa_fp: f & FAST_CFA_FP != 0,
            cfa: self.cfa as u32,
            ra: below(self.ra),
            fp: (f & FAST_FP_AT != 0).then(|| below(self.fp)),
            bx: (f & FAST_BX_AT != 0).then(|| below(self.bx)),
            pair: pair.then(|| below(self.fp)),
        }
    }

    /// The row of a function that realigns its stack (DRAP: i386 `main`,
    /// and any function whose frame needs more than the ABI's alignment):
    /// the CFA is the word at the frame pointer + offset, the return
    /// address is saved at CFA + offset, and the frame pointer at the
    /// frame pointer + offset.  A walk's run of memoised frames steps it
    /// ([`PcMemo::drap`]), with three reads, which the run makes sure of
    /// before the step (not the bound of its loop of usual steps).
    #[inline]
    pub fn is_drap(&self) -> bool {
        self.kind & (CFA_MASK | RA_UNDEFINED | RA_AT_SP) == CFA_DEREF_FP
            && (self.kind >> FP_SHIFT) & 7 == FP_AT_FP
    }

    /// The refusal's cause, for a refused row.
    #[inline]
    pub fn refusal(&self) -> Option<Cause> {
        if self.kind & CFA_MASK != CFA_REFUSED {
            return None;
        }
        Some(
            Cause::ALL
                .get(usize::from(self.aux))
                .copied()
                .unwrap_or(Cause::Malformed),
        )
    }

    /// The CFA rule (`None` for a refused row).
    #[inline]
    pub fn cfa_rule(&self) -> Option<CfaRule> {
        Some(match self.kind & CFA_MASK {
            CFA_SP => CfaRule::Sp(self.cfa),
            CFA_FP => CfaRule::Fp(self.cfa),
            CFA_PLT => CfaRule::Plt(PltCfa {
                sp_off: self.cfa,
                threshold: self.aux & 15,
                shift: 2 + ((self.aux >> 4) & 1),
            }),
            CFA_DEREF_FP => CfaRule::DerefFp(self.cfa),
            CFA_DEREF_SP => CfaRule::DerefSp(self.cfa),
            CFA_BX => CfaRule::Bx(self.cfa),
            _ => return None,
        })
    }

    /// The return-address rule.
    #[inline]
    pub fn ra_rule(&self) -> RaRule {
        if self.kind & RA_UNDEFINED != 0 {
            RaRule::Undefined
        } else if self.kind & RA_AT_SP != 0 {
            RaRule::AtSp(self.ra)
        } else {
            RaRule::At(self.ra)
        }
    }

    /// The frame-pointer rule.
    #[inline]
    pub fn fp_rule(&self) -> FpRule {
        match (self.kind >> FP_SHIFT) & 7 {
            FP_AT => FpRule::At(self.fp),
            FP_VAL => FpRule::Val(self.fp),
            FP_AT_FP => FpRule::AtFp(self.fp),
            FP_AT_SP => FpRule::AtSp(self.fp),
            FP_UNDEFINED => FpRule::Undefined,
            _ => FpRule::Keep,
        }
    }
    /// `%rbx`'s rule, as the interpreter gave it ([`cfi::Saved::caller`]
    /// follows it; `Undefined` stands for any rule it cannot follow).
    #[inline]
    pub fn bx_rule(&self) -> Rule {
        let off = i32::from(self.bx);
        match (self.aux >> BX_SHIFT) & 7 {
            BX_KEEP => Rule::Unmentioned,
            BX_AT => Rule::Offset(off),
            BX_AT_SP => Rule::AtSp(off),
            BX_VAL => Rule::ValOffset(off),
            _ => Rule::Undefined,
        }
    }
}

/// The pc range of a compiled FDE and where its rows are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdeEntry {
    /// First pc covered.
    pub begin: u64,
    /// One past the last pc covered.
    pub end: u64,
    /// Index of its first row in the object's rows.
    pub first: u32,
    /// Its number of rows (at least 1).
    pub count: u32,
    /// A signal frame's FDE (CIE augmentation `S`).
    pub signal: bool,
}

/// Growable storage of the caller's choice.  `push` may fail (no memory,
/// or the caller's cap): then nothing is remembered.
pub trait Store<T> {
    /// The items.
    fn items(&self) -> &[T];
    /// The items, to reorder.
    fn items_mut(&mut self) -> &mut [T];
    /// Append `v`; `false` if there is no room.
    fn push(&mut self, v: T) -> bool;
    /// Keep the first `n` items.
    fn truncate(&mut self, n: usize);
    /// Make room for `n` more items at once; `false` if there is none.
    fn reserve(&mut self, _n: usize) -> bool {
        true
    }
    /// Append `n` copies of `v`; `false` (and nothing appended) if there
    /// is no room.
    fn extend(&mut self, n: usize, v: T) -> bool
    where
        T: Clone,
    {
        let len = self.items().len();
        for _ in 0..n {
            if !self.push(v.clone()) {
                self.truncate(len);
                return false;
            }
        }
        true
    }
}

/// The compiled rows of one object: its FDEs met so far, sorted by first
/// pc, and their rows; and the probes of its `.eh_frame_hdr` table made
/// so far.  One object's: [`ObjectRows::fill`] is given the same hdr and
/// word size every time.
#[derive(Clone, Default)]
pub struct ObjectRows<F, R, P> {
    /// The FDEs compiled, sorted by `begin`.
    pub fdes: F,
    /// Their rows, each FDE's in order of `start`.
    pub rows: R,
    /// The memo of the hdr search's first probes ([`cfi::Probe`]): empty,
    /// or [`cfi::PROBE_SLOTS`] of them once a search of a table of more
    /// entries than that is made.
    pub probes: P,
}

/// What a lookup found: the row and whether its FDE is a signal frame's.
pub type Found = (PackedRow, bool);

/// The index of the object of `objects` (sorted by start, disjoint, each
/// `range` `[start, end)`) that holds `pc`: `last` if it does (a walk
/// stays in one object for several frames), else by binary search.
#[inline]
pub fn object_of<T>(
    objects: &[T],
    last: usize,
    pc: u64,
    range: impl Fn(&T) -> (u64, u64),
) -> Option<usize> {
    let covers = |o: &T| {
        let (start, end) = range(o);
        start <= pc && pc < end
    };
    match objects.get(last) {
        Some(o) if covers(o) => Some(last),
        _ => objects
            .partition_point(|o| range(o).0 <= pc)
            .checked_sub(1)
            .filter(|&i| objects.get(i).is_some_and(covers)),
    }
}

/// Slots of a [`PcMemo`] (a power of two): [`MEMO_WAYS`] to a set.
pub const MEMO_SLOTS: usize = 256;
/// Slots of a [`PcMemo`] set: the pcs whose keys hash to one set.
pub const MEMO_WAYS: usize = 2;
const MEMO_SETS: usize = MEMO_SLOTS / MEMO_WAYS;
const _: () = assert!(MEMO_SETS.is_power_of_two() && MEMO_SETS * MEMO_WAYS == MEMO_SLOTS);

/// One slot of a [`PcMemo`]: the key ([`PcMemo::key`]; 0: empty), with
/// [`NOT_USUAL`] or [`END`] set unless the row is a usual one of a frame
/// that is not a signal frame, and the row, with its FDE's signal flag
/// and the usual row's pair flag in its `fast` ([`MEMO_SIGNAL`],
/// [`MEMO_PAIR`]).
#[derive(Clone, Copy)]
#[repr(C)]
struct MemoSlot {
    key: u64,
    row: PackedRow,
}

/// The bit of a [`MemoSlot`]'s key that says its row is not what
/// [`PcMemo::usual`] or [`PcMemo::end`] answers (keys are below it): so
/// that the lookup of a run of usual frames is one compare a way.
const NOT_USUAL: u64 = 1 << 63;

/// The bit of a [`MemoSlot`]'s key that says its row is the end of the
/// stack's ([`PcMemo::end`]).
const END: u64 = 1 << 62;

/// The bits of a [`MemoSlot`]'s key that say its row is a DRAP row
/// ([`PcMemo::drap`]): both flags, which no other row has.
const DRAP: u64 = NOT_USUAL | END;

/// A two-way set-associative memo of the rows found for recent pcs, in
/// front of the objects' sorted rows: a frame whose pc a walk met before
/// (the same call site in a later sample, or in a recursion) costs a
/// multiply, a compare or two and a copy instead of an object lookup and
/// two binary searches.  Two ways, because one would let two pcs of one
/// stack whose keys share a slot (a 40% chance among 14 pcs in 256 slots)
/// evict each other at every walk.  It holds copies of rows that stay
/// right as long as their object is cached; whoever drops an object or
/// rows must [`clear`](Self::clear) it.
///
/// All zeroes is an empty memo (the kernel allocates it zeroed, in place:
/// at 32 bytes a slot, 8 KiB, it is too large for the stack).
#[derive(Clone)]
#[repr(C)]
pub struct PcMemo {
    sets: [[MemoSlot; MEMO_WAYS]; MEMO_SETS],
}

impl PcMemo {
    /// An empty memo, by value (the host's and the KUnit tests' way; the
    /// kernel allocates it zeroed in place).
    #[cfg(any(not(CONFIG_UNWIND_USER_RUST), CONFIG_UNWIND_USER_RUST_KUNIT_TEST))]
    pub const fn empty() -> Self {
        const EMPTY: MemoSlot = MemoSlot {
            key: 0,
            row: PackedRow {
                start: 0,
                cfa: 0,
                ra: 0,
                fp: 0,
                bx: 0,
                kind: 0,
                aux: 0,
                fast: 0,
            },
        };
        PcMemo {
            sets: [[EMPTY; MEMO_WAYS]; MEMO_SETS],
        }
    }

    /// The key of `pc` for a walk of word size `ws` (rows are compiled for
    /// one word size), never 0 and below [`END`]; `None` for a pc too
    /// large to have one (then it is not memoised).
    #[inline]
    fn key(pc: u64, ws: WordSize) -> Option<u64> {
        (pc >> 60 == 0).then(|| ((pc << 1) | u64::from(ws == WordSize::W4)) + 1)
    }

    /// The index of the set of `key`.
    #[inline(always)]
    fn index(key: u64) -> usize {
        // Fibonacci hashing: the top bits of the product.
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - MEMO_SETS.trailing_zeros())) as usize
    }

    /// The set of `key`.
    #[inline(always)]
    fn set(&self, key: u64) -> Option<&[MemoSlot; MEMO_WAYS]> {
        self.sets.get(Self::index(key))
    }

    /// The slot whose key is `want` (flags included), if any.
    #[inline(always)]
    fn find(&self, key: u64, want: u64) -> Option<&MemoSlot> {
        self.set(key)?.iter().find(|s| s.key == want)
    }

    /// The row memoised for `pc`, if any.
    #[inline]
    pub fn get(&self, pc: u64, ws: WordSize) -> Option<Found> {
        let key = Self::key(pc, ws)?;
        let s = self
            .set(key)?
            .iter()
            .find(|s| s.key & !(NOT_USUAL | END) == key)?;
        Some((
            PackedRow {
                fast: s.row.fast & !MEMO_BITS,
                ..s.row
            },
            s.row.fast & MEMO_SIGNAL != 0,
        ))
    }

    /// The usual rules ([`PackedRow::usual`]) memoised for `pc`, if its
    /// row is a usual one and not a signal frame's: what a walk's run of
    /// usual frames steps by without asking for the whole row.  One
    /// compare a way: only such a row's slot has the plain key.
    #[inline(always)]
    pub fn usual(&self, pc: u64, ws: WordSize) -> Option<Usual> {
        let key = Self::key(pc, ws)?;
        let s = self.find(key, key)?;
        Some(s.row.usual_rules(s.row.fast & MEMO_PAIR != 0))
    }

    /// The CFA rule memoised for `pc` ([`PackedRow::end`]) if its row is
    /// the end of the stack's and not a signal frame's: where a run of
    /// usual frames ends without asking for the whole row.
    #[inline]
    pub fn end(&self, pc: u64, ws: WordSize) -> Option<(bool, u32)> {
        let key = Self::key(pc, ws)?;
        self.find(key, key | END)?.row.end()
    }

    /// The row memoised for `pc` if it is a DRAP row
    /// ([`PackedRow::is_drap`]) and not a signal frame's: the other row a
    /// walk's run of memoised frames steps by.
    #[inline]
    pub fn drap(&self, pc: u64, ws: WordSize) -> Option<PackedRow> {
        let key = Self::key(pc, ws)?;
        let s = self.find(key, key | DRAP)?;
        Some(PackedRow {
            fast: s.row.fast & !MEMO_BITS,
            ..s.row
        })
    }

    /// Remember `found` for `pc`, in the way that holds `pc` if one does,
    /// else in the first, whose row moves to the second (the older of the
    /// two is forgotten).
    #[inline]
    pub fn put(&mut self, pc: u64, ws: WordSize, found: Found) {
        let Some(key) = Self::key(pc, ws) else {
            return;
        };
        let (row, signal) = found;
        let usual = row.fast & FAST_USUAL != 0;
        let fast = (row.fast & !MEMO_BITS)
            | if signal { MEMO_SIGNAL } else { 0 }
            | if usual && row.is_pair(ws) {
                MEMO_PAIR
            } else {
                0
            };
        let flags = if signal {
            NOT_USUAL
        } else if usual {
            0
        } else if row.end().is_some() {
            END
        } else if row.is_drap() {
            DRAP
        } else {
            NOT_USUAL
        };
        let slot = MemoSlot {
            key: key | flags,
            row: PackedRow { fast, ..row },
        };
        let Some([first, second]) = self.sets.get_mut(Self::index(key)) else {
            return;
        };
        if second.key & !(NOT_USUAL | END) == key {
            *second = slot;
        } else {
            if first.key & !(NOT_USUAL | END) != key {
                *second = *first;
            }
            *first = slot;
        }
    }

    /// Forget everything (an object or rows were dropped).
    pub fn clear(&mut self) {
        for s in self.sets.iter_mut().flatten() {
            s.key = 0;
        }
    }
}

/// What [`ObjectRows::fill`] remembers for a pc.
enum FdeOrNone {
    /// The FDE that covers it, to compile (the scratch's:
    /// [`cfi::read_fde_into`]), and the pcs the hdr search finds it for
    /// ([`cfi::search_range`]).
    Fde((u64, u64)),
    /// No usable FDE: the pc is refused for this reason.
    None(u64, Refusal),
}

/// The most rows made in an object's store before an FDE is compiled, for
/// the compilation to put its rows in ([`Collect`]).  The room is as many
/// rows as the FDE can have ([`rows_bound`]: a row after the first takes
/// an instruction byte at least), up to this: so the room grows the
/// store at most that much sooner than pushing the rows would have, and
/// only where the FDE's instructions say it may need it.  An FDE with more
/// rows is compiled again with room made for the rest
/// ([`ObjectRows::compile`]): i386 libc and libm have a few FDEs of 446
/// and 505 rows.
pub const ROW_ROOM_MAX: usize = 128;

/// The most rows an FDE can compile to: one for its CIE's initial
/// instructions, one more for each byte of instructions (CIE's and
/// FDE's: a new row needs an advance of the location, an instruction of
/// a byte at least).  Room for them is made before it is compiled
/// ([`ROW_ROOM_MAX`]); the bound is used to size that room only, never
/// trusted: a compilation with more rows goes on as any that passes its
/// room.
fn rows_bound(fde: &cfi::Fde) -> usize {
    let len = |(from, to): (u64, u64)| to.saturating_sub(from);
    let bytes = len(fde.cie_insns).saturating_add(len(fde.insns));
    usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(1)
}

/// Collects an FDE's rows into room made for them in the store before
/// the compilation: nothing under the interpreter allocates (nor reaches
/// an allocation's failure paths).  Rows past the room are counted, not
/// kept; a second compilation, whose first `skip` rows the first one
/// kept, keeps them.
struct Collect<'a> {
    room: &'a mut [PackedRow],
    /// Rows put in `room`.
    kept: usize,
    /// The FDE's rows so far (the same ones each time it is compiled).
    count: usize,
    /// Rows an earlier compilation of the FDE kept.
    skip: usize,
    /// The previous row (of this FDE).
    prev: Option<PackedRow>,
    begin: u64,
    ws: WordSize,
}

impl cfi::RowSink for Collect<'_> {
    fn row(&mut self, loc: u64, row: Result<&Row, Refusal>) -> Result<(), Refusal> {
        let start = loc
            .checked_sub(self.begin)
            .and_then(|off| u32::try_from(off).ok())
            .ok_or(Refusal::Bound(Bound::Memory))?;
        let packed = PackedRow::pack_ref(start, row, cfi::Arch::of(self.ws));
        // Rows whose rules are the same as the previous one's add nothing.
        if let Some(prev) = self.prev {
            if (PackedRow { start, ..prev }) == packed {
                return Ok(());
            }
        }
        if self.count >= MAX_FDE_ROWS {
            return Err(Refusal::Bound(Bound::Memory));
        }
        self.prev = Some(packed);
        if self.count >= self.skip {
            if let Some(slot) = self.room.get_mut(self.kept) {
                *slot = packed;
                self.kept += 1;
            }
        }
        self.count += 1;
        Ok(())
    }
}

/// The last item of `items` moved to `at`, the ones from `at` on one up
/// (`rotate_right(1)` of `items[at..]`, without its panicking assertion:
/// its frames would be the deepest under a compilation or a lookup).
pub fn shift_up<T>(items: &mut [T], at: usize) {
    for k in (at.saturating_add(1)..items.len()).rev() {
        if let Some((low, high)) = items.split_at_mut_checked(k) {
            if let (Some(a), Some(b)) = (low.last_mut(), high.first_mut()) {
                core::mem::swap(a, b);
            }
        }
    }
}

/// The items `keep` says yes to moved to the start of `items`, in their
/// order; how many (the caller cuts the rest, the others, off).  As
/// `Vec::retain`, without its panicking index: its panic's frames would be
/// the deepest under an object's lookup.
pub fn keep_first<T>(items: &mut [T], mut keep: impl FnMut(&T) -> bool) -> usize {
    let mut kept = 0;
    for i in 0..items.len() {
        let Some((done, rest)) = items.split_at_mut_checked(i) else {
            break;
        };
        let Some(item) = rest.first_mut() else {
            break;
        };
        if !keep(item) {
            continue;
        }
        if let Some(slot) = done.get_mut(kept) {
            core::mem::swap(slot, item);
        }
        // Below `items.len()`: no overflow (and no panic's frames).
        kept = kept.wrapping_add(1);
    }
    kept
}

/// The items from `from` on moved to the start of `items` (the first
/// `items.len() - from` of `rotate_left(from)`; the rest is left as it
/// is, for the caller to cut).
fn shift_down<T: Copy>(items: &mut [T], from: usize) {
    for k in 0..items.len().saturating_sub(from) {
        if let Some(&item) = items.get(k + from) {
            if let Some(slot) = items.get_mut(k) {
                *slot = item;
            }
        }
    }
}

impl<F: Store<FdeEntry>, R: Store<PackedRow>, P: Store<cfi::Probe>> ObjectRows<F, R, P> {
    /// The compiled row for `pc`, if its FDE (or its absence) has been
    /// compiled.
    #[inline]
    pub fn lookup(&self, pc: u64) -> Option<Found> {
        let fdes = self.fdes.items();
        let i = fdes.partition_point(|f| f.begin <= pc).checked_sub(1)?;
        let f = fdes.get(i)?;
        if pc >= f.end {
            return None;
        }
        let first = f.first as usize;
        let rows = self
            .rows
            .items()
            .get(first..first.checked_add(f.count as usize)?)?;
        // `pc - begin` fits: an FDE is compiled only if its range does.
        let off = (pc - f.begin) as u32;
        let j = rows.partition_point(|r| r.start <= off).checked_sub(1)?;
        Some((*rows.get(j)?, f.signal))
    }

    /// Compile the FDE of `pc` by the object's `.eh_frame_hdr` `hdr` and
    /// remember it; its row for `pc`.  A pc no FDE covers is remembered as
    /// refused.  A [`cfi::transient`] refusal is returned and nothing is
    /// remembered.  The interpreter's state is kept in `scratch` (see
    /// [`cfi::compile`]).
    #[inline(always)]
    pub fn fill<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        hdr: &Hdr,
        ws: WordSize,
        pc: u64,
        scratch: &mut cfi::Scratch,
    ) -> Result<Found, Refusal> {
        self.compile_pc(r, hdr, ws, pc, scratch)?;
        self.lookup(pc).ok_or(Refusal::Bound(Bound::Memory))
    }

    /// [`ObjectRows::fill`] without the lookup: the FDE of `pc` (or its
    /// absence) compiled and inserted, for a caller that looks the row up
    /// in a frame of its own (the kernel's: not on the compilation's).
    #[inline(always)]
    pub fn compile_pc<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        hdr: &Hdr,
        ws: WordSize,
        pc: u64,
        scratch: &mut cfi::Scratch,
    ) -> Result<(), Refusal> {
        let mut what = FdeOrNone::None(pc, Refusal::NoFde);
        self.find(r, hdr, ws, pc, scratch, &mut what)?;
        self.insert(r, &what, ws, scratch)
    }

    /// The FDE of `pc`, read into `scratch`, or why there is none, into
    /// `what` (the caller's: one copy of it in the caller's frame, not a
    /// result and its unwrapped copy); `Err` for a [`cfi::transient`]
    /// refusal.  Inlined, as [`ObjectRows::insert`]: the kernel's
    /// `TaskTables::fill_shared` and `fill_own` are then the one frame
    /// over the search, the FDE's read and the compilation, which are out
    /// of line under it (docs/design.md, "Stack use").
    #[inline(always)]
    fn find<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        hdr: &Hdr,
        ws: WordSize,
        pc: u64,
        scratch: &mut cfi::Scratch,
        what: &mut FdeOrNone,
    ) -> Result<(), Refusal> {
        if self.probes.items().is_empty()
            && hdr.count > cfi::PROBE_SLOTS as u64
            && self.probes.reserve(cfi::PROBE_SLOTS)
        {
            for _ in 0..cfi::PROBE_SLOTS {
                if !self.probes.push(cfi::Probe::default()) {
                    // No memo: each search reads all its probes.
                    self.probes.truncate(0);
                    break;
                }
            }
        }
        // The FDE is read into the scratch: not on this frame.
        let fde =
            cfi::search_range(r, hdr, ws, pc, self.probes.items_mut()).and_then(|(at, found)| {
                cfi::read_fde_into(r, hdr.eh_frame, at, ws, scratch).map(|()| found)
            });
        *what = match fde {
            Ok(found) if scratch.fde().pc_begin <= pc && pc < scratch.fde().pc_end => {
                FdeOrNone::Fde(found)
            }
            // Remembered as a one-pc range.
            Ok(_) => FdeOrNone::None(pc, Refusal::NoFde),
            Err(e) if cfi::transient(e) => return Err(e),
            Err(e) => FdeOrNone::None(pc, e),
        };
        Ok(())
    }

    /// Compile `fde` (or remember a pc as refused) and insert it.
    /// Inlined, as [`ObjectRows::find`].
    #[inline(always)]
    fn insert<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        fde: &FdeOrNone,
        ws: WordSize,
        scratch: &mut cfi::Scratch,
    ) -> Result<(), Refusal> {
        let first = self.rows.items().len();
        let first32 = u32::try_from(first).map_err(|_| Refusal::Bound(Bound::Memory))?;
        let (begin, end, signal) = match fde {
            FdeOrNone::Fde((from, to)) => {
                let f = scratch.fde();
                if f.pc_end.wrapping_sub(f.pc_begin) > u64::from(u32::MAX) {
                    return Err(Refusal::Bound(Bound::Memory));
                }
                if let Err(e) = self.compile(r, ws, scratch) {
                    self.rows.truncate(first);
                    return Err(e);
                }
                // The FDE's fields read again after the compilation (which
                // does not change them), not kept over it.
                let f = scratch.fde();
                let (pc_begin, pc_end, signal) = (f.pc_begin, f.pc_end, f.signal_frame);
                // Only the pcs the hdr search finds this FDE for (all of
                // them, unless FDEs overlap in the table): the others may
                // be another FDE's.  The range holds the pc filled.
                let begin = pc_begin.max(*from);
                let end = pc_end.min(*to);
                // Fits: `begin` is in the FDE, whose range does.
                let skip = (begin - pc_begin) as u32;
                self.clamp(first, skip, end.saturating_sub(begin));
                (begin, end, signal)
            }
            FdeOrNone::None(pc, refusal) => {
                // The last pc has no one-pc range: not remembered.
                let end = pc.checked_add(1).ok_or(*refusal)?;
                if !self.rows.push(PackedRow::refused(0, refusal.cause())) {
                    return Err(Refusal::Bound(Bound::Memory));
                }
                (*pc, end, false)
            }
        };
        let count = self.rows.items().len() - first;
        if count == 0 {
            // An FDE with no pc: remember the pc as not covered.
            return Err(Refusal::NoFde);
        }
        let entry = FdeEntry {
            begin,
            end,
            first: first32,
            count: count as u32,
            signal,
        };
        if !self.fdes.push(entry) {
            self.rows.truncate(first);
            return Err(Refusal::Bound(Bound::Memory));
        }
        // Sorted insertion: the new entry moves down to its place.
        let fdes = self.fdes.items_mut();
        let before = fdes.len().saturating_sub(1);
        let at = fdes
            .get(..before)
            .map_or(0, |old| old.partition_point(|f| f.begin <= begin));
        shift_up(fdes, at);
        Ok(())
    }

    /// Compile the FDE read into `scratch` (whose first pc is `begin`),
    /// its rows appended to the store: in room made before the
    /// compilation ([`ROW_ROOM_MAX`]; [`Collect`]), and where the FDE has
    /// more rows, compiled again (its instructions read again) with room
    /// made for the rest.  On `Err` the caller drops what was appended.
    #[inline(always)]
    fn compile<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        ws: WordSize,
        scratch: &mut cfi::Scratch,
    ) -> Result<(), Refusal> {
        let begin = scratch.fde().pc_begin;
        let first = self.rows.items().len();
        let (mut kept, mut room) = (0, rows_bound(scratch.fde()).min(ROW_ROOM_MAX));
        // Twice at most: the second compilation has room for every row
        // the first counted.
        for _ in 0..2 {
            let at = first + kept;
            if !self.rows.extend(room, PackedRow::default()) {
                return Err(Refusal::Bound(Bound::Memory));
            }
            let mut sink = Collect {
                room: self.rows.items_mut().get_mut(at..).unwrap_or_default(),
                kept: 0,
                count: 0,
                skip: kept,
                prev: None,
                begin,
                ws,
            };
            let res = cfi::compile_read(r, ws, &mut sink, scratch);
            let (count, now) = (sink.count, sink.kept);
            self.rows.truncate(at + now);
            res?;
            kept += now;
            if kept == count {
                return Ok(());
            }
            room = count.saturating_sub(kept);
        }
        // The second compilation read rows the first did not (the
        // FDE's bytes changed under it): not remembered.
        Err(Refusal::Bound(Bound::Memory))
    }

    /// Keep of the rows from `first` on (one FDE's) those for the `len`
    /// pcs from offset `skip` on, their starts from there.
    fn clamp(&mut self, first: usize, skip: u32, len: u64) {
        if skip == 0
            && self
                .rows
                .items()
                .last()
                .is_none_or(|r| u64::from(r.start) < len)
        {
            return;
        }
        let Some(rows) = self.rows.items_mut().get_mut(first..) else {
            return;
        };
        // The row in effect at `skip` becomes the first.
        let from = rows.partition_point(|r| r.start <= skip).saturating_sub(1);
        let kept = rows.len() - from;
        shift_down(rows, from);
        let kept = rows.get_mut(..kept).unwrap_or_default();
        for r in kept.iter_mut() {
            r.start = r.start.saturating_sub(skip);
        }
        let n = kept.partition_point(|r| u64::from(r.start) < len);
        self.rows.truncate(first + n);
    }

    /// Bytes of the three stores' items.
    pub fn bytes(&self) -> usize {
        core::mem::size_of_val(self.fdes.items())
            + core::mem::size_of_val(self.rows.items())
            + core::mem::size_of_val(self.probes.items())
    }
}
