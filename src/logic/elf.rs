// SPDX-License-Identifier: GPL-2.0

//! Where a mapped ELF object keeps its `.eh_frame_hdr`: read from the
//! object's own ELF header and program headers in (untrusted) user memory.
//!
//! The caller knows where the object's first page is mapped (the mapping of
//! file offset 0, or the vDSO's base); [`locate`] checks the ELF header
//! (magic, class of the task's word size, little-endian, x86 machine,
//! executable or shared object), reads at most [`MAX_PHDRS`] program
//! headers one by one, and returns the address of the `PT_GNU_EH_FRAME`
//! segment relocated by the load bias.  The bias is the base minus the
//! page of the first `PT_LOAD`, which must map file offset 0 (as the
//! kernel's ELF loader and the dynamic loader map it).  Any failed read or
//! inconsistency gives `None`: the object has no usable tables.
//!
//! Like [`super::cfi`], this uses `core` only, allocates nothing, never
//! panics, and does at most `2 + MAX_PHDRS` reads.

use super::cfi::UserBytes;
use super::word::WordSize;

/// Program headers looked at, at most.
pub const MAX_PHDRS: u16 = 64;

const PT_LOAD: u64 = 1;
const PT_GNU_EH_FRAME: u64 = 0x6474_e550;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const EM_386: u16 = 3;
const EM_X86_64: u16 = 62;
const PAGE_MASK: u64 = !0xfff;

/// Little-endian fields of a header read into `b`.
fn u16_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u64::from(u16::from_le_bytes([*s.first()?, *s.get(1)?])))
}

// By `try_into`, not `copy_from_slice`: no panic path (with its printk)
// under the object lookup's frames (docs/design.md, "Stack use").
fn u32_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u64::from(u32::from_le_bytes(s.try_into().ok()?)))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

/// The fields of an ELF class: offsets in the ELF header and in a program
/// header, and the sizes.
struct Class {
    class: u8,
    machine: u16,
    ehdr_size: usize,
    phoff: usize,
    phentsize_at: usize,
    phnum_at: usize,
    phent: usize,
    p_offset: usize,
    p_vaddr: usize,
    p_filesz: usize,
    word: fn(&[u8], usize) -> Option<u64>,
}

const ELF64: Class = Class {
    class: 2,
    machine: EM_X86_64,
    ehdr_size: 64,
    phoff: 32,
    phentsize_at: 54,
    phnum_at: 56,
    phent: 56,
    p_offset: 8,
    p_vaddr: 16,
    p_filesz: 32,
    word: u64_at,
};

const ELF32: Class = Class {
    class: 1,
    machine: EM_386,
    ehdr_size: 52,
    phoff: 28,
    phentsize_at: 42,
    phnum_at: 44,
    phent: 32,
    p_offset: 4,
    p_vaddr: 8,
    p_filesz: 16,
    word: u32_at,
};

/// `PT_LOAD` segments kept by [`layout`], at most: an object with more
/// has no [`Layout::file_offset`] (the loaders' objects have four).
pub const MAX_LOADS: usize = 8;

/// A `PT_LOAD` segment: where it is from the object's base (the page of
/// its first `PT_LOAD`) and where its bytes are in the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// Its first byte, from the object's base.
    pub at: u64,
    /// Its file offset.
    pub offset: u64,
    /// Its bytes in the file (`p_filesz`).
    pub size: u64,
}

/// Where an ELF object keeps its tables, from its base: the same at any
/// load address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// The `.eh_frame_hdr`, from the base (`PT_GNU_EH_FRAME`'s `p_vaddr`
    /// less the first `PT_LOAD`'s page).
    pub hdr: u64,
    /// Its first `PT_LOAD`s, in the order of the program headers.
    pub loads: [Load; MAX_LOADS],
    /// How many `PT_LOAD`s it has; more than [`MAX_LOADS`]: no
    /// [`Layout::file_offset`].
    pub nr_loads: usize,
}

impl Layout {
    /// The file offset of the `len` bytes at `at` from the base, if one
    /// `PT_LOAD` holds them all in the file (not in its zero-filled
    /// tail); what a read of the object's memory reads there, for an
    /// object whose loaded segments are the file's bytes.
    pub fn file_offset(&self, at: u64, len: u64) -> Option<u64> {
        let end = at.checked_add(len)?;
        // More loads than kept: `get` refuses the range.
        self.loads.get(..self.nr_loads)?.iter().find_map(|l| {
            let off = at.checked_sub(l.at)?;
            (end <= l.at.checked_add(l.size)?).then_some(l.offset.checked_add(off)?)
        })
    }
}

/// The address of the `.eh_frame_hdr` of the ELF object whose first page
/// is mapped at `base`, for a task of word size `ws`; `None` if the object
/// is not a well-formed x86 ELF object of that class or has no
/// `PT_GNU_EH_FRAME`.
pub fn locate<M: UserBytes>(mem: &mut M, base: u64, ws: WordSize) -> Option<u64> {
    let (hdr, _) = scan(mem, base, ws, None)?;
    let hdr = base.wrapping_add(hdr);
    match ws {
        WordSize::W8 => Some(hdr),
        WordSize::W4 => Some(hdr & 0xffff_ffff),
    }
}

/// The [`Layout`] of the ELF object whose first page is at `base` in
/// `mem` (a process's memory, or the file itself at 0: the ELF header and
/// the program headers are at their file offsets from the base in both),
/// into `out`; `None` as for [`locate`].
pub fn layout<M: UserBytes>(mem: &mut M, base: u64, ws: WordSize, out: &mut Layout) -> Option<()> {
    let (hdr, nr_loads) = scan(mem, base, ws, Some(&mut out.loads))?;
    out.hdr = hdr;
    out.nr_loads = nr_loads;
    Some(())
}

/// The `.eh_frame_hdr` from the base and the number of `PT_LOAD`s of the
/// object at `base`; the first [`MAX_LOADS`] into `loads` if given.  Out
/// of line (also where optimised for speed): its frame is beside the
/// object lookup's other reads, not in the frame over them.
#[inline(never)]
fn scan<M: UserBytes>(
    mem: &mut M,
    base: u64,
    ws: WordSize,
    mut loads: Option<&mut [Load; MAX_LOADS]>,
) -> Option<(u64, usize)> {
    let l = match ws {
        WordSize::W8 => &ELF64,
        WordSize::W4 => &ELF32,
    };
    // One buffer for the ELF header, then each program header (the
    // header's fields are read first).
    let mut buf = [0u8; 64];
    let ehdr = buf.get_mut(..l.ehdr_size)?;
    mem.read_bytes(base, ehdr)?;
    if ehdr.get(..4)? != b"\x7fELF" || *ehdr.get(4)? != l.class || *ehdr.get(5)? != 1 {
        return None;
    }
    let e_type = u16_at(ehdr, 16)?;
    if (e_type != u64::from(ET_EXEC) && e_type != u64::from(ET_DYN))
        || u16_at(ehdr, 18)? != u64::from(l.machine)
        || u16_at(ehdr, l.phentsize_at)? != l.phent as u64
    {
        return None;
    }
    let phoff = (l.word)(ehdr, l.phoff)?;
    let phnum = u16_at(ehdr, l.phnum_at)?;
    if phnum > u64::from(MAX_PHDRS) {
        return None;
    }
    let mut first_load = None;
    let mut eh_frame = None;
    let mut nr_loads = 0usize;
    let ph = buf.get_mut(..l.phent)?;
    for i in 0..phnum {
        let at = base
            .checked_add(phoff)?
            .checked_add(i.checked_mul(l.phent as u64)?)?;
        mem.read_bytes(at, ph)?;
        let p_type = u32_at(ph, 0)?;
        let vaddr = (l.word)(ph, l.p_vaddr)?;
        if p_type == PT_LOAD {
            let offset = (l.word)(ph, l.p_offset)?;
            let page = match first_load {
                Some(page) => page,
                None => {
                    // It must map the ELF header: file offset 0, page 0.
                    if offset & PAGE_MASK != 0 {
                        return None;
                    }
                    first_load = Some(vaddr & PAGE_MASK);
                    vaddr & PAGE_MASK
                }
            };
            if let Some(load) = loads.as_mut().and_then(|v| v.get_mut(nr_loads)) {
                *load = Load {
                    at: vaddr.wrapping_sub(page),
                    offset,
                    size: (l.word)(ph, l.p_filesz)?,
                };
            }
            // Saturating: no overflow panic under an object's lookup.
            nr_loads = nr_loads.saturating_add(1);
        } else if p_type == PT_GNU_EH_FRAME {
            eh_frame = Some(vaddr);
        }
    }
    let hdr = eh_frame?.wrapping_sub(first_load?);
    match ws {
        WordSize::W8 => Some((hdr, nr_loads)),
        WordSize::W4 => Some((hdr & 0xffff_ffff, nr_loads)),
    }
}
