// SPDX-License-Identifier: GPL-2.0

//! One unwind step by a user object's DWARF call-frame information: its
//! `.eh_frame_hdr` search table, its `.eh_frame` CIEs and FDEs, and their
//! call-frame instructions, read from *untrusted* user memory.
//!
//! Nothing here knows about the kernel: the caller supplies a fault-tolerant
//! reader of user bytes ([`UserBytes`]), the address of the object's
//! `.eh_frame_hdr` (its `PT_GNU_EH_FRAME` program header, relocated), the
//! word size, and the current frame ([`Frame`]: ip, sp, and fp if known).
//! [`step`] gives back the caller's frame, the end of the stack (the return
//! address column is explicitly undefined, as in `_start`), or a
//! [`Refusal`] that says why the tables could not be used, so that the
//! caller can fall back to a frame-pointer step and count refusals by
//! [`Cause`].
//!
//! Hostile tables are expected.  The code uses `core` only, allocates
//! nothing, never panics (no indexing that can fail, no unchecked
//! arithmetic), and all work is bounded:
//!
//! - at most [`MAX_READS`] reads of user memory per step (each read at most
//!   [`WINDOW`] bytes and never across a 4 KiB page boundary);
//! - at most [`MAX_PROBES`] probes of the binary search of the hdr table;
//! - CIEs and FDEs at most [`MAX_ENTRY_LEN`] bytes long;
//! - at most [`MAX_OPS`] call-frame instructions (CIE and FDE together);
//! - a `DW_CFA_remember_state` stack at most [`MAX_STATE_DEPTH`] deep;
//! - augmentation strings at most [`MAX_AUGMENTATION`] bytes, LEB128
//!   numbers at most 10 bytes, expressions looked at at most
//!   [`MAX_EXPRESSION`] bytes (longer ones are skipped, not evaluated).
//!
//! Exceeding a bound is a refusal ([`Refusal::Bound`]).
//!
//! Supported: `.eh_frame_hdr` version 1 with a sorted table of fixed-size
//! entries; pointer encodings `absptr`, `udata2/4/8`, `sdata2/4/8`,
//! `uleb128`/`sleb128` (not for the table, whose entries must have a fixed
//! size), applied as absolute, `pcrel` or (in the hdr only) `datarel`
//! (relative to the hdr); `omit` where legal.  `indirect`, `textrel`,
//! `funcrel` and `aligned` are refused.  CIEs of version 1, 3 and 4 with
//! 32- or 64-bit lengths, augmentations `z`, `R`, `P` (personality
//! skipped), `L`, `S` (signal frame); others (for example GCC 2's `eh`)
//! are refused.  x86-64 and i386 register numbering ([`Arch`]).
//!
//! The interpreter tracks three columns, the CFA, the return address and
//! the frame pointer; the rules of other registers are parsed and ignored.
//! Expressions are not evaluated; fixed forms are recognised: the PLT's
//! CFA ([`PltCfa`]); GCC's stack-realigning (DRAP) frame, whose CFA is the
//! word at the frame pointer + offset ([`Cfa::DerefFp`]) and whose frame
//! pointer is saved at the frame pointer + offset ([`Rule::AtFp`]); and a
//! signal frame's (glibc's `__restore_rt`, the i386 vDSO's sigreturn),
//! whose CFA is the interrupted stack pointer saved at the stack pointer +
//! offset ([`Cfa::DerefSp`]) and whose return address and frame pointer
//! are saved at the stack pointer + offset ([`Rule::AtSp`]).  See
//! [`Row::check`] and [`apply`] for what a step can use.
//!
//! Using it in a walk: give the first frame `ip_is_return_address: false`
//! and feed each [`Step::Caller`] back as the next frame.  Its `sp` is the
//! CFA, strictly above the previous `sp`, so a walk by tables always ends;
//! its `ip` is whatever the stack held, and the caller must check that it
//! is a user address.  After a refusal the caller may take a frame-pointer
//! step, but only if `fp` is known.  Addresses are linear: a compat task
//! with non-zero segment bases needs them added first (or no table use).
//! [`read_hdr`], [`search`], [`read_fde`], [`row_at`] and [`apply`] are the
//! pieces of [`step_with`], for a caller that caches a parsed [`Hdr`] per
//! object; [`Refusal::cause`] indexes counters ([`Cause::NAMES`]).

use super::word::WordSize;

/// Bytes fetched at most per read: the interpreter's window over a CIE's
/// or an FDE's instructions (in its [`Scratch`], off the stack).
pub const WINDOW: usize = 128;

/// The window of [`read_hdr`]: the hdr's fields (at most 24 bytes).
const HDR_WINDOW: usize = 24;
/// The window of a search's probe: one table entry (at most 16 bytes).
const ENTRY_WINDOW: usize = 16;
/// The window of [`read_fde`]'s FDE and CIE fields (not their
/// instructions, which the interpreter reads): an FDE's are at most 34
/// bytes after its length (LEB128 pointers), a usual CIE's about 30 (a
/// CIE with more augmentation data takes another read: only budget).
const ENTRY_FIELDS_WINDOW: usize = 64;
/// Reads of user memory per [`step`].
pub const MAX_READS: u32 = 256;
/// Probes of the binary search in the hdr table (enough for 2^64 entries).
pub const MAX_PROBES: u32 = 64;
/// Length of a CIE or an FDE, in bytes, without its length field.
pub const MAX_ENTRY_LEN: u64 = 64 * 1024;
/// Call-frame instructions interpreted per step (CIE and FDE together).
pub const MAX_OPS: u32 = 1024;
/// Depth of the `DW_CFA_remember_state` stack.
pub const MAX_STATE_DEPTH: usize = 16;
/// Length of a CIE's augmentation string (without its NUL).
pub const MAX_AUGMENTATION: usize = 8;
/// Length of a DWARF expression that is looked at (the PLT pattern).
pub const MAX_EXPRESSION: usize = 16;

/// Reads bytes of user memory.  Every read may fail.
pub trait UserBytes {
    /// Fill `buf` from linear address `addr`; `None` if any byte cannot be
    /// read (unmapped, not a user address, would fault).
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()>;
}

/// A frame of the walk, as the caller knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer (for every frame but the first: the previous CFA).
    pub sp: u64,
    /// Frame pointer, `None` if not known (a table step found it
    /// undefined): a frame-pointer step must not be tried from this frame.
    pub fp: Option<u64>,
    /// `ip` is a return address (the instruction after a call), so the
    /// rules of `ip - 1` apply.  False for the interrupted frame and for
    /// the frame a signal frame returns to.
    pub ip_is_return_address: bool,
    /// `%rbx` (`%ebx`): a CFA may be based on it.
    pub bx: Saved,
}

/// Where a callee-saved register's value is, as a walk knows it: it is
/// read only when a CFA needs it, so tracking it costs no read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saved {
    /// Not known (a rule the walk cannot follow, or a frame-pointer step).
    Unknown,
    /// This value.
    Value(u64),
    /// Saved in the stack at this address.
    At(u64),
}

impl Saved {
    /// The value: read from the stack if it is saved there.
    fn value<M: UserBytes>(self, r: &mut Reader<'_, M>, ws: WordSize) -> Res<Option<u64>> {
        Ok(match self {
            Saved::Unknown => None,
            Saved::Value(v) => Some(v),
            Saved::At(a) => Some(r.word(a, ws, Where::Stack)?),
        })
    }

    /// The caller's, by `rule` (the callee's rule for the register), the
    /// callee's stack pointer `sp` and CFA `cfa`.
    #[inline]
    pub fn caller(self, rule: Rule, sp: u64, cfa: u64, bx: u64, ws: WordSize) -> Saved {
        let at = |base: u64, off: i32| base.checked_add_signed(i64::from(off));
        match rule {
            Rule::Unmentioned | Rule::SameValue => self,
            Rule::Register(r) if u64::from(r) == bx => self,
            Rule::Offset(off) => at(cfa, off).map_or(Saved::Unknown, Saved::At),
            Rule::AtSp(off) => at(sp, off).map_or(Saved::Unknown, Saved::At),
            Rule::ValOffset(off) => {
                at(cfa, off).map_or(Saved::Unknown, |v| Saved::Value(ws.wrap(v)))
            }
            _ => Saved::Unknown,
        }
    }
}

/// What a step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The caller's frame: `sp` is the CFA of the current frame.
    Caller(Frame),
    /// The return address is undefined: the outermost frame (`_start`,
    /// `clone`'s child, ...).  Not an error.
    EndOfStack,
}

/// Which table a malformation or a fault is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// The `.eh_frame_hdr` header.
    Hdr,
    /// The hdr's search table.
    Table,
    /// A CIE.
    Cie,
    /// An FDE.
    Fde,
    /// Call-frame instructions.
    Instructions,
    /// The stack (return address or saved frame pointer).
    Stack,
}

/// Which bound was exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// [`MAX_READS`], or the reads left of a walk's budget.
    Reads,
    /// Memory for compiled rows could not be had, or an FDE is too large
    /// to compile ([`super::rows`]).
    Memory,
    /// [`MAX_PROBES`].
    Probes,
    /// [`MAX_ENTRY_LEN`].
    EntryLength,
    /// [`MAX_OPS`].
    Instructions,
    /// [`MAX_STATE_DEPTH`].
    StateDepth,
    /// [`MAX_AUGMENTATION`].
    Augmentation,
}

/// A column the step needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// The return address.
    Ra,
    /// The frame pointer.
    Fp,
}

/// A rule the step cannot use (see [`Rule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// No rule was given (for the return address).
    Unmentioned,
    /// `DW_CFA_same_value` (for the return address).
    SameValue,
    /// `DW_CFA_val_offset` (for the return address).
    ValOffset,
    /// `DW_CFA_register` naming another register.
    Register,
    /// `DW_CFA_expression`.
    Expression,
    /// `DW_CFA_val_expression`.
    ValExpression,
}

/// Why the tables were not used for a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The hdr has no search table (`fde_count` or `eh_frame_ptr` omitted),
    /// or a version other than 1.
    NoTable,
    /// No FDE covers the pc.
    NoFde,
    /// A read of user memory failed.
    Fault(Where),
    /// A table is malformed or truncated.
    Malformed(Where),
    /// A pointer encoding that is not supported (the encoding byte).
    UnsupportedEncoding(Where, u8),
    /// A CIE augmentation that is not supported (the letter), or a CIE
    /// version other than 1, 3 and 4 (then the version).
    UnsupportedAugmentation(u8),
    /// A call-frame instruction that is not supported (the opcode; for
    /// `DW_CFA_GNU_window_save` and unknown ones).
    UnsupportedOpcode(u8),
    /// The CIE's return-address register is not the arch's.
    UnsupportedRaColumn,
    /// The rule of a column cannot be used.
    UnsupportedRule(Column, RuleKind),
    /// The CFA is based on a register other than the stack or frame
    /// pointer (the deferred walker knows no other register).
    UnsupportedCfaRegister,
    /// The CFA is an expression other than the PLT pattern.
    CfaExpression,
    /// The CFA is based on the frame pointer, which is not known.
    FpUnknown,
    /// The CFA is not strictly above the stack pointer (or overflows).
    CfaNotAbove,
    /// The CFA is not aligned to the word size (upstream's frame step,
    /// `unwind_user_next_common()`, refuses such a CFA too).
    CfaUnaligned,
    /// A bound was exceeded.
    Bound(Bound),
}

/// The cause of a refusal, without details: an index for counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cause {
    /// [`Refusal::NoTable`].
    NoTable,
    /// [`Refusal::NoFde`].
    NoFde,
    /// [`Refusal::Fault`].
    Fault,
    /// [`Refusal::Malformed`].
    Malformed,
    /// [`Refusal::UnsupportedEncoding`].
    Encoding,
    /// [`Refusal::UnsupportedAugmentation`].
    Augmentation,
    /// [`Refusal::UnsupportedOpcode`].
    Opcode,
    /// [`Refusal::UnsupportedRaColumn`].
    RaColumn,
    /// [`Refusal::UnsupportedRule`] of the return address.
    RaRule,
    /// [`Refusal::UnsupportedRule`] of the frame pointer.
    FpRule,
    /// [`Refusal::UnsupportedCfaRegister`].
    CfaRegister,
    /// [`Refusal::CfaExpression`].
    CfaExpression,
    /// [`Refusal::FpUnknown`].
    FpUnknown,
    /// [`Refusal::CfaNotAbove`].
    CfaNotAbove,
    /// [`Refusal::CfaUnaligned`].
    CfaUnaligned,
    /// [`Refusal::Bound`].
    Bound,
}

impl Cause {
    /// Number of causes: the size of a counter array indexed by
    /// `cause as usize`.
    pub const COUNT: usize = 16;
    /// The causes, indexed by `cause as usize`.
    pub const ALL: [Cause; Cause::COUNT] = [
        Cause::NoTable,
        Cause::NoFde,
        Cause::Fault,
        Cause::Malformed,
        Cause::Encoding,
        Cause::Augmentation,
        Cause::Opcode,
        Cause::RaColumn,
        Cause::RaRule,
        Cause::FpRule,
        Cause::CfaRegister,
        Cause::CfaExpression,
        Cause::FpUnknown,
        Cause::CfaNotAbove,
        Cause::CfaUnaligned,
        Cause::Bound,
    ];
    /// Names, indexed by `cause as usize`.
    pub const NAMES: [&'static str; Cause::COUNT] = [
        "no_table",
        "no_fde",
        "fault",
        "malformed",
        "encoding",
        "augmentation",
        "opcode",
        "ra_column",
        "ra_rule",
        "fp_rule",
        "cfa_register",
        "cfa_expression",
        "fp_unknown",
        "cfa_not_above",
        "cfa_unaligned",
        "bound",
    ];

    /// This cause's name.
    pub fn name(self) -> &'static str {
        Cause::NAMES.get(self as usize).copied().unwrap_or("?")
    }
}

impl Refusal {
    /// The cause, for counting.
    pub fn cause(self) -> Cause {
        match self {
            Refusal::NoTable => Cause::NoTable,
            Refusal::NoFde => Cause::NoFde,
            Refusal::Fault(_) => Cause::Fault,
            Refusal::Malformed(_) => Cause::Malformed,
            Refusal::UnsupportedEncoding(..) => Cause::Encoding,
            Refusal::UnsupportedAugmentation(_) => Cause::Augmentation,
            Refusal::UnsupportedOpcode(_) => Cause::Opcode,
            Refusal::UnsupportedRaColumn => Cause::RaColumn,
            Refusal::UnsupportedRule(Column::Ra, _) => Cause::RaRule,
            Refusal::UnsupportedRule(Column::Fp, _) => Cause::FpRule,
            Refusal::UnsupportedCfaRegister => Cause::CfaRegister,
            Refusal::CfaExpression => Cause::CfaExpression,
            Refusal::FpUnknown => Cause::FpUnknown,
            Refusal::CfaNotAbove => Cause::CfaNotAbove,
            Refusal::CfaUnaligned => Cause::CfaUnaligned,
            Refusal::Bound(_) => Cause::Bound,
        }
    }
}

type Res<T> = Result<T, Refusal>;

/// The DWARF register numbers of an arch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    /// The stack pointer.
    pub sp: u64,
    /// The frame pointer.
    pub fp: u64,
    /// The return-address column.
    pub ra: u64,
    /// The callee-saved register a CFA may also be based on: `%rbx`
    /// (`%ebx`), 3 (ld.so's lazy-binding trampoline has CFA = rbx + 32).
    pub bx: u64,
}

impl Arch {
    /// x86-64: `%rsp` 7, `%rbp` 6, return address 16.
    pub const X86_64: Arch = Arch {
        sp: 7,
        fp: 6,
        ra: 16,
        bx: 3,
    };
    /// i386: `%esp` 4, `%ebp` 5, return address 8.
    pub const I386: Arch = Arch {
        sp: 4,
        fp: 5,
        ra: 8,
        bx: 3,
    };

    /// The arch of a task of word size `ws` (x86).
    pub const fn of(ws: WordSize) -> Arch {
        match ws {
            WordSize::W8 => Arch::X86_64,
            WordSize::W4 => Arch::I386,
        }
    }
}

/// User memory with a limit on the number of reads.
pub struct Reader<'a, M: UserBytes> {
    mem: &'a mut M,
    reads: u32,
    limit: u32,
}

impl<'a, M: UserBytes> Reader<'a, M> {
    /// A reader that may do [`MAX_READS`] reads (one step's bound).
    pub fn new(mem: &'a mut M) -> Self {
        Self::with_limit(mem, MAX_READS)
    }

    /// A reader that may do `limit` reads: a walk gives each step, each
    /// compilation of an FDE and each object lookup what is left of its
    /// budget, and charges what [`Reader::reads`] says was used.
    pub fn with_limit(mem: &'a mut M, limit: u32) -> Self {
        Reader {
            mem,
            reads: 0,
            limit,
        }
    }

    /// A reader that may do `limit` reads in all, of which `reads` are
    /// done (a walk's reader made again where the walk goes on).
    pub fn with_reads(mem: &'a mut M, limit: u32, reads: u32) -> Self {
        Reader {
            mem,
            reads: reads.min(limit),
            limit,
        }
    }

    /// Reads done so far.
    pub fn reads(&self) -> u32 {
        self.reads
    }

    /// Whether the limit is reached.
    #[inline]
    pub fn exhausted(&self) -> bool {
        self.reads >= self.limit
    }

    /// Reads left before the limit.
    #[inline]
    pub fn left(&self) -> u32 {
        self.limit.saturating_sub(self.reads)
    }

    /// The memory read, for a reader of another shape (an object lookup
    /// that reads ELF headers) sharing the budget.
    pub fn mem(&mut self) -> &mut M {
        self.mem
    }

    /// Charge `n` reads done through [`Reader::mem`]; `false` (and the
    /// limit reached) if that is more than what was left.
    pub fn charge(&mut self, n: u32) -> bool {
        self.reads = self.reads.saturating_add(n);
        if self.reads > self.limit {
            self.reads = self.limit;
            return false;
        }
        true
    }

    #[inline]
    fn read(&mut self, addr: u64, buf: &mut [u8], at: Where) -> Res<()> {
        if self.reads >= self.limit {
            return Err(Refusal::Bound(Bound::Reads));
        }
        self.reads = self.reads.saturating_add(1);
        self.mem.read_bytes(addr, buf).ok_or(Refusal::Fault(at))
    }

    /// Read a little-endian word at `addr`.
    fn word(&mut self, addr: u64, ws: WordSize, at: Where) -> Res<u64> {
        let mut b = [0u8; 8];
        let n = ws.bytes() as usize;
        let buf = b.get_mut(..n).ok_or(Refusal::Malformed(at))?;
        self.read(addr, buf, at)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// A reader is itself user memory whose reads count against its limit
/// (for [`super::elf::locate`] sharing a walk's budget).
impl<M: UserBytes> UserBytes for Reader<'_, M> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        self.read(addr, buf, Where::Hdr).ok()
    }
}

/// A bounded region of user memory read front to back through a window,
/// the caller's: sized to what the reader reads (an hdr, a table entry)
/// on the stack, or in the [`Scratch`] (an FDE's and a CIE's fields).
/// The interpreter's instructions are read by [`Interp::feed`] into the
/// scratch's window and decoded from it ([`Insns`]).
struct Cursor<'w> {
    pos: u64,
    end: u64,
    at: Where,
    win: &'w mut [u8],
    win_addr: u64,
    win_len: usize,
    /// Bytes fetched at most per read (<= WINDOW).
    chunk: u64,
}

const PAGE: u64 = 4096;

impl<'w> Cursor<'w> {
    fn new(win: &'w mut [u8], pos: u64, end: u64, at: Where) -> Self {
        let chunk = win.len().min(WINDOW) as u64;
        Cursor {
            pos,
            end,
            at,
            win,
            win_addr: 0,
            win_len: 0,
            chunk,
        }
    }

    fn left(&self) -> u64 {
        self.end.saturating_sub(self.pos)
    }

    /// The next byte: the window's, inlined into the readers above it
    /// (`uint`, `read_format`, LEB128), with the
    /// refill out of line, so that a read is one frame over the refill,
    /// not three over the read (docs/design.md, "Stack use").
    #[inline]
    fn u8<M: UserBytes>(&mut self, r: &mut Reader<'_, M>) -> Res<u8> {
        if self.pos >= self.end {
            return Err(Refusal::Malformed(self.at));
        }
        let mut i = self.pos.wrapping_sub(self.win_addr);
        if self.pos < self.win_addr || i >= self.win_len as u64 {
            self.refill(r)?;
            i = 0;
        }
        let b = *self
            .win
            .get(i as usize)
            .ok_or(Refusal::Malformed(self.at))?;
        self.pos = self.pos.wrapping_add(1);
        Ok(b)
    }

    /// Fill the window from `pos`: up to WINDOW bytes, not past the
    /// region's end nor across a page boundary (the next page may be
    /// unmapped).
    #[inline(never)]
    #[cold]
    fn refill<M: UserBytes>(&mut self, r: &mut Reader<'_, M>) -> Res<()> {
        let to_page = PAGE - (self.pos & (PAGE - 1));
        let len = self.left().min(to_page).min(self.chunk) as usize;
        let buf = self.win.get_mut(..len).ok_or(Refusal::Malformed(self.at))?;
        // The window is set before the read, which is this frame's last
        // call (little kept over it): a cursor whose read failed is not
        // read from again (its parser returns the error).
        self.win_addr = self.pos;
        self.win_len = len;
        r.read(self.pos, buf, self.at)
    }

    /// `n` bytes little-endian (n <= 8).  Inlined: a frame of its own
    /// would be between the FDE's reader and its refill.
    #[inline(always)]
    fn uint<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, n: u32) -> Res<u64> {
        let mut v = 0u64;
        for k in 0..n.min(8) {
            // k < 8: the shift is exact (and no overflow check's panic).
            v |= u64::from(self.u8(r)?).wrapping_shl(8 * k);
        }
        Ok(v)
    }

    fn skip(&mut self, n: u64) -> Res<()> {
        if n > self.left() {
            return Err(Refusal::Malformed(self.at));
        }
        self.pos = self.pos.wrapping_add(n);
        Ok(())
    }
}

/// A LEB128 number of at most 10 bytes, from `next`: its bits, how many
/// bits it has, and its last byte; malformed at `at` if longer.
#[inline(always)]
fn leb(mut next: impl FnMut() -> Res<u8>, at: Where) -> Res<(u64, u32, u8)> {
    let mut v = 0u64;
    for k in 0..10u32 {
        let b = next()?;
        v |= u64::from(b & 0x7f).checked_shl(7 * k).unwrap_or(0);
        if b & 0x80 == 0 {
            return Ok((v, 7 * (k + 1), b));
        }
    }
    Err(Refusal::Malformed(at))
}

/// An unsigned LEB128 number ([`leb`]).
#[inline(always)]
fn uleb(next: impl FnMut() -> Res<u8>, at: Where) -> Res<u64> {
    leb(next, at).map(|(v, _, _)| v)
}

/// A signed LEB128 number ([`leb`], sign-extended).
#[inline(always)]
fn sleb(next: impl FnMut() -> Res<u8>, at: Where) -> Res<i64> {
    let (mut v, bits, last) = leb(next, at)?;
    if bits < 64 && last & 0x40 != 0 {
        v |= !0u64 << bits;
    }
    Ok(v as i64)
}

/// A region's bytes read front to back, for [`read_format`] and
/// [`read_encoded`]: a [`Cursor`] and its reader ([`Read`]), or the
/// interpreter's window ([`Insns`]).
trait Bytes {
    /// The next byte.
    fn u8(&mut self) -> Res<u8>;
    /// A LEB128 number.
    fn uleb(&mut self) -> Res<u64>;
    /// A signed LEB128 number.
    fn sleb(&mut self) -> Res<i64>;
    /// Where the next byte is.
    fn pos(&self) -> u64;
    /// What the region is, for a refusal.
    fn at(&self) -> Where;

    /// `n` bytes little-endian (n <= 8).
    #[inline]
    fn uint(&mut self, n: u32) -> Res<u64> {
        let mut v = 0u64;
        for k in 0..n.min(8) {
            v |= u64::from(self.u8()?).wrapping_shl(8 * k);
        }
        Ok(v)
    }
}

impl<B: Bytes> Bytes for &mut B {
    #[inline(always)]
    fn u8(&mut self) -> Res<u8> {
        (**self).u8()
    }
    #[inline(always)]
    fn uleb(&mut self) -> Res<u64> {
        (**self).uleb()
    }
    #[inline(always)]
    fn sleb(&mut self) -> Res<i64> {
        (**self).sleb()
    }
    #[inline(always)]
    fn pos(&self) -> u64 {
        (**self).pos()
    }
    #[inline(always)]
    fn at(&self) -> Where {
        (**self).at()
    }
}

/// A [`Cursor`] with the reader that refills it.
struct Read<'c, 'w, 'a, M: UserBytes>(&'c mut Cursor<'w>, &'c mut Reader<'a, M>);

// Its LEB128 numbers and fixed-size values are read here, inlined into
// the parser: an out-of-line reader's frame would be between the parser
// and the cursor's refill, on the deepest paths of an object's lookup
// and an FDE's read (docs/design.md, "Stack use").
impl<M: UserBytes> Bytes for Read<'_, '_, '_, M> {
    #[inline(always)]
    fn u8(&mut self) -> Res<u8> {
        self.0.u8(self.1)
    }
    #[inline(always)]
    fn uleb(&mut self) -> Res<u64> {
        let at = self.0.at;
        uleb(|| self.0.u8(self.1), at)
    }
    #[inline(always)]
    fn sleb(&mut self) -> Res<i64> {
        let at = self.0.at;
        sleb(|| self.0.u8(self.1), at)
    }
    #[inline(always)]
    fn uint(&mut self, n: u32) -> Res<u64> {
        self.0.uint(self.1, n)
    }
    #[inline]
    fn pos(&self) -> u64 {
        self.0.pos
    }
    #[inline]
    fn at(&self) -> Where {
        self.0.at
    }
}

/// The interpreter's window with its LEB128 numbers read here, inlined,
/// not by its out-of-line readers (which the decoder's 20 sites share):
/// `DW_CFA_set_loc`'s address, a leaf.
struct Bytewise<B: Bytes>(B);

impl<B: Bytes> Bytes for Bytewise<B> {
    #[inline(always)]
    fn u8(&mut self) -> Res<u8> {
        self.0.u8()
    }
    #[inline(always)]
    fn uleb(&mut self) -> Res<u64> {
        let at = self.0.at();
        uleb(|| self.0.u8(), at)
    }
    #[inline(always)]
    fn uint(&mut self, n: u32) -> Res<u64> {
        let mut v = 0u64;
        for k in 0..n.min(8) {
            v |= u64::from(self.0.u8()?).wrapping_shl(8 * k);
        }
        Ok(v)
    }
    #[inline(always)]
    fn sleb(&mut self) -> Res<i64> {
        let at = self.0.at();
        sleb(|| self.0.u8(), at)
    }
    #[inline]
    fn pos(&self) -> u64 {
        self.0.pos()
    }
    #[inline]
    fn at(&self) -> Where {
        self.0.at()
    }
}

/// The interpreter's instructions, `[pos, end)`, decoded from a window of
/// them only (`win`, the bytes from `base`), reading no memory: a byte
/// past the window is [`NEED`], for [`Interp::feed`] to read before it
/// decodes the instruction again.
struct Insns<'w> {
    win: &'w [u8],
    base: u64,
    pos: u64,
    end: u64,
}

/// What [`Insns`] returns for a byte past its window: the fault a reader
/// would return if it could not read it (transient, never remembered),
/// which no other part of the decoder returns.
const NEED: Refusal = Refusal::Fault(Where::Instructions);

impl<'w> Insns<'w> {
    fn left(&self) -> u64 {
        self.end.saturating_sub(self.pos)
    }

    /// The `n` bytes from `pos` (which must be in the region), if the
    /// window has them; else [`NEED`].
    #[inline]
    fn take(&mut self, n: u64) -> Res<&'w [u8]> {
        let from = self.pos.wrapping_sub(self.base);
        let win: &'w [u8] = self.win;
        let b = from
            .checked_add(n)
            .and_then(|to| win.get(from as usize..to as usize))
            .ok_or(NEED)?;
        self.pos = self.pos.wrapping_add(n);
        Ok(b)
    }

    fn skip(&mut self, n: u64) -> Res<()> {
        if n > self.left() {
            return Err(Refusal::Malformed(Where::Instructions));
        }
        self.pos = self.pos.wrapping_add(n);
        Ok(())
    }

    /// `DW_CFA_set_loc`'s address ([`read_encoded`], no `datarel`): out
    /// of line, a leaf (its LEB128 readers inlined), so that the
    /// decoder's frame has no room for it.
    #[inline(never)]
    fn encoded(&mut self, enc: u8, ws: WordSize) -> Res<u64> {
        read_encoded(&mut Bytewise(self), enc, ws, None)
    }

    /// The `len` bytes of a DWARF expression, to be recognised: where
    /// they are in the window (offset, length), `None` if longer than
    /// [`MAX_EXPRESSION`] (then skipped).
    fn expression(&mut self, len: u64) -> Res<Option<(usize, usize)>> {
        if len > MAX_EXPRESSION as u64 {
            self.skip(len)?;
            return Ok(None);
        }
        if len > self.left() {
            return Err(Refusal::Malformed(Where::Instructions));
        }
        let from = self.pos.wrapping_sub(self.base) as usize;
        let e = self.take(len)?;
        Ok(Some((from, e.len())))
    }
}

impl Bytes for Insns<'_> {
    #[inline]
    fn u8(&mut self) -> Res<u8> {
        if self.pos >= self.end {
            return Err(Refusal::Malformed(Where::Instructions));
        }
        self.take(1)?.first().copied().ok_or(NEED)
    }
    // Out of line, as [`Cursor::uleb`]: the interpreter reads LEB128
    // numbers in some 20 places (a leaf: it reads no memory).
    #[inline(never)]
    fn uleb(&mut self) -> Res<u64> {
        uleb(|| self.u8(), Where::Instructions)
    }
    #[inline(never)]
    fn sleb(&mut self) -> Res<i64> {
        sleb(|| self.u8(), Where::Instructions)
    }
    #[inline]
    fn pos(&self) -> u64 {
        self.pos
    }
    #[inline]
    fn at(&self) -> Where {
        Where::Instructions
    }
}

// Pointer encodings (DW_EH_PE_*).
const PE_OMIT: u8 = 0xff;
const PE_ABSPTR: u8 = 0x00;
const PE_ULEB128: u8 = 0x01;
const PE_UDATA2: u8 = 0x02;
const PE_UDATA4: u8 = 0x03;
const PE_UDATA8: u8 = 0x04;
const PE_SIGNED: u8 = 0x08;
const PE_SLEB128: u8 = 0x09;
const PE_SDATA2: u8 = 0x0a;
const PE_SDATA4: u8 = 0x0b;
const PE_SDATA8: u8 = 0x0c;
const PE_PCREL: u8 = 0x10;
const PE_DATAREL: u8 = 0x30;

/// The size of a fixed-size pointer format, `None` for LEB128 and
/// unsupported formats.
fn fixed_size(enc: u8, ws: WordSize) -> Option<u32> {
    match enc & 0x0f {
        PE_ABSPTR | PE_SIGNED => Some(ws.bytes() as u32),
        PE_UDATA2 | PE_SDATA2 => Some(2),
        PE_UDATA4 | PE_SDATA4 => Some(4),
        PE_UDATA8 | PE_SDATA8 => Some(8),
        _ => None,
    }
}

/// Read a value in `enc`'s format only (no application): FDE ranges.
/// Inlined: a frame of its own would be on every path to a read.
#[inline(always)]
fn read_format(c: &mut impl Bytes, enc: u8, ws: WordSize) -> Res<u64> {
    match enc & 0x0f {
        PE_ULEB128 => return c.uleb(),
        PE_SLEB128 => return Ok(c.sleb()? as u64),
        _ => {}
    }
    // The fixed sizes: one read of `n` bytes (inlined, over the window's
    // refill: no frame of its own under this one), sign-extended for the
    // `sdata` formats and `signed`.
    let n = fixed_size(enc, ws).ok_or(Refusal::UnsupportedEncoding(c.at(), enc))?;
    Ok(fixed_value(c.uint(n)?, enc, n))
}

/// The value of the `n` bytes `v` of a fixed-size format `enc`:
/// sign-extended for the `sdata` formats and `signed`.
#[inline(always)]
fn fixed_value(v: u64, enc: u8, n: u32) -> u64 {
    if enc & PE_SIGNED == 0 {
        return v;
    }
    let shift = 64 - 8 * n.clamp(1, 8);
    (((v << shift) as i64) >> shift) as u64
}

/// Read an encoded pointer.  `datarel` is the base of `DW_EH_PE_datarel`
/// (the hdr), `None` where it is not supported.  Inlined, as
/// [`read_format`].
#[inline(always)]
fn read_encoded(c: &mut impl Bytes, enc: u8, ws: WordSize, datarel: Option<u64>) -> Res<u64> {
    let base = encoded_base(enc, c.pos(), datarel, c.at())?;
    let v = read_format(c, enc, ws)?;
    Ok(ws.wrap(base.wrapping_add(v)))
}

/// What the value of a pointer encoded by `enc` at `field` is relative
/// to, or why `enc` is not supported (checked before its bytes are read).
#[inline(always)]
fn encoded_base(enc: u8, field: u64, datarel: Option<u64>, at: Where) -> Res<u64> {
    let base = match enc & 0x70 {
        0x00 => 0,
        PE_PCREL => field,
        PE_DATAREL => datarel.ok_or(Refusal::UnsupportedEncoding(at, enc))?,
        _ => return Err(Refusal::UnsupportedEncoding(at, enc)),
    };
    if enc & 0x80 != 0 {
        return Err(Refusal::UnsupportedEncoding(at, enc));
    }
    Ok(base)
}

/// A parsed `.eh_frame_hdr` (what a per-object cache could keep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    /// Address of the hdr (the base of `datarel`).
    pub addr: u64,
    /// Address of `.eh_frame`.
    pub eh_frame: u64,
    /// Address of the search table.
    pub table: u64,
    /// Entries in the search table.
    pub count: u64,
    /// Encoding of the table's entries (fixed size).
    pub table_enc: u8,
}

impl Hdr {
    /// No table (what [`read_hdr_to`] writes over).
    pub const NONE: Hdr = Hdr {
        addr: 0,
        eh_frame: 0,
        table: 0,
        count: 0,
        table_enc: 0,
    };
}

/// Parse the `.eh_frame_hdr` at `addr`.
pub fn read_hdr<M: UserBytes>(r: &mut Reader<'_, M>, addr: u64, ws: WordSize) -> Res<Hdr> {
    let mut h = Hdr::NONE;
    read_hdr_to(r, addr, ws, &mut h)?;
    Ok(h)
}

/// [`read_hdr`] into `out` (the caller's, maybe not on the stack), which
/// is written only where it succeeds.
pub fn read_hdr_to<M: UserBytes>(
    r: &mut Reader<'_, M>,
    addr: u64,
    ws: WordSize,
    out: &mut Hdr,
) -> Res<()> {
    // Version, three encodings, two pointers of at most 10 bytes each;
    // nothing past them is read (the hdr may end there).
    let mut win = [0; HDR_WINDOW];
    let mut c = Cursor::new(&mut win, addr, addr.saturating_add(24), Where::Hdr);
    c.chunk = 4;
    let version = c.u8(r)?;
    if version != 1 {
        return Err(Refusal::NoTable);
    }
    let frame_enc = c.u8(r)?;
    let count_enc = c.u8(r)?;
    let table_enc = c.u8(r)?;
    if frame_enc == PE_OMIT || count_enc == PE_OMIT || table_enc == PE_OMIT {
        return Err(Refusal::NoTable);
    }
    c.chunk = fixed_size(frame_enc, ws).map_or(1, u64::from);
    let eh_frame = read_encoded(&mut Read(&mut c, r), frame_enc, ws, Some(addr))?;
    c.chunk = fixed_size(count_enc, ws).map_or(1, u64::from);
    let count = read_encoded(&mut Read(&mut c, r), count_enc, ws, Some(addr))?;
    if fixed_size(table_enc, ws).is_none() {
        return Err(Refusal::UnsupportedEncoding(Where::Table, table_enc));
    }
    *out = Hdr {
        addr,
        eh_frame,
        table: c.pos,
        count,
        table_enc,
    };
    Ok(())
}

/// Binary-search the hdr's table for the FDE that may cover `pc`: the
/// address of the last entry whose start is at or below `pc` (the FDE
/// itself says whether it covers `pc`).
pub fn search<M: UserBytes>(r: &mut Reader<'_, M>, h: &Hdr, ws: WordSize, pc: u64) -> Res<u64> {
    search_range(r, h, ws, pc, &mut []).map(|(fde, _)| fde)
}

/// Levels of the search's probe tree a [`Probe`] memo of one table keeps:
/// [`PROBE_SLOTS`] probes, 24 bytes each.  Past them a search of libc's
/// table (3,713 entries) has a window of 58 entries (464 bytes) left,
/// read in one page.
pub const PROBE_LEVELS: u32 = 6;
/// Probes a memo keeps (the first [`PROBE_LEVELS`] levels of the tree).
pub const PROBE_SLOTS: usize = (1 << PROBE_LEVELS) - 1;

/// One probe of [`search_range`] remembered: the start of the table entry
/// it read, and its FDE's address if it was read too (only a probe whose
/// start is at or below the pc reads it).
///
/// The search's probes form a tree: its first probe is always the same
/// entry (the middle), its second one of two, and so on; a memo of one
/// table holds the tree's first levels in breadth-first order (the root
/// at 0, a probe's two successors at `2i + 1` (the start above the pc)
/// and `2i + 2`).  What a memoised probe answers is what reading the
/// entry again would have (the table is not read again: a memo is of
/// one table, read at one word size, whose bytes are taken to stay, as
/// the rows compiled from them are), so a search with a memo takes the
/// steps of one without, on any table, sorted or not, and reads a
/// subset of its reads: given those reads, the same answer.  (24 bytes
/// a probe, 1,512 in a 2 KiB allocation: a 16-byte layout with the
/// states as bits in a slot of their own measured 620 instructions more
/// on a shared first walk, 2026-11-28, for reasons not found.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// The entry's start.
    pub start: u64,
    /// The entry's FDE, if [`Probe::state`] says it was read.
    pub fde: u64,
    /// [`PROBE_NONE`], [`PROBE_START`] or [`PROBE_BOTH`].
    pub state: u8,
}

/// A [`Probe`] not made yet.
pub const PROBE_NONE: u8 = 0;
/// A [`Probe`] whose start was read.
pub const PROBE_START: u8 = 1;
/// A [`Probe`] whose start and FDE were read.
pub const PROBE_BOTH: u8 = 2;

/// [`search`], and the pcs it gives the same answer for: `[from, to)`,
/// the pcs every probe of the table compares as it compares `pc` (the
/// starts of the entry found and of the next one, in a sorted table), for
/// a caller that remembers the answer for a range of pcs.  `memo` holds
/// the probes of earlier searches of this table (see [`Probe`]; empty for
/// none): a probe found there reads nothing, one not found is put there.
/// Out of line (also where optimised for speed, which would inline it):
/// its frame is beside the FDE's read and the compilation, under their
/// caller's, not in it.
#[inline(never)]
pub fn search_range<M: UserBytes>(
    r: &mut Reader<'_, M>,
    h: &Hdr,
    ws: WordSize,
    pc: u64,
    memo: &mut [Probe],
) -> Res<(u64, (u64, u64))> {
    let enc = h.table_enc;
    let size = fixed_size(enc, ws).ok_or(Refusal::UnsupportedEncoding(Where::Table, enc))?;
    let entry = u64::from(size).wrapping_mul(2);
    let (mut lo, mut hi) = (0u64, h.count);
    let mut found = None;
    let (mut from, mut to) = (0u64, u64::MAX);
    // The probe's place in the tree, while the memo has one.
    let mut node = 0usize;
    for _ in 0..MAX_PROBES {
        if lo >= hi {
            return found.map(|fde| (fde, (from, to))).ok_or(Refusal::NoFde);
        }
        // No overflow (lo < hi): no panic path under the search.
        let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
        let at = mid
            .checked_mul(entry)
            .and_then(|o| h.table.checked_add(o))
            .ok_or(Refusal::Malformed(Where::Table))?;
        let end = at.saturating_add(entry);
        let second = at.saturating_add(u64::from(size));
        let slot = memo.get_mut(node);
        // Each field not in the memo: its encoding checked, its bytes read
        // as a cursor over the entry reads them (each read by a call out
        // of line, [`EntryBytes::read`]), then decoded here.
        let (start, mut e) = match slot.as_deref() {
            Some(p) if p.state != PROBE_NONE => (p.start, EntryBytes::at(second)),
            _ => {
                let base = encoded_base(enc, at, Some(h.addr), Where::Table)?;
                let mut e = EntryBytes::at(at);
                e.read_to(r, second, end)?;
                let v = fixed_value(e.uint(at, size), enc, size);
                (ws.wrap(base.wrapping_add(v)), e)
            }
        };
        if start <= pc {
            let fde = match slot.as_deref() {
                Some(p) if p.state == PROBE_BOTH => p.fde,
                _ => {
                    let base = encoded_base(enc, second, Some(h.addr), Where::Table)?;
                    e.read_to(r, end, end)?;
                    let v = fixed_value(e.uint(second, size), enc, size);
                    ws.wrap(base.wrapping_add(v))
                }
            };
            if let Some(p) = slot {
                *p = Probe {
                    start,
                    fde,
                    state: PROBE_BOTH,
                };
            }
            found = Some(fde);
            from = from.max(start);
            lo = mid.wrapping_add(1);
            node = node.saturating_mul(2).saturating_add(2);
        } else {
            if let Some(p) = slot {
                if p.state == PROBE_NONE {
                    *p = Probe {
                        start,
                        fde: 0,
                        state: PROBE_START,
                    };
                }
            }
            to = to.min(start);
            hi = mid;
            node = node.saturating_mul(2).saturating_add(1);
        }
    }
    if lo >= hi {
        return found.map(|fde| (fde, (from, to))).ok_or(Refusal::NoFde);
    }
    Err(Refusal::Bound(Bound::Probes))
}

/// The bytes of a search table's entry read so far: `len` from `base` (a
/// field's first byte), as a cursor over the entry reads them.
struct EntryBytes {
    buf: [u8; ENTRY_WINDOW],
    base: u64,
    len: usize,
}

impl EntryBytes {
    /// None read yet, from `base` on.
    fn at(base: u64) -> Self {
        EntryBytes {
            buf: [0; ENTRY_WINDOW],
            base,
            len: 0,
        }
    }

    /// The first byte not read.
    fn next(&self) -> u64 {
        self.base.wrapping_add(self.len as u64)
    }

    /// Read up to `upto`, in an entry that ends at `end`: each read
    /// ([`EntryBytes::read`]) takes a byte at least.  Inlined: the reads
    /// are under the search's frame, not under one more.
    #[inline(always)]
    fn read_to<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, upto: u64, end: u64) -> Res<()> {
        for _ in 0..ENTRY_WINDOW {
            if self.next() >= upto {
                break;
            }
            self.read(r, end)?;
        }
        Ok(())
    }

    /// Read from [`EntryBytes::next`], as a cursor's refill there: to
    /// the entry's `end`, not across a page, at most [`ENTRY_WINDOW`]
    /// bytes (an entry is at most that).  Out of line: the search's reads
    /// are under this small frame.
    #[inline(never)]
    fn read<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, end: u64) -> Res<()> {
        let pos = self.next();
        let to_page = PAGE - (pos & (PAGE - 1));
        let n = end
            .saturating_sub(pos)
            .min(to_page)
            .min(ENTRY_WINDOW as u64) as usize;
        let buf = self
            .buf
            .get_mut(self.len..)
            .and_then(|b| b.get_mut(..n))
            .filter(|b| !b.is_empty())
            .ok_or(Refusal::Bound(Bound::Memory))?;
        // Set before the read, its last call (as `Cursor::refill`): an
        // entry whose read failed is not read from again.
        self.len = self.len.wrapping_add(n);
        r.read(pos, buf, Where::Table)
    }

    /// The `n` bytes at `at` (read), little-endian.
    fn uint(&self, at: u64, n: u32) -> u64 {
        let from = at.wrapping_sub(self.base) as usize;
        let mut v = 0u64;
        for k in 0..n.min(8) {
            let b = self
                .buf
                .get(from.wrapping_add(k as usize))
                .copied()
                .unwrap_or(0);
            v |= u64::from(b).wrapping_shl(8 * k);
        }
        v
    }
}

/// Read an entry's length; returns (entry end, 64-bit format).
#[inline(always)]
fn entry_len<M: UserBytes>(c: &mut Cursor<'_>, r: &mut Reader<'_, M>) -> Res<u64> {
    let at = c.at;
    let len32 = c.uint(r, 4)?;
    let len = if len32 == 0xffff_ffff {
        c.end = c.pos.saturating_add(8);
        c.uint(r, 8)?
    } else {
        len32
    };
    if len == 0 {
        return Err(Refusal::Malformed(at));
    }
    if len > MAX_ENTRY_LEN {
        return Err(Refusal::Bound(Bound::EntryLength));
    }
    let end = c.pos.checked_add(len).ok_or(Refusal::Malformed(at))?;
    c.end = end;
    Ok(end)
}

/// A parsed FDE with what it needs of its CIE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fde {
    /// Address of the FDE.
    pub addr: u64,
    /// Address of its CIE.
    pub cie: u64,
    /// First pc covered.
    pub pc_begin: u64,
    /// One past the last pc covered.
    pub pc_end: u64,
    /// The CIE's code alignment factor.
    pub code_align: u64,
    /// The CIE's data alignment factor.
    pub data_align: i64,
    /// The CIE's return-address register.
    pub ra_reg: u64,
    /// The CIE's `R` encoding (for `DW_CFA_set_loc`).
    pub ptr_enc: u8,
    /// The CIE says `S`: a signal frame.
    pub signal_frame: bool,
    /// The CIE's initial instructions.
    pub cie_insns: (u64, u64),
    /// The FDE's instructions.
    pub insns: (u64, u64),
}

/// Parse the FDE at `addr` of the `.eh_frame` starting at `eh_frame`, and
/// its CIE, which must lie between `eh_frame` and the FDE.
pub fn read_fde<M: UserBytes>(
    r: &mut Reader<'_, M>,
    eh_frame: u64,
    addr: u64,
    ws: WordSize,
) -> Res<Fde> {
    let mut fde = Fde::EMPTY;
    let mut win = [0; 2 * ENTRY_FIELDS_WINDOW];
    read_fde_to(r, eh_frame, addr, ws, &mut fde, &mut win)?;
    Ok(fde)
}

/// [`read_fde`] into `scratch`, for [`compile_read`]: the FDE and the
/// windows its fields are read through are not on the stack.
#[inline]
pub fn read_fde_into<M: UserBytes>(
    r: &mut Reader<'_, M>,
    eh_frame: u64,
    addr: u64,
    ws: WordSize,
    scratch: &mut Scratch,
) -> Res<()> {
    let Scratch { fde, win, .. } = scratch;
    read_fde_to(r, eh_frame, addr, ws, fde, win)
}

impl Fde {
    /// No FDE (what a [`Scratch`] holds before its first read).
    const EMPTY: Fde = Fde {
        addr: 0,
        cie: 0,
        pc_begin: 0,
        pc_end: 0,
        code_align: 0,
        data_align: 0,
        ra_reg: 0,
        ptr_enc: 0,
        signal_frame: false,
        cie_insns: (0, 0),
        insns: (0, 0),
    };
}

/// [`read_fde`] into `out`, its FDE's and its CIE's fields read through
/// windows of [`ENTRY_FIELDS_WINDOW`] bytes in `win` (the caller's: not
/// this frame's).  Each field goes into `out` as it is read, not into a
/// local kept until the end (the fewer values live over the reads, the
/// smaller this frame): where it fails, `out` is partly written, and no
/// caller uses it (an FDE is compiled only after a read that succeeded).
/// Out of line, as [`search_range`].
#[inline(never)]
fn read_fde_to<M: UserBytes>(
    r: &mut Reader<'_, M>,
    eh_frame: u64,
    addr: u64,
    ws: WordSize,
    out: &mut Fde,
    win: &mut [u8],
) -> Res<()> {
    if addr < eh_frame {
        return Err(Refusal::Malformed(Where::Fde));
    }
    let (fde_win, cie_win) = win
        .split_at_mut_checked(ENTRY_FIELDS_WINDOW)
        .ok_or(Refusal::Bound(Bound::Memory))?;
    let cie_win = cie_win
        .get_mut(..ENTRY_FIELDS_WINDOW)
        .ok_or(Refusal::Bound(Bound::Memory))?;
    let mut c = Cursor::new(fde_win, addr, addr.saturating_add(4), Where::Fde);
    out.addr = addr;
    out.insns.1 = entry_len(&mut c, r)?;
    let id_at = c.pos;
    let id = c.uint(r, 4)?;
    if id == 0 {
        // A CIE, where an FDE was expected.
        return Err(Refusal::Malformed(Where::Fde));
    }
    let cie = id_at
        .checked_sub(id)
        .filter(|&cie| cie >= eh_frame)
        .ok_or(Refusal::Malformed(Where::Fde))?;

    // The CIE.
    let mut k = Cursor::new(cie_win, cie, cie.saturating_add(4), Where::Cie);
    out.cie_insns.1 = entry_len(&mut k, r)?;
    if out.cie_insns.1 > addr {
        return Err(Refusal::Malformed(Where::Cie));
    }
    if k.uint(r, 4)? != 0 {
        return Err(Refusal::Malformed(Where::Cie));
    }
    let version = k.u8(r)?;
    if !matches!(version, 1 | 3 | 4) {
        return Err(Refusal::UnsupportedAugmentation(version));
    }
    let mut aug = [0u8; MAX_AUGMENTATION];
    let mut aug_len = 0usize;
    loop {
        let b = k.u8(r)?;
        if b == 0 {
            break;
        }
        let slot = aug
            .get_mut(aug_len)
            .ok_or(Refusal::Bound(Bound::Augmentation))?;
        *slot = b;
        aug_len += 1;
    }
    let aug = aug.get(..aug_len).unwrap_or(&[]);
    if version == 4 {
        let address_size = k.u8(r)?;
        let segment_size = k.u8(r)?;
        if u64::from(address_size) != ws.bytes() || segment_size != 0 {
            return Err(Refusal::Malformed(Where::Cie));
        }
    }
    out.cie = cie;
    out.code_align = Read(&mut k, r).uleb()?;
    out.data_align = Read(&mut k, r).sleb()?;
    out.ra_reg = if version == 1 {
        u64::from(k.u8(r)?)
    } else {
        Read(&mut k, r).uleb()?
    };
    out.ptr_enc = PE_ABSPTR;
    out.signal_frame = false;
    let has_z = aug.first() == Some(&b'z');
    if has_z {
        let len = Read(&mut k, r).uleb()?;
        if len > k.left() {
            return Err(Refusal::Malformed(Where::Cie));
        }
        let data_end = k.pos.wrapping_add(len);
        for &letter in aug.iter().skip(1) {
            match letter {
                b'R' => out.ptr_enc = k.u8(r)?,
                b'L' => {
                    k.u8(r)?;
                }
                b'P' => {
                    let enc = k.u8(r)?;
                    if enc & 0x70 > PE_DATAREL {
                        return Err(Refusal::UnsupportedEncoding(Where::Cie, enc));
                    }
                    // The personality routine is not needed: skip it.
                    read_format(&mut Read(&mut k, r), enc & 0x7f, ws).map_err(|e| match e {
                        Refusal::UnsupportedEncoding(..) => {
                            Refusal::UnsupportedEncoding(Where::Cie, enc)
                        }
                        e => e,
                    })?;
                }
                b'S' => out.signal_frame = true,
                other => return Err(Refusal::UnsupportedAugmentation(other)),
            }
        }
        if k.pos > data_end {
            return Err(Refusal::Malformed(Where::Cie));
        }
        k.pos = data_end;
    } else if let Some(&letter) = aug.first() {
        return Err(Refusal::UnsupportedAugmentation(letter));
    }
    out.cie_insns.0 = k.pos;

    // The rest of the FDE.
    let ptr_enc = out.ptr_enc;
    out.pc_begin = read_encoded(&mut Read(&mut c, r), ptr_enc, ws, None)?;
    let range = ws.wrap(read_format(&mut Read(&mut c, r), ptr_enc, ws)?);
    out.pc_end = out
        .pc_begin
        .checked_add(range)
        .filter(|&e| ws.wrap(e) == e)
        .ok_or(Refusal::Malformed(Where::Fde))?;
    if has_z {
        let len = Read(&mut c, r).uleb()?;
        c.skip(len)?;
    }
    out.insns.0 = c.pos;
    Ok(())
}

/// The rule of a register column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// No instruction gave one: the frame pointer keeps its value (it is
    /// callee-saved); the return address is unknown.
    Unmentioned,
    /// `DW_CFA_undefined`.
    Undefined,
    /// `DW_CFA_same_value`.
    SameValue,
    /// Saved at CFA + offset.
    Offset(i32),
    /// The value is CFA + offset.
    ValOffset(i32),
    /// In another register (its DWARF number, [`u16::MAX`] for any
    /// number above).
    Register(u16),
    /// Saved at the frame pointer + offset: the expression
    /// `DW_OP_breg<fp> offset` (GCC's frame-pointer rule in a function that
    /// realigns its stack through a DRAP register, see [`Cfa::DerefFp`]).
    AtFp(i32),
    /// Saved at the stack pointer + offset: the expression
    /// `DW_OP_breg<sp> offset` (the registers a signal frame saved, see
    /// [`Cfa::DerefSp`]).
    AtSp(i32),
    /// Saved at an address computed by another expression.
    Expression,
    /// The value is computed by an expression.
    ValExpression,
}

/// The CFA of the x86 PLT pattern: sp + `sp_off` + (`ip & 15 >= threshold`
/// ? `1 << shift` : 0).  binutils' x86-64 lazy PLT FDE is `DW_OP_breg7 8;
/// DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge;
/// DW_OP_lit3; DW_OP_shl; DW_OP_plus` (threshold 10 for the IBT PLT; the
/// i386 one is the same with `breg4`, `breg8` and `lit2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PltCfa {
    /// Offset from the stack pointer.
    pub sp_off: i32,
    /// Threshold of `ip & 15`.
    pub threshold: u8,
    /// Shift of the extra word.
    pub shift: u8,
}

/// The rule of the CFA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cfa {
    /// Register (DWARF number, [`u16::MAX`] for any number above) +
    /// offset.
    RegOffset(u16, i32),
    /// The PLT pattern.
    Plt(PltCfa),
    /// The word at the frame pointer + offset: `DW_OP_breg<fp> offset;
    /// DW_OP_deref`, GCC's CFA in a function that realigns its stack
    /// (every i386 `main`, x86-64 functions with over-aligned locals): the
    /// incoming stack pointer is kept in a DRAP register saved in the
    /// frame.
    DerefFp(i32),
    /// The word at the stack pointer + offset: `DW_OP_breg<sp> offset;
    /// DW_OP_deref`, a signal frame's CFA (glibc's `__restore_rt`, the
    /// i386 vDSO's sigreturn): the interrupted context's stack pointer,
    /// saved in the signal frame.  Its FDE is a signal frame's, and the
    /// caller's stack may be anywhere (a handler on a `sigaltstack`), so
    /// the CFA need only differ from the stack pointer.
    DerefSp(i32),
    /// Another expression.
    Expression,
}

/// The rules in effect at a pc, for the three columns a step needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The CFA.
    pub cfa: Cfa,
    /// The return address.
    pub ra: Rule,
    /// The frame pointer.
    pub fp: Rule,
    /// `%rbx` (`%ebx`): never refused, only unknown in the caller if its
    /// rule cannot be followed ([`Saved::caller`]).
    pub bx: Rule,
    /// The stack pointer's own rule, while the interpreter runs: a row
    /// given out has it folded into the others ([`Row::fold_sp`]) and
    /// [`Rule::Unmentioned`].
    pub sp: Rule,
}

impl Row {
    const INITIAL: Row = Row {
        cfa: Cfa::RegOffset(0, 0),
        ra: Rule::Unmentioned,
        fp: Rule::Unmentioned,
        bx: Rule::Unmentioned,
        sp: Rule::Unmentioned,
    };

    /// The row a step uses, from the interpreter's, in a signal frame's
    /// FDE whose stack pointer is saved at CFA + offset (outside such an
    /// FDE the rule is ignored, as the CFA is the caller's stack pointer
    /// by definition: `Interp::out_row()`).  The saved stack pointer is
    /// the interrupted one (the i386 vDSO's sigreturn since 7.3 describes
    /// the `sigcontext` so: CFA = `esp` + K, every register, `esp` and the
    /// return address too, saved at CFA + its offset): the CFA becomes the
    /// word at `sp` + K + its offset ([`Cfa::DerefSp`], the form glibc's
    /// `__restore_rt` gives by an expression), and each register saved at
    /// CFA + offset is saved at `sp` + K + offset ([`Rule::AtSp`]).  Where
    /// the CFA is not `sp` + K, or a register's rule is the old CFA +
    /// offset itself, the row is refused.  Other rules of the stack
    /// pointer are ignored as before (glibc's `__restore_rt` saves it by
    /// an expression whose value its CFA already is).
    #[cold]
    #[inline(never)]
    pub fn fold_sp(self, arch: Arch) -> Row {
        let row = Row {
            sp: Rule::Unmentioned,
            ..self
        };
        let Rule::Offset(n) = self.sp else {
            return row;
        };
        let k = match self.cfa {
            Cfa::RegOffset(reg, k) if u64::from(reg) == arch.sp => {
                k.checked_add(n).map(|at| (k, at))
            }
            _ => None,
        };
        let Some((k, at)) = k else {
            return Row {
                cfa: Cfa::Expression,
                ..row
            };
        };
        let moved = |rule: Rule| match rule {
            Rule::Offset(o) => k.checked_add(o).map_or(Rule::Expression, Rule::AtSp),
            Rule::ValOffset(_) => Rule::ValExpression,
            other => other,
        };
        Row {
            cfa: Cfa::DerefSp(at),
            ra: moved(self.ra),
            fp: moved(self.fp),
            bx: moved(self.bx),
            sp: Rule::Unmentioned,
        }
    }

    /// Whether [`apply`] can use this row (with the frame pointer known):
    /// the CFA is the stack or frame pointer plus an offset, the PLT
    /// pattern, or the word at frame pointer + offset; the return address
    /// is at CFA + offset, or undefined (the end of the stack); the frame
    /// pointer is unmentioned, the same value, undefined (then unknown in
    /// the caller), at CFA + offset, CFA + offset itself, at frame pointer
    /// + offset, or in itself.
    pub fn check(&self, arch: Arch) -> Res<()> {
        match self.cfa {
            Cfa::RegOffset(reg, _)
                if u64::from(reg) == arch.sp
                    || u64::from(reg) == arch.fp
                    || u64::from(reg) == arch.bx => {}
            Cfa::RegOffset(..) => return Err(Refusal::UnsupportedCfaRegister),
            Cfa::Plt(_) | Cfa::DerefFp(_) | Cfa::DerefSp(_) => {}
            Cfa::Expression => return Err(Refusal::CfaExpression),
        }
        let kind = |rule: Rule| match rule {
            Rule::Unmentioned => RuleKind::Unmentioned,
            Rule::SameValue => RuleKind::SameValue,
            Rule::ValOffset(_) => RuleKind::ValOffset,
            Rule::Register(_) => RuleKind::Register,
            Rule::Expression | Rule::AtFp(_) | Rule::AtSp(_) => RuleKind::Expression,
            _ => RuleKind::ValExpression,
        };
        match self.ra {
            Rule::Offset(_) | Rule::Undefined | Rule::AtSp(_) => {}
            rule => return Err(Refusal::UnsupportedRule(Column::Ra, kind(rule))),
        }
        match self.fp {
            Rule::Register(reg) if u64::from(reg) != arch.fp => {
                Err(Refusal::UnsupportedRule(Column::Fp, RuleKind::Register))
            }
            Rule::Expression | Rule::ValExpression => {
                Err(Refusal::UnsupportedRule(Column::Fp, kind(self.fp)))
            }
            _ => Ok(()),
        }
    }
}

// Call-frame instructions (DW_CFA_*).
const CFA_ADVANCE_LOC: u8 = 0x40;
const CFA_OFFSET: u8 = 0x80;
const CFA_RESTORE: u8 = 0xc0;
const CFA_NOP: u8 = 0x00;
const CFA_SET_LOC: u8 = 0x01;
const CFA_ADVANCE_LOC1: u8 = 0x02;
const CFA_ADVANCE_LOC2: u8 = 0x03;
const CFA_ADVANCE_LOC4: u8 = 0x04;
const CFA_OFFSET_EXTENDED: u8 = 0x05;
const CFA_RESTORE_EXTENDED: u8 = 0x06;
const CFA_UNDEFINED: u8 = 0x07;
const CFA_SAME_VALUE: u8 = 0x08;
const CFA_REGISTER: u8 = 0x09;
const CFA_REMEMBER_STATE: u8 = 0x0a;
const CFA_RESTORE_STATE: u8 = 0x0b;
const CFA_DEF_CFA: u8 = 0x0c;
const CFA_DEF_CFA_REGISTER: u8 = 0x0d;
const CFA_DEF_CFA_OFFSET: u8 = 0x0e;
const CFA_DEF_CFA_EXPRESSION: u8 = 0x0f;
const CFA_EXPRESSION: u8 = 0x10;
const CFA_OFFSET_EXTENDED_SF: u8 = 0x11;
const CFA_DEF_CFA_SF: u8 = 0x12;
const CFA_DEF_CFA_OFFSET_SF: u8 = 0x13;
const CFA_VAL_OFFSET: u8 = 0x14;
const CFA_VAL_OFFSET_SF: u8 = 0x15;
const CFA_VAL_EXPRESSION: u8 = 0x16;
const CFA_GNU_ARGS_SIZE: u8 = 0x2e;
const CFA_GNU_NEGATIVE_OFFSET_EXTENDED: u8 = 0x2f;

/// `DW_OP_breg<reg> offset` at the start of expression bytes `e`: the
/// offset and the bytes after it.
fn breg(e: &[u8], reg: u64) -> Option<(i32, &[u8])> {
    const BREG0: u64 = 0x70;
    let (&b0, rest) = e.split_first()?;
    if u64::from(b0) != BREG0.checked_add(reg)? {
        return None;
    }
    let (off, rest) = sleb_bytes(rest)?;
    Some((i32::try_from(off).ok()?, rest))
}

/// Recognise `DW_OP_breg<fp> offset` in expression bytes `e`, followed by
/// `DW_OP_deref` if `deref` (see [`Cfa::DerefFp`], [`Rule::AtFp`]).
pub fn fp_pattern(e: &[u8], arch: Arch, deref: bool) -> Option<i32> {
    reg_pattern(e, arch.fp, deref)
}

/// Recognise `DW_OP_breg<sp> offset` in expression bytes `e`, followed by
/// `DW_OP_deref` if `deref` (see [`Cfa::DerefSp`], [`Rule::AtSp`]).
pub fn sp_pattern(e: &[u8], arch: Arch, deref: bool) -> Option<i32> {
    reg_pattern(e, arch.sp, deref)
}

fn reg_pattern(e: &[u8], reg: u64, deref: bool) -> Option<i32> {
    const DEREF: u8 = 0x06;
    let (off, rest) = breg(e, reg)?;
    match (rest, deref) {
        ([], false) | ([DEREF], true) => Some(off),
        _ => None,
    }
}

/// Recognise the PLT pattern in expression bytes `e` (see [`PltCfa`]).
pub fn plt_pattern(e: &[u8], arch: Arch) -> Option<PltCfa> {
    const LIT0: u8 = 0x30;
    let (sp_off, rest) = breg(e, arch.sp)?;
    let (zero, rest) = breg(rest, arch.ra)?;
    match rest {
        &[0x3f, 0x1a, k, 0x2a, s, 0x24, 0x22]
            if zero == 0
                && (LIT0..LIT0 + 16).contains(&k)
                && (LIT0 + 2..=LIT0 + 3).contains(&s) =>
        {
            Some(PltCfa {
                sp_off,
                threshold: k - LIT0,
                shift: s - LIT0,
            })
        }
        _ => None,
    }
}

fn sleb_bytes(e: &[u8]) -> Option<(i64, &[u8])> {
    let mut v = 0u64;
    // The shift counted as it goes (at most 70: no overflow check, and
    // no panic path under the interpreter's frames).
    let mut shift = 0u32;
    for (k, &b) in e.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        shift = shift.wrapping_add(7);
        if b & 0x80 == 0 {
            if shift < 64 && b & 0x40 != 0 {
                v |= !0u64 << shift;
            }
            return Some((v as i64, e.get(k.wrapping_add(1)..)?));
        }
    }
    None
}

/// A register number as a [`Rule`] or [`Cfa`] keeps it: numbers above
/// [`u16::MAX`] (no arch has them) become [`u16::MAX`].
fn reg16(reg: u64) -> u16 {
    u16::try_from(reg).unwrap_or(u16::MAX)
}

/// Receives the rows of an FDE from [`compile`].
pub trait RowSink {
    /// The rules in effect from `loc` up to the next row's `loc` (or the
    /// FDE's end); `Err`: every pc from `loc` to the FDE's end is refused.
    /// An error returned stops the compilation with it.
    fn row(&mut self, loc: u64, row: Res<&Row>) -> Res<()>;
}

/// The interpreter's state, in storage its caller keeps: with its
/// `DW_CFA_remember_state` stack, its read window and the FDE it compiles,
/// 1,760 bytes, too many for the kernel stack under a walk (the kernel
/// keeps one per mm, in the cache whose mutex the walk holds while
/// compiling; docs/design.md, "Stack use").  What it holds
/// between uses does not matter: each use sets every field it reads, and
/// reads a slot of the remember-state stack only after writing it, so one
/// `Scratch` serves any number of compilations, one at a time; but for
/// its FDE, which [`compile_read`] takes from the last [`read_fde_into`]
/// that succeeded (or [`compile`] from its caller).
pub struct Scratch {
    state: State,
    /// The instructions' window ([`Feed`]): the bytes of the instruction
    /// being decoded ([`KEEP`] at most) and a read of [`WINDOW`] after
    /// them.
    win: [u8; KEEP + WINDOW],
    /// The FDE [`read_fde_into`] read, which [`compile_read`] compiles.
    fde: Fde,
}

/// The interpreter's state proper ([`Scratch`] without the read window
/// and the FDE).
struct State {
    arch: Arch,
    ws: WordSize,
    code_align: u64,
    data_align: i64,
    ra_reg: u64,
    ptr_enc: u8,
    /// The FDE is a signal frame's ([`Row::fold_sp`]).
    signal: bool,
    row: Row,
    /// The row given to the sink ([`Interp::emit`]).
    out: Row,
    initial: Row,
    /// Slots `..depth` are the remembered rows; the others are stale.
    stack: [Row; MAX_STATE_DEPTH],
    depth: usize,
    loc: u64,
    target: u64,
    ops: u32,
    /// The instructions being run and the window of them read so far.
    feed: Feed,
    /// The rows [`Interp::decode`] made, with where each starts, for
    /// [`Interp::flush`] to give to the sink: `..made` of them.
    made_rows: [(u64, Row); ROWS_HELD],
    made: usize,
    /// An expression [`Interp::decode`] found, for [`Interp::recognise`].
    expr: Option<Expr>,
}

/// An expression of the instruction [`Interp::decode`] just ran: the rule
/// of the CFA (`of: None`) or of a register, and where its bytes are in
/// the window (offset, length; `None`: too long to look at).
#[derive(Clone, Copy)]
struct Expr {
    of: Option<u64>,
    at: Option<(usize, usize)>,
}

/// The instructions [`Interp::feed`] runs, `[pos, end)`, and the window
/// of them it has read: `win_len` bytes from `win_addr` at the start of
/// [`Scratch::win`].  `pos` is the next instruction's first byte.
#[derive(Clone, Copy)]
struct Feed {
    pos: u64,
    end: u64,
    win_addr: u64,
    win_len: usize,
}

/// Rows [`Interp::decode`] makes before it returns them to
/// [`Interp::feed`] for the sink: it returns once per that many rows, not
/// once per row (a compilation of i386 FDEs, 18 rows each on average,
/// took 7% more instructions so).
const ROWS_HELD: usize = 8;

/// Bytes of an instruction that [`Interp::decode`] may have decoded when
/// it needs a byte past the window, kept in the window for the next
/// decode: an opcode, two LEB128 numbers and a looked-at expression
/// (`DW_CFA_expression`: 1 + 10 + 10 + 16 - 1), rounded up.
const KEEP: usize = 64;

impl Scratch {
    /// A scratch, by value.  It is large (the frame this type keeps off
    /// the kernel stack): the kernel writes it straight into its
    /// allocation (`KBox::write`), where it is a copy of a constant.
    pub const fn new() -> Self {
        Self::EMPTY
    }

    const EMPTY: Scratch = Scratch {
        state: State::EMPTY,
        win: [0; KEEP + WINDOW],
        fde: Fde::EMPTY,
    };

    /// The FDE [`read_fde_into`] read last (if that read failed, partly
    /// written: not an FDE to use).
    pub fn fde(&self) -> &Fde {
        &self.fde
    }
}

impl State {
    const EMPTY: State = State {
        arch: Arch::X86_64,
        ws: WordSize::W8,
        code_align: 0,
        data_align: 0,
        ra_reg: 0,
        ptr_enc: 0,
        signal: false,
        row: Row::INITIAL,
        out: Row::INITIAL,
        initial: Row::INITIAL,
        stack: [Row::INITIAL; MAX_STATE_DEPTH],
        depth: 0,
        loc: 0,
        target: 0,
        ops: 0,
        feed: Feed {
            pos: 0,
            end: 0,
            win_addr: 0,
            win_len: 0,
        },
        made_rows: [(0, Row::INITIAL); ROWS_HELD],
        made: 0,
        expr: None,
    };
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// The interpreter: its state ([`Scratch`], the caller's) and where the
/// rows go.  Its fields are the state's, through `Deref`.
struct Interp<'s> {
    st: &'s mut State,
    /// The instructions' window ([`Scratch::win`]): read into by
    /// [`Interp::refill`], decoded from by [`Interp::decode`].
    win: Option<&'s mut [u8]>,
    /// [`compile`]: where each row goes as the location advances.
    sink: Option<&'s mut dyn RowSink>,
}

impl core::ops::Deref for Interp<'_> {
    type Target = State;
    #[inline(always)]
    fn deref(&self) -> &State {
        self.st
    }
}

impl core::ops::DerefMut for Interp<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut State {
        self.st
    }
}

impl Interp<'_> {
    fn set(&mut self, reg: u64, rule: Rule) {
        if reg == self.ra_reg {
            self.row.ra = rule;
        } else if reg == self.arch.fp {
            self.row.fp = rule;
        } else if reg == self.arch.bx {
            self.row.bx = rule;
        } else if reg == self.arch.sp {
            self.row.sp = rule;
        }
    }

    /// The row in effect at the end of the FDE, to the sink: out of line,
    /// so that [`compile`]'s frame, on the deepest stack path (under it
    /// the interpreter and its reads), keeps no row.
    #[inline(never)]
    fn emit_last(&mut self) -> Res<()> {
        self.emit()
    }

    /// The current row ([`Interp::out_row`]) to the sink, from `loc`: made
    /// in the state ([`State::out`]), not on the stack.
    #[inline(always)]
    fn emit(&mut self) -> Res<()> {
        let at = self.st.loc;
        self.st.out = self.out_row();
        match self.sink.as_deref_mut() {
            Some(sink) => sink.row(at, Ok(&self.st.out)),
            None => Ok(()),
        }
    }

    /// The current row as a step uses it ([`Row::fold_sp`]): out of line
    /// only for a signal frame's saved stack pointer, so that the
    /// compilation's deepest frames keep no copy of a row for it.
    #[inline(always)]
    fn out_row(&self) -> Row {
        if self.signal && matches!(self.row.sp, Rule::Offset(_)) {
            return self.row.fold_sp(self.arch);
        }
        Row {
            sp: Rule::Unmentioned,
            ..self.row
        }
    }

    fn factored(&self, n: i64) -> Res<i32> {
        n.checked_mul(self.data_align)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or(Refusal::Malformed(Where::Instructions))
    }

    fn factored_u(&self, n: u64) -> Res<i32> {
        let n = i64::try_from(n).map_err(|_| Refusal::Malformed(Where::Instructions))?;
        self.factored(n)
    }

    /// Advance the location by `delta` code units; `false` if the new
    /// location is past the target (the current row is the answer).
    fn advance(&mut self, delta: u64, cie: bool) -> Res<bool> {
        if cie {
            return Err(Refusal::Malformed(Where::Cie));
        }
        let d = delta
            .checked_mul(self.code_align)
            .ok_or(Refusal::Malformed(Where::Instructions))?;
        let loc = self
            .loc
            .checked_add(d)
            .filter(|&l| self.ws.wrap(l) == l)
            .ok_or(Refusal::Malformed(Where::Instructions))?;
        self.move_to(loc)
    }

    /// Move the location to `loc` (not before it); the row in effect up
    /// to it, if any, is made and held ([`State::made_rows`]) for
    /// [`Interp::feed`] to give to the sink once the decoder returns.
    fn move_to(&mut self, loc: u64) -> Res<bool> {
        if loc > self.target {
            return Ok(false);
        }
        if loc > self.loc {
            let row = (self.st.loc, self.out_row());
            // Room: the decoder returns when it is full.
            let slot = self
                .st
                .made_rows
                .get_mut(self.st.made)
                .ok_or(Refusal::Bound(Bound::Memory))?;
            *slot = row;
            // Below ROWS_HELD: no overflow (nor its panic's frames).
            self.st.made = self.st.made.wrapping_add(1);
        }
        self.loc = loc;
        Ok(true)
    }

    fn cfa_offset(&mut self, off: i32) -> Res<()> {
        match &mut self.row.cfa {
            Cfa::RegOffset(_, o) => {
                *o = off;
                Ok(())
            }
            _ => Err(Refusal::Malformed(Where::Instructions)),
        }
    }

    /// Run the instructions in `[from, to)` until the location passes the
    /// target.  `cie`: the CIE's initial instructions.
    ///
    /// The reads are done here, in this frame, not under the decoder
    /// ([`Interp::decode`] reads no memory): where it needs a byte past
    /// the window it gives up the instruction it was at, which has changed
    /// nothing yet (each instruction reads all its operands before it
    /// changes the state), and this reads what it needed and has it
    /// decode that instruction again.  The reads are those of a decoder
    /// that reads as it goes: each at the first byte past the window, of
    /// [`WINDOW`] bytes at most, not past the region's end nor across a
    /// page boundary (docs/design.md, "Stack use").
    #[inline(always)]
    fn feed<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        from: u64,
        to: u64,
        cie: bool,
    ) -> Res<()> {
        self.st.feed = Feed {
            pos: from,
            end: to,
            win_addr: from,
            win_len: 0,
        };
        self.st.made = 0;
        self.st.expr = None;
        // Each round but the last reads once, within `r`'s limit, or
        // recognises an expression or gives the sink rows, each of which
        // took an instruction (MAX_OPS).  The rows made go to the sink
        // before anything else happens (a read, the end of the run), as
        // when the decoder gave them itself: a sink's error stops the
        // run before it reads further.
        for _ in 0..=r.left().saturating_add(MAX_OPS) {
            let res = self.decode(cie);
            self.recognise();
            self.flush()?;
            match res {
                Ok(true) => {}
                Err(NEED) => self.refill(r)?,
                res => return res.map(|_| ()),
            }
        }
        Err(Refusal::Bound(Bound::Reads))
    }

    /// The window refilled from the first byte [`Interp::decode`] needed
    /// past it, keeping the bytes of the instruction it gave up (from
    /// [`Feed::pos`]).  That byte is the window's end, or the
    /// instruction's first byte where that is past the end (a skipped
    /// operand ends an instruction, so a skip past the window leaves the
    /// next one there).
    #[inline(never)]
    fn refill<M: UserBytes>(&mut self, r: &mut Reader<'_, M>) -> Res<()> {
        let bad = Refusal::Malformed(Where::Instructions);
        let f = self.st.feed;
        let at = f.win_addr.wrapping_add(f.win_len as u64).max(f.pos);
        let win = self
            .win
            .as_deref_mut()
            .ok_or(Refusal::Bound(Bound::Memory))?;
        // The instruction's bytes before `at`: in the window (it decodes
        // front to back, and only the last of its operands skips).
        let kept = at.checked_sub(f.pos).ok_or(bad)?;
        if kept > 0 {
            let from = f.pos.checked_sub(f.win_addr).ok_or(bad)?;
            let to = at.checked_sub(f.win_addr).ok_or(bad)?;
            if kept > KEEP as u64 || to > f.win_len as u64 {
                return Err(bad);
            }
            // Byte by byte (`copy_within` would bring its panic's frames
            // under this one): at most KEEP bytes, down.
            for (k, i) in (from as usize..to as usize).enumerate() {
                if let Some(&b) = win.get(i) {
                    if let Some(slot) = win.get_mut(k) {
                        *slot = b;
                    }
                }
            }
        }
        let to_page = PAGE - (at & (PAGE - 1));
        let len = f.end.saturating_sub(at).min(to_page).min(WINDOW as u64) as usize;
        let kept = kept as usize;
        let buf = win.get_mut(kept..kept + len).ok_or(bad)?;
        r.read(at, buf, Where::Instructions)?;
        self.st.feed.win_addr = f.pos;
        self.st.feed.win_len = kept + len;
        Ok(())
    }

    /// The rows [`Interp::decode`] made, to the sink.  Out of line: the
    /// sink's frames are under this one, beside the reads'.
    #[inline(never)]
    fn flush(&mut self) -> Res<()> {
        let made = core::mem::take(&mut self.st.made);
        let Some(sink) = self.sink.as_deref_mut() else {
            return Ok(());
        };
        for (at, row) in self.st.made_rows.iter().take(made) {
            sink.row(*at, Ok(row))?;
        }
        Ok(())
    }

    /// The instructions of the feed, from its `pos`, decoded from the
    /// window only, until the location passes the target or the region
    /// ends (`false`), or [`ROWS_HELD`] rows are made for the sink or an
    /// expression for [`Interp::recognise`] (`true`, the feed's `pos` past
    /// the instruction; [`State::made_rows`], [`State::expr`]); the rows
    /// made before it ends are in the state too.  [`NEED`] where it
    /// needs a byte past the window (the feed's `pos` is then the first
    /// byte of the instruction it gave up).  Not generic, and out of line: one decoder
    /// for every memory, with no reads and no sink under its frames.
    #[inline(never)]
    fn decode(&mut self, cie: bool) -> Res<bool> {
        // Always there (put back below on every path); were it not, a
        // transient refusal, not one the rows would remember.
        let Some(win) = self.win.take() else {
            return Err(Refusal::Bound(Bound::Memory));
        };
        let f = self.st.feed;
        let mut c = Insns {
            win: win.get(..f.win_len).unwrap_or_default(),
            base: f.win_addr,
            pos: f.pos,
            end: f.end,
        };
        // Each instruction is at least one byte; the count is bounded
        // by MAX_OPS for this call and the previous ones together.
        let mut res = Ok(false);
        while c.pos < c.end {
            if self.ops >= MAX_OPS {
                res = Err(Refusal::Bound(Bound::Instructions));
                break;
            }
            let (at, ops) = (c.pos, self.ops);
            // Below MAX_OPS: no overflow (nor its panic's frames).
            self.ops = ops.wrapping_add(1);
            match self.instruction(&mut c, cie) {
                Ok(true) if self.st.made >= ROWS_HELD || self.st.expr.is_some() => {
                    res = Ok(true);
                    break;
                }
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    if e == NEED {
                        // Given up, to be decoded again from its start.
                        c.pos = at;
                        self.ops = ops;
                    }
                    res = Err(e);
                    break;
                }
            }
        }
        self.st.feed.pos = c.pos;
        self.win = Some(win);
        res
    }

    /// Decode and run one instruction; `false` if the location passed the
    /// target.
    #[inline(always)]
    fn instruction(&mut self, c: &mut Insns<'_>, cie: bool) -> Res<bool> {
        let op = c.u8()?;
        let low = u64::from(op & 0x3f);
        match op & 0xc0 {
            CFA_ADVANCE_LOC => self.advance(low, cie),
            CFA_OFFSET => {
                let off = self.factored_u(c.uleb()?)?;
                self.set(low, Rule::Offset(off));
                Ok(true)
            }
            CFA_RESTORE => {
                self.restore(low, cie)?;
                Ok(true)
            }
            _ => self.extended(op, c, cie),
        }
    }

    fn restore(&mut self, reg: u64, cie: bool) -> Res<()> {
        if cie {
            return Err(Refusal::Malformed(Where::Cie));
        }
        if reg == self.ra_reg {
            self.row.ra = self.initial.ra;
        } else if reg == self.arch.fp {
            self.row.fp = self.initial.fp;
        } else if reg == self.arch.bx {
            self.row.bx = self.initial.bx;
        } else if reg == self.arch.sp {
            self.row.sp = self.initial.sp;
        }
        Ok(())
    }

    /// `DW_CFA_def_cfa_expression`: the expression's place in the window
    /// kept for [`Interp::recognise`], which [`Interp::feed`] calls once
    /// the instruction is done (the patterns' frames are not under the
    /// decoder's: docs/design.md, "Stack use").
    #[inline(never)]
    fn cfa_expression(&mut self, c: &mut Insns<'_>) -> Res<()> {
        let len = c.uleb()?;
        let at = c.expression(len)?;
        self.st.expr = Some(Expr { of: None, at });
        Ok(())
    }

    /// `DW_CFA_expression` and `DW_CFA_val_expression` (`op`): a register
    /// saved where a known pattern says ([`Interp::recognise`], as
    /// [`Interp::cfa_expression`]), else an expression.
    #[inline(never)]
    fn reg_expression(&mut self, op: u8, c: &mut Insns<'_>) -> Res<()> {
        let reg = c.uleb()?;
        let len = c.uleb()?;
        if op == CFA_EXPRESSION
            && (reg == self.arch.fp || reg == self.ra_reg || reg == self.arch.bx)
        {
            let at = c.expression(len)?;
            self.st.expr = Some(Expr { of: Some(reg), at });
            return Ok(());
        }
        c.skip(len)?;
        let rule = if op == CFA_EXPRESSION {
            Rule::Expression
        } else {
            Rule::ValExpression
        };
        self.set(reg, rule);
        Ok(())
    }

    /// The rule of the expression [`Interp::decode`] kept
    /// ([`State::expr`]), from its bytes in the window: the patterns the
    /// walk knows, else an expression it does not evaluate.  Out of line:
    /// the patterns' frames are beside the decoder's, not under it.
    #[inline(never)]
    fn recognise(&mut self) {
        let Some(x) = self.st.expr.take() else {
            return;
        };
        let arch = self.arch;
        let e =
            x.at.and_then(|(from, len)| self.win.as_deref()?.get(from..from.checked_add(len)?));
        match x.of {
            None => {
                self.st.row.cfa = match e {
                    Some(e) => plt_pattern(e, arch)
                        .map(Cfa::Plt)
                        .or_else(|| fp_pattern(e, arch, true).map(Cfa::DerefFp))
                        .or_else(|| sp_pattern(e, arch, true).map(Cfa::DerefSp))
                        .unwrap_or(Cfa::Expression),
                    None => Cfa::Expression,
                };
            }
            Some(reg) => {
                let fp = reg == arch.fp;
                let rule =
                    if let Some(off) = e.and_then(|e| fp_pattern(e, arch, false)).filter(|_| fp) {
                        Rule::AtFp(off)
                    } else if let Some(off) = e.and_then(|e| sp_pattern(e, arch, false)) {
                        Rule::AtSp(off)
                    } else {
                        Rule::Expression
                    };
                self.set(reg, rule);
            }
        }
    }

    fn extended(&mut self, op: u8, c: &mut Insns<'_>, cie: bool) -> Res<bool> {
        match op {
            CFA_NOP => {}
            CFA_SET_LOC => {
                if cie {
                    return Err(Refusal::Malformed(Where::Cie));
                }
                let loc = c.encoded(self.ptr_enc, self.ws)?;
                if loc < self.loc {
                    return Err(Refusal::Malformed(Where::Instructions));
                }
                return self.move_to(loc);
            }
            CFA_ADVANCE_LOC1 => return self.advance(c.uint(1)?, cie),
            CFA_ADVANCE_LOC2 => return self.advance(c.uint(2)?, cie),
            CFA_ADVANCE_LOC4 => return self.advance(c.uint(4)?, cie),
            CFA_OFFSET_EXTENDED => {
                let reg = c.uleb()?;
                let off = self.factored_u(c.uleb()?)?;
                self.set(reg, Rule::Offset(off));
            }
            CFA_RESTORE_EXTENDED => {
                let reg = c.uleb()?;
                self.restore(reg, cie)?;
            }
            CFA_UNDEFINED => {
                let reg = c.uleb()?;
                self.set(reg, Rule::Undefined);
            }
            CFA_SAME_VALUE => {
                let reg = c.uleb()?;
                self.set(reg, Rule::SameValue);
            }
            CFA_REGISTER => {
                let reg = c.uleb()?;
                let src = c.uleb()?;
                self.set(reg, Rule::Register(reg16(src)));
            }
            CFA_REMEMBER_STATE => {
                let st = &mut *self.st;
                let slot = st
                    .stack
                    .get_mut(st.depth)
                    .ok_or(Refusal::Bound(Bound::StateDepth))?;
                *slot = st.row;
                // A slot of the stack: below MAX_STATE_DEPTH.
                st.depth = st.depth.wrapping_add(1);
            }
            CFA_RESTORE_STATE => {
                let depth = self
                    .depth
                    .checked_sub(1)
                    .ok_or(Refusal::Malformed(Where::Instructions))?;
                self.row = *self
                    .stack
                    .get(depth)
                    .ok_or(Refusal::Malformed(Where::Instructions))?;
                self.depth = depth;
            }
            CFA_DEF_CFA => {
                let reg = reg16(c.uleb()?);
                let off = c.uleb()?;
                let off =
                    i32::try_from(off).map_err(|_| Refusal::Malformed(Where::Instructions))?;
                self.row.cfa = Cfa::RegOffset(reg, off);
            }
            CFA_DEF_CFA_SF => {
                let reg = reg16(c.uleb()?);
                let off = self.factored(c.sleb()?)?;
                self.row.cfa = Cfa::RegOffset(reg, off);
            }
            CFA_DEF_CFA_REGISTER => {
                let reg = reg16(c.uleb()?);
                match &mut self.row.cfa {
                    Cfa::RegOffset(rg, _) => *rg = reg,
                    _ => return Err(Refusal::Malformed(Where::Instructions)),
                }
            }
            CFA_DEF_CFA_OFFSET => {
                let off = c.uleb()?;
                let off =
                    i32::try_from(off).map_err(|_| Refusal::Malformed(Where::Instructions))?;
                self.cfa_offset(off)?;
            }
            CFA_DEF_CFA_OFFSET_SF => {
                let off = self.factored(c.sleb()?)?;
                self.cfa_offset(off)?;
            }
            CFA_DEF_CFA_EXPRESSION => self.cfa_expression(c)?,
            CFA_EXPRESSION | CFA_VAL_EXPRESSION => self.reg_expression(op, c)?,
            CFA_OFFSET_EXTENDED_SF => {
                let reg = c.uleb()?;
                let off = self.factored(c.sleb()?)?;
                self.set(reg, Rule::Offset(off));
            }
            CFA_VAL_OFFSET => {
                let reg = c.uleb()?;
                let off = self.factored_u(c.uleb()?)?;
                self.set(reg, Rule::ValOffset(off));
            }
            CFA_VAL_OFFSET_SF => {
                let reg = c.uleb()?;
                let off = self.factored(c.sleb()?)?;
                self.set(reg, Rule::ValOffset(off));
            }
            CFA_GNU_ARGS_SIZE => {
                c.uleb()?;
            }
            CFA_GNU_NEGATIVE_OFFSET_EXTENDED => {
                let reg = c.uleb()?;
                let off = self.factored_u(c.uleb()?)?;
                let off = off
                    .checked_neg()
                    .ok_or(Refusal::Malformed(Where::Instructions))?;
                self.set(reg, Rule::Offset(off));
            }
            _ => return Err(Refusal::UnsupportedOpcode(op)),
        }
        Ok(true)
    }
}

/// The rules in effect at `pc` by `fde` (which must cover `pc`).  The row
/// may hold rules a step cannot use: see [`Row::check`].
pub fn row_at<M: UserBytes>(r: &mut Reader<'_, M>, fde: &Fde, ws: WordSize, pc: u64) -> Res<Row> {
    if pc < fde.pc_begin || pc >= fde.pc_end {
        return Err(Refusal::NoFde);
    }
    Interp::check(fde, ws)?;
    // Test-only: a state of its own, on the stack.
    let mut st = Scratch::EMPTY;
    st.fde = *fde;
    let (mut it, _) = Interp::start(&mut st, ws, pc, None);
    it.feed(r, fde.cie_insns.0, fde.cie_insns.1, true)?;
    it.initial = it.row;
    it.depth = 0;
    it.feed(r, fde.insns.0, fde.insns.1, false)?;
    Ok(it.out_row())
}

impl<'s> Interp<'s> {
    /// Whether `fde` can be interpreted: its return-address column must be
    /// the arch's.
    fn check(fde: &Fde, ws: WordSize) -> Res<()> {
        if fde.ra_reg != Arch::of(ws).ra {
            return Err(Refusal::UnsupportedRaColumn);
        }
        Ok(())
    }

    /// The interpreter at the start of `fde` (which passed [`Self::check`]),
    /// its state in `st`: every field set but the remember-state stack,
    /// whose slots are written before they are read (so a stale scratch
    /// gives the same rows as a new one).
    #[inline(always)]
    fn start(
        scratch: &'s mut Scratch,
        ws: WordSize,
        target: u64,
        sink: Option<&'s mut dyn RowSink>,
    ) -> (Self, &'s Fde) {
        let Scratch {
            state: st,
            win,
            fde,
        } = scratch;
        st.arch = Arch::of(ws);
        st.ws = ws;
        st.code_align = fde.code_align;
        st.data_align = fde.data_align;
        st.ra_reg = fde.ra_reg;
        st.ptr_enc = fde.ptr_enc;
        st.signal = fde.signal_frame;
        st.row = Row::INITIAL;
        st.initial = Row::INITIAL;
        st.depth = 0;
        st.loc = fde.pc_begin;
        st.target = target;
        st.ops = 0;
        let it = Interp {
            st,
            win: Some(&mut win[..]),
            sink,
        };
        (it, fde)
    }
}

/// Whether a refusal depends on the moment, not on the tables: a fault
/// (the page may be there next time) or a read bound (the walk's budget
/// was low).  Such an outcome must not be remembered.
pub fn transient(refusal: Refusal) -> bool {
    matches!(
        refusal,
        Refusal::Fault(_) | Refusal::Bound(Bound::Reads) | Refusal::Bound(Bound::Memory)
    )
}

/// Every row of `fde`, in order of location, into `sink`: the interpreter
/// run once over the CIE's and the FDE's instructions, giving the row in
/// effect at each location where the rules change.  The rows are exactly
/// what [`row_at`] gives for each pc of the FDE: a row from `loc` holds
/// for the pcs from `loc` to the next row's `loc`, and a refusal from
/// `loc` is what [`row_at`] answers for every pc from `loc` on (the
/// instruction it stops at is run for all of them).  A [`transient`]
/// refusal, or an error of `sink`, is returned instead: nothing about the
/// FDE may be remembered then.  The interpreter's state is in `scratch`
/// (what it held before does not matter), not in this function's frame.
pub fn compile<M: UserBytes>(
    r: &mut Reader<'_, M>,
    fde: &Fde,
    ws: WordSize,
    sink: &mut dyn RowSink,
    scratch: &mut Scratch,
) -> Res<()> {
    scratch.fde = *fde;
    compile_read(r, ws, sink, scratch)
}

/// [`compile`] the FDE in `scratch`: the one the last [`read_fde_into`]
/// that succeeded read (its caller's duty: a stale FDE compiles to its
/// own rows, not `pc`'s).  Out of line, as [`search_range`] (the bench
/// kernel's link-time inlining put it into its caller's frame).
#[inline(never)]
pub fn compile_read<M: UserBytes>(
    r: &mut Reader<'_, M>,
    ws: WordSize,
    sink: &mut dyn RowSink,
    scratch: &mut Scratch,
) -> Res<()> {
    let f = &scratch.fde;
    let (begin, end) = (f.pc_begin, f.pc_end);
    if end <= begin {
        return Ok(());
    }
    let target = end - 1;
    let (loc, e) = match Interp::check(f, ws) {
        Ok(()) => {
            // The instructions' bounds are read from the FDE (in the
            // scratch) where each run starts, not kept in this frame.
            let (mut it, f) = Interp::start(scratch, ws, target, Some(&mut *sink));
            let res = it
                .feed(r, f.cie_insns.0, f.cie_insns.1, true)
                .and_then(|()| {
                    it.initial = it.row;
                    it.depth = 0;
                    it.feed(r, f.insns.0, f.insns.1, false)
                });
            match res {
                Ok(()) => return it.emit_last(),
                Err(e) => (it.loc, e),
            }
        }
        Err(e) => (begin, e),
    };
    if transient(e) {
        return Err(e);
    }
    sink.row(loc, Err(e))
}

/// Compute the caller's frame from `row` (the rules at `frame`'s pc).
/// `signal_frame`: the FDE is a signal frame's (then the caller's ip is
/// where it was interrupted, not a return address).
///
/// The CFA must be strictly above `frame.sp` and fit the word size.  The
/// return address is read at CFA + offset; the caller's frame pointer is
/// read at CFA + offset, is CFA + offset, keeps the current value (same
/// value, unmentioned, itself), or becomes unknown (undefined).  The
/// caller checks that the return address is a user address.
pub fn apply<M: UserBytes>(
    r: &mut Reader<'_, M>,
    row: &Row,
    ws: WordSize,
    frame: &Frame,
    signal_frame: bool,
) -> Res<Step> {
    let arch = Arch::of(ws);
    row.check(arch)?;
    let cfa = match row.cfa {
        Cfa::RegOffset(reg, off) => {
            let base = if u64::from(reg) == arch.sp {
                frame.sp
            } else if u64::from(reg) == arch.bx {
                frame
                    .bx
                    .value(r, ws)?
                    .ok_or(Refusal::UnsupportedCfaRegister)?
            } else {
                frame.fp.ok_or(Refusal::FpUnknown)?
            };
            base.checked_add_signed(i64::from(off))
        }
        Cfa::Plt(p) => {
            let extra = if frame.ip & 15 >= u64::from(p.threshold) {
                1u64 << (p.shift & 7)
            } else {
                0
            };
            frame
                .sp
                .checked_add_signed(i64::from(p.sp_off))
                .and_then(|v| v.checked_add(extra))
        }
        Cfa::DerefFp(off) => {
            let fp = frame.fp.ok_or(Refusal::FpUnknown)?;
            let at = fp
                .checked_add_signed(i64::from(off))
                .ok_or(Refusal::Fault(Where::Stack))?;
            Some(r.word(at, ws, Where::Stack)?)
        }
        Cfa::DerefSp(off) => {
            let at = frame
                .sp
                .checked_add_signed(i64::from(off))
                .ok_or(Refusal::Fault(Where::Stack))?;
            Some(r.word(at, ws, Where::Stack)?)
        }
        Cfa::Expression => None,
    }
    .ok_or(Refusal::CfaNotAbove)?;
    let cfa = check_cfa(
        cfa,
        frame.sp,
        ws,
        signal_frame && matches!(row.cfa, Cfa::DerefSp(_)),
    )?;
    let at_sp = |off: i32| {
        frame
            .sp
            .checked_add_signed(i64::from(off))
            .ok_or(Refusal::Fault(Where::Stack))
    };
    let at = |off: i32| {
        cfa.checked_add_signed(i64::from(off))
            .ok_or(Refusal::Fault(Where::Stack))
    };
    let ip = match row.ra {
        Rule::Offset(off) => r.word(at(off)?, ws, Where::Stack)?,
        Rule::AtSp(off) => r.word(at_sp(off)?, ws, Where::Stack)?,
        Rule::Undefined => return Ok(Step::EndOfStack),
        _ => return Err(Refusal::UnsupportedRule(Column::Ra, RuleKind::SameValue)),
    };
    let fp = match row.fp {
        Rule::Offset(off) => Some(r.word(at(off)?, ws, Where::Stack)?),
        Rule::ValOffset(off) => Some(ws.wrap(at(off)?)),
        Rule::AtFp(off) => match frame.fp.map(|fp| fp.checked_add_signed(i64::from(off))) {
            Some(Some(at)) => Some(r.word(at, ws, Where::Stack)?),
            Some(None) => return Err(Refusal::Fault(Where::Stack)),
            None => None,
        },
        Rule::AtSp(off) => Some(r.word(at_sp(off)?, ws, Where::Stack)?),
        Rule::Undefined => None,
        _ => frame.fp,
    };
    Ok(Step::Caller(Frame {
        ip,
        sp: cfa,
        fp,
        ip_is_return_address: !signal_frame,
        bx: frame.bx.caller(row.bx, frame.sp, cfa, arch.bx, ws),
    }))
}

/// `cfa` if a step may go to it from stack pointer `sp`: strictly up the
/// stack (so a walk always ends), within the word size
/// ([`Refusal::CfaNotAbove`] if not), and aligned to it
/// ([`Refusal::CfaUnaligned`], as the frame-pointer step and upstream's
/// `unwind_user_next_common()`). A signal frame's saved stack pointer
/// ([`Cfa::DerefSp`] in a signal frame's FDE) may be anywhere but `sp`
/// itself, as a handler may run on another stack (`sigaltstack`; a walk
/// is bounded by its output anyway), and unaligned: it is whatever the
/// interrupted code had, saved by the kernel.
#[inline]
pub fn check_cfa(cfa: u64, sp: u64, ws: WordSize, signal_sp: bool) -> Result<u64, Refusal> {
    if ws.wrap(cfa) != cfa || if signal_sp { cfa == sp } else { cfa <= sp } {
        return Err(Refusal::CfaNotAbove);
    }
    if !signal_sp && cfa & (ws.bytes() - 1) != 0 {
        return Err(Refusal::CfaUnaligned);
    }
    Ok(cfa)
}

// Test-only: the walk uses compiled rows (super::rows) and `apply`.
#[cfg(any(not(CONFIG_UNWIND_USER_RUST), CONFIG_UNWIND_USER_RUST_KUNIT_TEST))]
/// One unwind step from `frame` by the object whose `.eh_frame_hdr` is at
/// `hdr`: search the table, parse the FDE and its CIE, run the
/// instructions up to the frame's pc, and compute the caller.
pub fn step<M: UserBytes>(mem: &mut M, hdr: u64, ws: WordSize, frame: &Frame) -> Res<Step> {
    let mut r = Reader::new(mem);
    step_with(&mut r, hdr, ws, frame)
}

// Test-only: the walk uses compiled rows (super::rows) and `apply`.
#[cfg(any(not(CONFIG_UNWIND_USER_RUST), CONFIG_UNWIND_USER_RUST_KUNIT_TEST))]
/// [`step`] with a given reader (whose reads count against the bound).
pub fn step_with<M: UserBytes>(
    r: &mut Reader<'_, M>,
    hdr: u64,
    ws: WordSize,
    frame: &Frame,
) -> Res<Step> {
    let h = read_hdr(r, hdr, ws)?;
    step_in(r, &h, ws, frame)
}

// Test-only: the walk uses compiled rows (super::rows) and `apply`.
#[cfg(any(not(CONFIG_UNWIND_USER_RUST), CONFIG_UNWIND_USER_RUST_KUNIT_TEST))]
/// [`step_with`] by an object's already parsed `.eh_frame_hdr` (for a
/// caller that keeps the [`Hdr`] of the objects it has met).
pub fn step_in<M: UserBytes>(
    r: &mut Reader<'_, M>,
    h: &Hdr,
    ws: WordSize,
    frame: &Frame,
) -> Res<Step> {
    let (row, signal_frame) = rules_in(r, h, ws, frame)?;
    apply(r, &row, ws, frame, signal_frame)
}

/// The rules at `frame`'s pc by the object's tables, and whether its FDE
/// is a signal frame's: [`step_in`] without [`apply`], for a caller that
/// remembers the rules of the pcs it has met (they depend on the pc
/// only).
pub fn rules_in<M: UserBytes>(
    r: &mut Reader<'_, M>,
    h: &Hdr,
    ws: WordSize,
    frame: &Frame,
) -> Res<(Row, bool)> {
    let pc = if frame.ip_is_return_address {
        frame.ip.checked_sub(1).ok_or(Refusal::NoFde)?
    } else {
        frame.ip
    };
    let at = search(r, h, ws, pc)?;
    let fde = read_fde(r, h.eh_frame, at, ws)?;
    let row = row_at(r, &fde, ws, pc)?;
    Ok((row, fde.signal_frame))
}
