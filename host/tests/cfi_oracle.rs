// SPDX-License-Identifier: GPL-2.0

//! The CFI interpreter (`src/logic/cfi.rs`) against gimli on the real
//! objects of this machine: for every FDE of each object and a spread of
//! pcs in it, the FDE the `.eh_frame_hdr` search finds and the CFA,
//! return-address and frame-pointer rules must equal gimli's unwind row,
//! or the interpreter must refuse with one of its documented refusals.
//! Objects missing here are skipped with a printed reason.
//!
//!   cargo test --release --test cfi_oracle -- --nocapture

use gimli::{BaseAddresses, CfaRule, EhFrame, RegisterRule, UnwindContext, UnwindSection};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::BTreeMap;
use unwind_logic::cfi::{self, Arch, Cfa, Reader, Refusal, Rule, Saved, UserBytes, MAX_READS};
use unwind_logic::walk::WordSize;

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
    pcs: u64,
    /// Rules equal to gimli's and usable by a step.
    agreed: u64,
    /// Rules equal to gimli's, refused by `Row::check`, by cause (count,
    /// an example).
    agreed_refused: BTreeMap<String, (u64, String)>,
    /// The interpreter refused before it had a row, by refusal.
    refused: BTreeMap<String, (u64, String)>,
    /// Rows whose CFA is the PLT pattern.
    plt_rows: u64,
    /// gimli failed where the interpreter did not.
    gimli_only_err: u64,
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
    let count = |m: &mut BTreeMap<String, (u64, String)>, e: Refusal, pc: u64| {
        let slot = m.entry(format!("{e:?}")).or_insert((0, name(pc)));
        slot.0 += 1;
    };
    let mut ctx = UnwindContext::new();
    let mut t = Tally::default();
    let mut entries = eh_frame.entries(&bases);
    while let Some(entry) = entries.next().map_err(|e| format!("gimli: {e}"))? {
        let gimli::CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) = partial.parse(EhFrame::cie_from_offset) else {
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
                    (
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
                    )
                });
            let mut r = Reader::new(&mut image);
            let ours = (|| {
                let h = cfi::read_hdr(&mut r, hdr.address(), ws)?;
                let at = cfi::search(&mut r, &h, ws, pc)?;
                let f = cfi::read_fde(&mut r, h.eh_frame, at, ws)?;
                Ok::<_, Refusal>((at, cfi::row_at(&mut r, &f, ws, pc)?))
            })();
            t.max_reads = t.max_reads.max(r.reads());
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
                            Err(e) => count(&mut t.agreed_refused, e, pc),
                        }
                    }
                }
                (Err(e), _) => count(&mut t.refused, e, pc),
                (Ok(_), Err(_)) => t.gimli_only_err += 1,
            }
        }
    }
    Ok(t)
}

#[test]
fn real_objects_agree_with_gimli() {
    let candidates = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/i386-linux-gnu/libc.so.6",
        "/usr/lib32/libc.so.6",
        "/usr/lib32/libm.so.6",
        "/usr/lib32/ld-linux.so.2",
        "/lib/ld-linux.so.2",
        concat!(env!("CARGO_MANIFEST_DIR"), "/build/perf/perf"),
        "/work/main/build/perf/perf",
        // The vDSOs of this project's kernel build (its kernel-c tree).
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
    ];
    let mut seen = std::collections::BTreeSet::new();
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in candidates {
        let Ok(real) = std::fs::canonicalize(path) else {
            println!("cfi oracle: {path}: skipped (not on this machine)");
            continue;
        };
        if !seen.insert(real.clone()) {
            println!(
                "cfi oracle: {path}: skipped (same file as {})",
                real.display()
            );
            continue;
        }
        match check_object(path) {
            Err(why) => println!("cfi oracle: {path}: skipped ({why})"),
            Ok(t) => {
                checked += 1;
                println!(
                    "cfi oracle: {path}: {} FDEs, {} pcs, {} agreed and usable ({} steps checked), \
                     {} gimli-only errors, {} mismatches, at most {} reads (bound {MAX_READS})",
                    t.fdes,
                    t.pcs,
                    t.agreed,
                    t.steps_agreed,
                    t.gimli_only_err,
                    t.mismatches.len(),
                    t.max_reads
                );
                println!("    PLT-pattern rows: {}", t.plt_rows);
                for (cause, (n, eg)) in &t.agreed_refused {
                    println!("    rules agreed, step refused: {cause}: {n} (e.g. {eg})");
                }
                for (cause, (n, eg)) in &t.refused {
                    println!("    refused: {cause}: {n} (e.g. {eg})");
                }
                for m in t.mismatches.iter().take(10) {
                    println!("    MISMATCH {m}");
                }
                if !t.mismatches.is_empty() || t.gimli_only_err != 0 {
                    failures.push(path);
                }
                // Most pcs of a real object must be usable.
                if t.agreed * 10 < t.pcs * 9 {
                    failures.push(path);
                }
            }
        }
    }
    assert!(checked > 0, "no object to check on this machine");
    assert!(
        failures.is_empty(),
        "disagreements with gimli: {failures:?}"
    );
}
