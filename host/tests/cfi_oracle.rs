// SPDX-License-Identifier: GPL-2.0

//! The CFI interpreter (`src/logic/cfi.rs`) against gimli on real
//! objects: for every FDE of each object and a spread of pcs in it, the
//! FDE the `.eh_frame_hdr` search finds and the CFA, return-address and
//! frame-pointer rules must equal gimli's unwind row, and a step by them
//! must give what the rules say.  Where the interpreter refuses, the
//! refusal must be one of [`ALLOWED`] (each with its reason and evidence),
//! at most its cap of pcs in each object; any other refusal, any pc gimli
//! cannot answer and any disagreement fails.
//!
//! The objects are named ([`expected`]): a missing one fails.  Those that
//! exist only after `make check`'s builds (perf, the kernels' vDSOs, under
//! `$BUILD`) are reported as SKIP instead when `UNWIND_ORACLE_BUILT=0`
//! (scripts/host-test.sh runs before the builds; make check's
//! `host-oracle` stage runs this test again with them required).
//!
//!   cargo test --release --test cfi_oracle -- --nocapture
//!   UNWIND_ORACLE_BUILT=0 cargo test --release --test cfi_oracle -- --nocapture

use gimli::{
    BaseAddresses, CallFrameInstruction, CfaRule, EhFrame, FrameDescriptionEntry, RegisterRule,
    UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use unwind_logic::cfi::{
    self, Arch, Bound, Cfa, Column, Reader, Refusal, Rule, RuleKind, Saved, UserBytes, MAX_OPS,
    MAX_READS,
};
use unwind_logic::walk::WordSize;

/// Where in the interpreter a refusal came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// `Row::check`, on rules equal to gimli's row (so gimli's row has
    /// the same rule the step cannot use).
    Check,
    /// Before a row: the search, the CIE/FDE or the instructions, where
    /// gimli gave a row.
    Interpret,
}

/// A refusal the oracle accepts, and why.
struct Allowed {
    /// A name for the output.
    name: &'static str,
    refusal: Refusal,
    stage: Stage,
    /// Why the walk refuses here on purpose.
    why: &'static str,
    /// At most this many pcs of one object (of its FDEs at 7 pcs each).
    /// Measured on Debian 12 (glibc 2.36-9+deb12u14), the most in one object:
    /// see `measured`; the cap is about twice that, for another build of
    /// the same library.
    cap: u64,
    measured: &'static str,
}

/// The refusals allowed on real objects; every other refusal of a pc
/// gimli has a row for fails the test.  The hand-table tests
/// (`host/tests/cfi.rs`) cover the other refusals; none of them may
/// happen on these objects.
const ALLOWED: [Allowed; 3] = [
    Allowed {
        name: "cfa-register",
        refusal: Refusal::UnsupportedCfaRegister,
        stage: Stage::Check,
        why: "the CFA is based on a register other than sp, fp and bx, which \
              the deferred walk does not know in a user frame (the entry gives \
              ip, sp and fp; the tables can give bx): glibc's __longjmp, \
              __longjmp_cancel and ____longjmp_chk (and ld.so's __longjmp) once \
              the jmp_buf is loaded (CFA %rdi on x86-64, %eax or %ecx on i386) \
              and setcontext once the ucontext is (CFA %rdx): there the rules \
              describe the context being restored, not a caller",
        cap: 16,
        measured: "8 (x86-64 libc)",
    },
    Allowed {
        name: "ra-in-register",
        refusal: Refusal::UnsupportedRule(Column::Ra, RuleKind::Register),
        stage: Stage::Check,
        why: "the return address is in another register (DW_CFA_register), \
              which the walk does not track: glibc's vfork pops it (into %rdi \
              on x86-64, %ecx on i386) before the syscall and pushes it back \
              after",
        cap: 12,
        measured: "6 (x86-64 and i386 libc)",
    },
    Allowed {
        name: "instruction-bound",
        refusal: Refusal::Bound(Bound::Instructions),
        stage: Stage::Interpret,
        why: "reaching the pc takes more than MAX_OPS (1,024) call-frame \
              instructions, the bound on one step's work; evidence: gimli's \
              count of the CIE's and the FDE's instructions up to the pc \
              exceeds MAX_OPS (checked at each such pc)",
        cap: 20,
        measured: "9 (i386 libm)",
    },
];

/// The lowest fraction of an object's pcs that must be agreed and usable,
/// in parts per 10,000 (measured lowest: 99.83%, i386 libm).
const MIN_AGREED: u64 = 9_900;

fn allowed(refusal: Refusal, stage: Stage) -> Option<&'static Allowed> {
    ALLOWED
        .iter()
        .find(|a| a.refusal == refusal && a.stage == stage)
}

/// How many call-frame instructions, by gimli, the interpreter runs to
/// find the row at `pc` of `fde`: all of the CIE's, and the FDE's up to
/// the one that moves the location past `pc` (it counts that one too).
fn ops_to<R: gimli::Reader<Offset = usize>>(
    fde: &FrameDescriptionEntry<R>,
    eh_frame: &EhFrame<R>,
    bases: &BaseAddresses,
    pc: u64,
) -> Result<u64, gimli::Error> {
    let mut n = 0;
    let mut it = fde.cie().instructions(eh_frame, bases);
    while it.next()?.is_some() {
        n += 1;
    }
    let mut loc = fde.initial_address();
    let mut it = fde.instructions(eh_frame, bases);
    while let Some(i) = it.next()? {
        n += 1;
        let next = match i {
            CallFrameInstruction::AdvanceLoc { delta } => {
                Some(loc.wrapping_add(u64::from(delta) * fde.cie().code_alignment_factor()))
            }
            CallFrameInstruction::SetLoc { address } => Some(address),
            _ => None,
        };
        if let Some(l) = next {
            if l > pc {
                break;
            }
            loc = l;
        }
    }
    Ok(n)
}

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

#[derive(Default)]
struct Tally {
    fdes: u64,
    /// FDEs gimli could not parse (their pcs are not checked: fails).
    fdes_unparsed: u64,
    pcs: u64,
    /// Rules equal to gimli's and usable by a step.
    agreed: u64,
    /// Refusals in [`ALLOWED`], by name (count, an example, the
    /// functions).
    allowed: BTreeMap<&'static str, (u64, String, BTreeSet<String>)>,
    /// The most instructions gimli counts to a pc refused by the
    /// instruction bound.
    max_ops_refused: u64,
    /// The most instructions gimli counts to a pc the interpreter gave a
    /// row for.
    max_ops: u64,
    /// Other refusals of a pc gimli has a row for, by refusal and stage
    /// (count, an example): each fails.
    refused: BTreeMap<String, (u64, String)>,
    /// Rows whose CFA is the PLT pattern.
    plt_rows: u64,
    /// gimli failed where the interpreter did not.
    gimli_only_err: u64,
    /// Both failed (gimli gave no row to compare with).
    both_err: u64,
    /// `cfi::step` on a synthetic stack gave what the rules say.
    steps_agreed: u64,
    mismatches: Vec<String>,
    max_reads: u32,
}

fn rule_of(r: &RegisterRule<usize>) -> Option<Rule> {
    Some(match *r {
        RegisterRule::Undefined => Rule::Undefined,
        RegisterRule::SameValue => Rule::SameValue,
        RegisterRule::Offset(o) => Rule::Offset(i32::try_from(o).ok()?),
        RegisterRule::ValOffset(o) => Rule::ValOffset(i32::try_from(o).ok()?),
        RegisterRule::Register(g) => Rule::Register(g.0),
        RegisterRule::Expression(_) => Rule::Expression,
        RegisterRule::ValExpression(_) => Rule::ValExpression,
        _ => return None,
    })
}

/// The rules a step uses, from gimli's, where a signal frame's FDE saves
/// the interrupted stack pointer at CFA + `n` (the i386 vDSO since 7.3):
/// the caller's CFA is that saved word, at sp + K + `n` for a CFA of sp +
/// K, and each register saved at CFA + o is at sp + K + o.  Written here
/// from DWARF's definition, apart from `Row::fold_sp`.
fn saved_sp(
    rules: (Cfa, Option<Rule>, Option<Rule>, Option<Rule>),
    sp: RegisterRule<usize>,
    signal: bool,
    arch: Arch,
) -> (Cfa, Option<Rule>, Option<Rule>, Option<Rule>) {
    let (cfa, ra, fp, bx) = rules;
    let RegisterRule::Offset(n) = sp else {
        return rules;
    };
    if !signal {
        return rules;
    }
    let Cfa::RegOffset(reg, k) = cfa else {
        return (Cfa::Expression, ra, fp, bx);
    };
    if u64::from(reg) != arch.sp {
        return (Cfa::Expression, ra, fp, bx);
    }
    let k = i64::from(k);
    let at = |r: Option<Rule>| match r {
        Some(Rule::Offset(o)) => Some(Rule::AtSp(i32::try_from(k + i64::from(o)).unwrap())),
        Some(Rule::ValOffset(_)) => Some(Rule::ValExpression),
        r => r,
    };
    (
        Cfa::DerefSp(i32::try_from(k + n).unwrap()),
        at(ra),
        at(fp),
        at(bx),
    )
}

/// gimli does not tell an unmentioned register from an undefined one.
fn same_rule(ours: Rule, gimli: Option<Rule>) -> bool {
    match (ours, gimli) {
        (Rule::Unmentioned, Some(Rule::Undefined)) => true,
        (o, Some(g)) => o == g,
        _ => false,
    }
}

const STACK: u64 = 0x7000_0000;
const STACK_LEN: u64 = 1 << 20;

/// The 32-bit word at `addr` of the synthetic stack.
fn pattern(addr: u64) -> u32 {
    (addr as u32).wrapping_mul(0x9e37_79b1) | 1
}

/// The word of size `ws` at `addr`, computed from the pattern.
fn stack_word(addr: u64, ws: WordSize) -> Option<u64> {
    if addr < STACK || addr + ws.bytes() > STACK + STACK_LEN || addr & 3 != 0 {
        return None;
    }
    let lo = u64::from(pattern(addr));
    Some(match ws {
        WordSize::W4 => lo,
        WordSize::W8 => lo | u64::from(pattern(addr + 4)) << 32,
    })
}

/// `cfi::step` from a frame at `pc` (sp and fp in the synthetic stack)
/// gives what `row`'s rules, evaluated here by the test, say.
fn step_agrees(
    image: &mut Image,
    hdr: u64,
    ws: WordSize,
    arch: Arch,
    pc: u64,
    row: &cfi::Row,
    signal: bool,
) -> Result<(), String> {
    let sp = STACK + 0x1000;
    let fp = STACK + 0x2000;
    let bx = STACK + 0x3000;
    let f = cfi::Frame {
        ip: pc,
        sp,
        fp: Some(fp),
        ip_is_return_address: false,
        bx: Saved::Value(bx),
    };
    let cfa = match row.cfa {
        Cfa::RegOffset(r, o) if u64::from(r) == arch.sp => sp.wrapping_add(i64::from(o) as u64),
        Cfa::RegOffset(r, o) if u64::from(r) == arch.bx => bx.wrapping_add(i64::from(o) as u64),
        Cfa::RegOffset(_, o) => fp.wrapping_add(i64::from(o) as u64),
        Cfa::Plt(p) => {
            let extra = if pc & 15 >= u64::from(p.threshold) {
                1 << p.shift
            } else {
                0
            };
            sp.wrapping_add(i64::from(p.sp_off) as u64) + extra
        }
        Cfa::DerefFp(o) => match stack_word(fp.wrapping_add(i64::from(o) as u64), ws) {
            Some(v) => v,
            None => return Ok(()),
        },
        Cfa::DerefSp(o) => match stack_word(sp.wrapping_add(i64::from(o) as u64), ws) {
            Some(v) => v,
            None => return Ok(()),
        },
        Cfa::Expression => unreachable!(),
    };
    // A signal frame's saved stack pointer may be anywhere but sp.
    let anywhere = matches!(row.cfa, Cfa::DerefSp(_)) && signal;
    let expect = if (!anywhere && cfa <= sp) || cfa == sp || ws.wrap(cfa) != cfa {
        Err(Refusal::CfaNotAbove)
    } else {
        let ra = match row.ra {
            Rule::Offset(o) => stack_word(cfa.wrapping_add(i64::from(o) as u64), ws),
            Rule::AtSp(o) => stack_word(sp.wrapping_add(i64::from(o) as u64), ws),
            _ => Some(0),
        };
        let cfp = match row.fp {
            Rule::Offset(o) => stack_word(cfa.wrapping_add(i64::from(o) as u64), ws).map(Some),
            Rule::ValOffset(o) => Some(Some(cfa.wrapping_add(i64::from(o) as u64))),
            Rule::AtFp(o) => stack_word(fp.wrapping_add(i64::from(o) as u64), ws).map(Some),
            Rule::AtSp(o) => stack_word(sp.wrapping_add(i64::from(o) as u64), ws).map(Some),
            Rule::Undefined => Some(None),
            _ => Some(Some(fp)),
        };
        match (row.ra, ra, cfp) {
            (Rule::Undefined, _, _) => Ok(cfi::Step::EndOfStack),
            (_, Some(ip), Some(fp)) => Ok(cfi::Step::Caller(cfi::Frame {
                ip,
                sp: cfa,
                fp,
                ip_is_return_address: true,
                // Where the caller's %rbx is, by the rule gimli gave.
                bx: match row.bx {
                    Rule::Offset(o) => Saved::At(cfa.wrapping_add(i64::from(o) as u64)),
                    Rule::AtSp(o) => Saved::At(sp.wrapping_add(i64::from(o) as u64)),
                    Rule::ValOffset(o) => Saved::Value(cfa.wrapping_add(i64::from(o) as u64)),
                    Rule::Unmentioned | Rule::SameValue => Saved::Value(bx),
                    Rule::Register(r) if u64::from(r) == arch.bx => Saved::Value(bx),
                    _ => Saved::Unknown,
                },
            })),
            _ => Err(Refusal::Fault(cfi::Where::Stack)),
        }
    };
    let got = cfi::step(image, hdr, ws, &f);
    let same = match (&got, &expect) {
        // A signal frame's caller is not at a return address.
        (Ok(cfi::Step::Caller(g)), Ok(cfi::Step::Caller(e))) => {
            g.ip == e.ip && g.sp == e.sp && g.fp == e.fp && g.bx == e.bx
        }
        (g, e) => g == e,
    };
    if same {
        Ok(())
    } else {
        Err(format!(
            "step at {pc:#x}: got {got:?}, rules say {expect:?}"
        ))
    }
}

fn check_object(path: &str) -> Result<Tally, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let file = object::File::parse(&*data).map_err(|e| format!("not ELF: {e}"))?;
    let (ws, arch) = match file.architecture() {
        object::Architecture::X86_64 => (WordSize::W8, Arch::X86_64),
        object::Architecture::I386 => (WordSize::W4, Arch::I386),
        a => return Err(format!("architecture {a:?}")),
    };
    let hdr = file
        .section_by_name(".eh_frame_hdr")
        .ok_or("no .eh_frame_hdr")?;
    let ehf = file.section_by_name(".eh_frame").ok_or("no .eh_frame")?;
    let ehf_data = ehf.data().map_err(|e| e.to_string())?;
    let mut image = Image { segs: Vec::new() };
    for seg in file.segments() {
        let d = seg.data().map_err(|e| e.to_string())?;
        image.segs.push((seg.address(), d.to_vec()));
    }
    // A synthetic stack: every word holds a value derived from its address.
    let stack: Vec<u8> = (0..STACK_LEN / 4)
        .flat_map(|i| pattern(STACK + i * 4).to_le_bytes())
        .collect();
    image.segs.push((STACK, stack));

    let mut eh_frame = EhFrame::new(ehf_data, gimli::LittleEndian);
    eh_frame.set_address_size(ws.bytes() as u8);
    let mut bases = BaseAddresses::default()
        .set_eh_frame(ehf.address())
        .set_eh_frame_hdr(hdr.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let symbols = file.symbol_map();
    let name = |pc: u64| match symbols.get(pc) {
        Some(s) => format!("{pc:#x} {}+{:#x}", s.name(), pc - s.address()),
        None => format!("{pc:#x}"),
    };
    // The FDE's function: the symbol at its start, else (a local
    // function of a stripped object) its address after the symbol before.
    let func = |begin: u64| match symbols.get(begin) {
        Some(s) if s.address() == begin => s.name().to_string(),
        _ => name(begin),
    };
    let count = |t: &mut Tally, e: Refusal, stage: Stage, pc: u64, begin: u64, eg: String| {
        let eg = format!("{} {eg}", name(pc));
        match allowed(e, stage) {
            Some(a) => {
                let slot = t.allowed.entry(a.name).or_insert((0, eg, BTreeSet::new()));
                slot.0 += 1;
                slot.2.insert(func(begin));
            }
            None => {
                t.refused
                    .entry(format!("{e:?} ({stage:?})"))
                    .or_insert((0, eg))
                    .0 += 1
            }
        }
    };
    let mut ctx = UnwindContext::new();
    let mut t = Tally::default();
    let mut entries = eh_frame.entries(&bases);
    while let Some(entry) = entries.next().map_err(|e| format!("gimli: {e}"))? {
        let gimli::CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) = partial.parse(EhFrame::cie_from_offset) else {
            t.fdes_unparsed += 1;
            continue;
        };
        t.fdes += 1;
        let begin = fde.initial_address();
        let len = fde.len();
        if len == 0 {
            continue;
        }
        let mut pcs = vec![0, len - 1, len / 4, len / 2, 3 * len / 4, 1, len / 3];
        pcs.sort();
        pcs.dedup();
        pcs.retain(|&p| p < len);
        let fde_addr = ehf.address() + fde.offset() as u64;
        for off in pcs {
            let pc = begin + off;
            t.pcs += 1;
            let g = fde
                .unwind_info_for_address(&eh_frame, &bases, &mut ctx, pc)
                .map(|row| {
                    // A register's rule, `DW_OP_breg<sp> off` read as AtSp.
                    let at_sp_rule = |reg: u64| match row.register(gimli::Register(reg as u16)) {
                        RegisterRule::Expression(e) => Some(
                            e.get(&eh_frame)
                                .ok()
                                .and_then(|e| cfi::sp_pattern(e.0.slice(), arch, false))
                                .map_or(Rule::Expression, Rule::AtSp),
                        ),
                        r => rule_of(&r),
                    };
                    let cfa = match row.cfa() {
                        CfaRule::RegisterAndOffset { register, offset } => {
                            Cfa::RegOffset(register.0, i32::try_from(*offset).unwrap_or(i32::MAX))
                        }
                        CfaRule::Expression(e) => {
                            let bytes = e.get(&eh_frame).map(|e| e.0.slice().to_vec());
                            let b = bytes.unwrap_or_default();
                            match cfi::plt_pattern(&b, arch) {
                                Some(p) => Cfa::Plt(p),
                                None => cfi::fp_pattern(&b, arch, true)
                                    .map(Cfa::DerefFp)
                                    .or_else(|| cfi::sp_pattern(&b, arch, true).map(Cfa::DerefSp))
                                    .unwrap_or(Cfa::Expression),
                            }
                        }
                    };
                    let rules = (
                        cfa,
                        at_sp_rule(arch.ra),
                        match row.register(gimli::Register(arch.fp as u16)) {
                            RegisterRule::Expression(e) => Some({
                                let b = e.get(&eh_frame).map(|e| e.0.slice().to_vec());
                                let b = b.unwrap_or_default();
                                cfi::fp_pattern(&b, arch, false)
                                    .map(Rule::AtFp)
                                    .or_else(|| cfi::sp_pattern(&b, arch, false).map(Rule::AtSp))
                                    .unwrap_or(Rule::Expression)
                            }),
                            r => rule_of(&r),
                        },
                        at_sp_rule(arch.bx),
                    );
                    let sp = row.register(gimli::Register(arch.sp as u16));
                    saved_sp(rules, sp, fde.cie().is_signal_trampoline(), arch)
                });
            let mut r = Reader::new(&mut image);
            let ours = (|| {
                let h = cfi::read_hdr(&mut r, hdr.address(), ws)?;
                let at = cfi::search(&mut r, &h, ws, pc)?;
                let f = cfi::read_fde(&mut r, h.eh_frame, at, ws)?;
                Ok::<_, Refusal>((at, cfi::row_at(&mut r, &f, ws, pc)?))
            })();
            t.max_reads = t.max_reads.max(r.reads());
            // The instruction bound's evidence, checked the other way: a
            // row found takes at most MAX_OPS instructions by gimli.
            if ours.is_ok() {
                match ops_to(&fde, &eh_frame, &bases, pc) {
                    Ok(n) if n <= u64::from(MAX_OPS) => t.max_ops = t.max_ops.max(n),
                    n => t.mismatches.push(format!(
                        "pc {pc:#x}: a row, but gimli counts {n:?} instructions"
                    )),
                }
            }
            match (ours, g) {
                (Ok((at, row)), Ok((cfa, ra, fp, bx))) => {
                    if at != fde_addr {
                        t.mismatches.push(format!(
                            "pc {pc:#x}: hdr search found FDE {at:#x}, gimli {fde_addr:#x}"
                        ));
                    } else if row.cfa != cfa
                        || !same_rule(row.ra, ra)
                        || !same_rule(row.fp, fp)
                        || !same_rule(row.bx, bx)
                    {
                        t.mismatches.push(format!(
                            "pc {pc:#x} FDE {at:#x}: ours {row:?}, gimli cfa {cfa:?} ra {ra:?} fp {fp:?}"
                        ));
                    } else {
                        if matches!(row.cfa, Cfa::Plt(_)) {
                            t.plt_rows += 1;
                        }
                        match row.check(arch) {
                            Ok(()) => {
                                t.agreed += 1;
                                match step_agrees(
                                    &mut image,
                                    hdr.address(),
                                    ws,
                                    arch,
                                    pc,
                                    &row,
                                    fde.cie().is_signal_trampoline(),
                                ) {
                                    Ok(()) => t.steps_agreed += 1,
                                    Err(m) => t.mismatches.push(m),
                                }
                            }
                            Err(e) => {
                                let eg = format!("{row:?}");
                                count(&mut t, e, Stage::Check, pc, begin, eg)
                            }
                        }
                    }
                }
                (Err(e), Ok(_)) => {
                    let mut eg = String::new();
                    if e == Refusal::Bound(Bound::Instructions) {
                        // The evidence: gimli needs more than the bound.
                        match ops_to(&fde, &eh_frame, &bases, pc) {
                            Ok(n) if n > u64::from(MAX_OPS) => {
                                t.max_ops_refused = t.max_ops_refused.max(n);
                                eg = format!("({n} instructions by gimli)");
                            }
                            n => t.mismatches.push(format!(
                                "pc {pc:#x}: refused {e:?}, but gimli counts {n:?} instructions"
                            )),
                        }
                    }
                    count(&mut t, e, Stage::Interpret, pc, begin, eg)
                }
                (Err(_), Err(_)) => t.both_err += 1,
                (Ok(_), Err(_)) => t.gimli_only_err += 1,
            }
        }
    }
    Ok(t)
}

/// An object the test checks.
struct Expected {
    what: &'static str,
    /// Where it may be: the first that exists is checked.
    paths: Vec<PathBuf>,
    /// Made by make check's builds (under `$BUILD`), not by the system.
    built: bool,
}

/// The build directory: `$BUILD` (the Makefile exports it), else the
/// repository's `build/`.
fn build_dir() -> PathBuf {
    match std::env::var_os("BUILD") {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/build")),
    }
}

/// The objects checked: the machine's libc, ld.so and libm, 64- and
/// 32-bit (Debian's paths; scripts/setup.sh installs gcc-multilib), this
/// test's own binary, and what make check builds: perf and the vDSOs of
/// both test kernels.
fn expected() -> Vec<Expected> {
    let sys = |what, paths: &[&str]| Expected {
        what,
        paths: paths.iter().map(PathBuf::from).collect(),
        built: false,
    };
    let b = build_dir();
    let built = |what, rel: &str| Expected {
        what,
        paths: vec![b.join(rel)],
        built: true,
    };
    vec![
        sys(
            "libc x86-64",
            &[
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
            ],
        ),
        sys(
            "ld.so x86-64",
            &[
                "/lib64/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            ],
        ),
        sys(
            "libm x86-64",
            &[
                "/lib/x86_64-linux-gnu/libm.so.6",
                "/usr/lib/x86_64-linux-gnu/libm.so.6",
            ],
        ),
        sys(
            "libc i386",
            &[
                "/lib32/libc.so.6",
                "/usr/lib32/libc.so.6",
                "/lib/i386-linux-gnu/libc.so.6",
            ],
        ),
        sys(
            "libm i386",
            &[
                "/lib32/libm.so.6",
                "/usr/lib32/libm.so.6",
                "/lib/i386-linux-gnu/libm.so.6",
            ],
        ),
        sys(
            "ld.so i386",
            &[
                "/lib/ld-linux.so.2",
                "/lib32/ld-linux.so.2",
                "/usr/lib32/ld-linux.so.2",
            ],
        ),
        Expected {
            what: "this test binary",
            paths: std::env::current_exe().into_iter().collect(),
            built: false,
        },
        built("perf", "perf/perf"),
        built(
            "vDSO x86-64 (kernel-c)",
            "kernel-c/arch/x86/entry/vdso/vdso64/vdso64.so",
        ),
        built(
            "vDSO i386 (kernel-c)",
            "kernel-c/arch/x86/entry/vdso/vdso32/vdso32.so",
        ),
        built(
            "vDSO x86-64 (kernel-rust)",
            "kernel-rust/arch/x86/entry/vdso/vdso64/vdso64.so",
        ),
        built(
            "vDSO i386 (kernel-rust)",
            "kernel-rust/arch/x86/entry/vdso/vdso32/vdso32.so",
        ),
    ]
}

/// Whether the built objects are required: `UNWIND_ORACLE_BUILT` unset
/// or `1`; `0` before make check's builds (scripts/host-test.sh).
fn built_required() -> bool {
    match std::env::var("UNWIND_ORACLE_BUILT").as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("1") => true,
        Ok("0") => false,
        v => panic!("UNWIND_ORACLE_BUILT must be 0 or 1, not {v:?}"),
    }
}

#[test]
fn real_objects_agree_with_gimli() {
    let required = built_required();
    println!(
        "cfi oracle: allowed refusals (any other refusal of a pc gimli has a row for fails), \
         and at least {}.{:02}% of each object's pcs agreed and usable:",
        MIN_AGREED / 100,
        MIN_AGREED % 100
    );
    for a in &ALLOWED {
        println!(
            "    {}: {:?} at {:?}, at most {} pcs per object (measured at most {}): {}",
            a.name,
            a.refusal,
            a.stage,
            a.cap,
            a.measured,
            a.why.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    let mut checked = 0;
    let mut skipped = 0;
    let mut failures: Vec<String> = Vec::new();
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for e in expected() {
        if e.built && !required {
            skipped += 1;
            println!(
                "cfi oracle: SKIP {} ({}): UNWIND_ORACLE_BUILT=0, not built yet \
                 (make check's host-oracle stage checks it after the builds)",
                e.what,
                e.paths[0].display()
            );
            continue;
        }
        let Some(path) = e.paths.iter().find(|p| p.exists()) else {
            let tried: Vec<String> = e.paths.iter().map(|p| p.display().to_string()).collect();
            let hint = if e.built {
                " (build it: make perf kernel-c kernel-rust; or set UNWIND_ORACLE_BUILT=0 \
                 before the builds)"
            } else {
                ""
            };
            println!(
                "cfi oracle: FAIL {}: missing at {}{hint}",
                e.what,
                tried.join(", ")
            );
            failures.push(format!("{}: missing", e.what));
            continue;
        };
        let path = path.display().to_string();
        let t = match check_object(&path) {
            Err(why) => {
                println!("cfi oracle: FAIL {} ({path}): {why}", e.what);
                failures.push(format!("{}: {why}", e.what));
                continue;
            }
            Ok(t) => t,
        };
        checked += 1;
        let n_allowed: u64 = t.allowed.values().map(|(n, _, _)| n).sum();
        let n_refused: u64 = t.refused.values().map(|(n, _)| n).sum();
        println!(
            "cfi oracle: {} ({path}): {} FDEs ({} gimli cannot parse), {} pcs: {} agreed and \
             usable ({:.3}%, {} steps checked), {} allowed refusals, {} other refusals, \
             {} gimli-only errors, {} both errors, {} mismatches, at most {} reads (bound \
             {MAX_READS}), at most {} instructions to a row (bound {MAX_OPS})",
            e.what,
            t.fdes,
            t.fdes_unparsed,
            t.pcs,
            t.agreed,
            t.agreed as f64 * 100.0 / t.pcs.max(1) as f64,
            t.steps_agreed,
            n_allowed,
            n_refused,
            t.gimli_only_err,
            t.both_err,
            t.mismatches.len(),
            t.max_reads,
            t.max_ops
        );
        println!("    PLT-pattern rows: {}", t.plt_rows);
        let mut bad = Vec::new();
        for a in &ALLOWED {
            let (n, eg, funcs) = t.allowed.get(a.name).cloned().unwrap_or_default();
            *totals.entry(a.name).or_default() += n;
            if n == 0 {
                continue;
            }
            let extra = if a.refusal == Refusal::Bound(Bound::Instructions) {
                format!(", up to {} instructions by gimli", t.max_ops_refused)
            } else {
                String::new()
            };
            let funcs: Vec<String> = funcs.into_iter().collect();
            println!(
                "    allowed {}: {n} pcs (cap {}{extra}) in {}; e.g. {eg}",
                a.name,
                a.cap,
                funcs.join(", ")
            );
            if n > a.cap {
                bad.push(format!("{} {n} pcs over its cap {}", a.name, a.cap));
            }
        }
        for (cause, (n, eg)) in &t.refused {
            println!("    NOT ALLOWED refusal: {cause}: {n} pcs (e.g. {eg})");
            bad.push(format!("refused {cause} at {n} pcs"));
        }
        for m in t.mismatches.iter().take(10) {
            println!("    MISMATCH {m}");
        }
        if !t.mismatches.is_empty() {
            bad.push(format!("{} mismatches", t.mismatches.len()));
        }
        if t.gimli_only_err != 0 || t.both_err != 0 || t.fdes_unparsed != 0 {
            bad.push(format!(
                "gimli gave no row at {} pcs and parsed no FDE {} times",
                t.gimli_only_err + t.both_err,
                t.fdes_unparsed
            ));
        }
        if t.pcs == 0 {
            bad.push("no pc checked".into());
        }
        if t.agreed * 10_000 < t.pcs * MIN_AGREED {
            bad.push(format!(
                "only {} of {} pcs agreed and usable",
                t.agreed, t.pcs
            ));
        }
        for b in bad {
            println!("    FAIL {b}");
            failures.push(format!("{}: {b}", e.what));
        }
    }
    let totals: Vec<String> = totals.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "cfi oracle: {checked} objects checked, {skipped} SKIP, {} failures; allowed refusals \
         in all: {}",
        failures.len(),
        totals.join(", ")
    );
    assert!(failures.is_empty(), "cfi oracle: {failures:#?}");
}
