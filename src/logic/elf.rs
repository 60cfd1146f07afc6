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

fn u32_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(4)?)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Some(u64::from(u32::from_le_bytes(a)))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// The fields of an ELF class: offsets in the ELF header and in a program
/// header, and the sizes.
struct Layout {
    class: u8,
    machine: u16,
    ehdr_size: usize,
    phoff: usize,
    phentsize_at: usize,
    phnum_at: usize,
    phent: usize,
    p_offset: usize,
    p_vaddr: usize,
    word: fn(&[u8], usize) -> Option<u64>,
}

const ELF64: Layout = Layout {
    class: 2,
    machine: EM_X86_64,
    ehdr_size: 64,
    phoff: 32,
    phentsize_at: 54,
    phnum_at: 56,
    phent: 56,
    p_offset: 8,
    p_vaddr: 16,
    word: u64_at,
};

const ELF32: Layout = Layout {
    class: 1,
    machine: EM_386,
    ehdr_size: 52,
    phoff: 28,
    phentsize_at: 42,
    phnum_at: 44,
    phent: 32,
    p_offset: 4,
    p_vaddr: 8,
    word: u32_at,
};

/// The address of the `.eh_frame_hdr` of the ELF object whose first page
/// is mapped at `base`, for a task of word size `ws`; `None` if the object
/// is not a well-formed x86 ELF object of that class or has no
/// `PT_GNU_EH_FRAME`.
pub fn locate<M: UserBytes>(mem: &mut M, base: u64, ws: WordSize) -> Option<u64> {
    let l = match ws {
        WordSize::W8 => &ELF64,
        WordSize::W4 => &ELF32,
    };
    let mut ehdr = [0u8; 64];
    let ehdr = ehdr.get_mut(..l.ehdr_size)?;
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
    let mut ph = [0u8; 56];
    let ph = ph.get_mut(..l.phent)?;
    for i in 0..phnum {
        let at = base
            .checked_add(phoff)?
            .checked_add(i.checked_mul(l.phent as u64)?)?;
        mem.read_bytes(at, ph)?;
        let p_type = u32_at(ph, 0)?;
        let vaddr = (l.word)(ph, l.p_vaddr)?;
        if p_type == PT_LOAD && first_load.is_none() {
            // It must map the ELF header: file offset 0, page 0.
            if (l.word)(ph, l.p_offset)? & PAGE_MASK != 0 {
                return None;
            }
            first_load = Some(vaddr);
        } else if p_type == PT_GNU_EH_FRAME {
            eh_frame = Some(vaddr);
        }
    }
    let bias = base.wrapping_sub(first_load? & PAGE_MASK);
    let hdr = bias.wrapping_add(eh_frame?);
    match ws {
        WordSize::W8 => Some(hdr),
        WordSize::W4 => Some(hdr & 0xffff_ffff),
    }
}
