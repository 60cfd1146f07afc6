// SPDX-License-Identifier: GPL-2.0

//! The CFI interpreter walking this very test's stack, as the kernel will
//! walk a task's: each object's `.eh_frame_hdr` found from its
//! `PT_GNU_EH_FRAME` program header (here through `dl_iterate_phdr()`),
//! memory read fault-tolerantly (here through `/proc/self/mem`), one
//! `cfi::step` per frame from the captured (ip, sp, fp).  The return
//! addresses must equal those of libgcc's `_Unwind_Backtrace()`, frame for
//! frame, to the end of the stack.  The test binary and Debian's libc are
//! built without frame pointers, so a frame-pointer walk could not do this.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

mod common;

use std::ffi::{c_int, c_void};
use std::fs::File;
use std::os::unix::fs::FileExt;
use unwind_logic::cfi::{self, Frame, Step, UserBytes};
use unwind_logic::rows::{FdeEntry, Found, ObjectRows, PackedRow};
use unwind_logic::walk::{self, Stop, TableStats, Tables, UserMemory, WordSize};
use unwind_logic::walk_cases;

/// `/proc/self/mem`: reads of unmapped addresses fail, never fault.
struct SelfMem(File);

impl UserBytes for SelfMem {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        self.0.read_exact_at(buf, addr).ok()
    }
}

impl UserMemory for SelfMem {
    fn read_word(&mut self, addr: u64, ws: WordSize) -> Option<u64> {
        let mut b = [0u8; 8];
        self.0
            .read_exact_at(&mut b[..ws.bytes() as usize], addr)
            .ok()?;
        Some(u64::from_le_bytes(b))
    }
}

/// Compiled rows of an object, as the kernel keeps them.
type Rows = ObjectRows<Vec<FdeEntry>, Vec<PackedRow>, Vec<unwind_logic::cfi::Probe>>;

/// The kernel's way of finding an object's tables, over
/// `/proc/self/maps`: the mapping of the pc, the same file's mapping of
/// offset 0 (the ELF header), `elf::locate` and `cfi::read_hdr` there;
/// remembered per mapping with the object's compiled rows, as the kernel
/// remembers them per mm.
struct MapsTables {
    maps: Vec<(u64, u64, u64, String)>,
    memo: Vec<(u64, u64, Option<cfi::Hdr>, Rows)>,
    lookups: u32,
    /// FDEs compiled (lookups that missed the rows).
    compiled: u32,
    /// The interpreter's state, for every compilation (as the kernel's).
    scratch: Box<cfi::Scratch>,
}

impl MapsTables {
    fn new() -> Self {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let maps = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (a, b) = f.first()?.split_once('-')?;
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                    u64::from_str_radix(f.get(2)?, 16).ok()?,
                    f.get(5).map_or(String::new(), |s| s.to_string()),
                ))
            })
            .collect();
        MapsTables {
            maps,
            memo: Vec::new(),
            lookups: 0,
            compiled: 0,
            scratch: Box::new(cfi::Scratch::new()),
        }
    }
}

impl Tables for MapsTables {
    fn row<M: UserBytes>(
        &mut self,
        r: &mut cfi::Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Option<Result<Found, cfi::Cause>> {
        let i = match self.memo.iter().position(|m| m.0 <= pc && pc < m.1) {
            Some(i) => i,
            None => {
                self.lookups += 1;
                let (start, end, hdr) = common::tables_of(&self.maps, r, pc, ws)?;
                self.memo.push((start, end, hdr, Rows::default()));
                self.memo.len() - 1
            }
        };
        let m = &mut self.memo[i];
        let hdr = m.2?;
        if let Some(found) = m.3.lookup(pc) {
            return Some(Ok(found));
        }
        self.compiled += 1;
        Some(
            m.3.fill(r, &hdr, ws, pc, &mut self.scratch)
                .map_err(|e| e.cause()),
        )
    }
}

#[repr(C)]
struct Phdr {
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_paddr: u64,
    p_filesz: u64,
    p_memsz: u64,
    p_align: u64,
}

#[repr(C)]
struct DlPhdrInfo {
    dlpi_addr: u64,
    dlpi_name: *const i8,
    dlpi_phdr: *const Phdr,
    dlpi_phnum: u16,
}

extern "C" {
    fn dl_iterate_phdr(
        cb: extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> c_int,
        data: *mut c_void,
    ) -> c_int;
    fn _Unwind_Backtrace(
        cb: extern "C" fn(*mut c_void, *mut c_void) -> c_int,
        data: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

const PT_LOAD: u32 = 1;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;

/// A loaded object: its executable ranges and its hdr.
struct Obj {
    text: Vec<(u64, u64)>,
    hdr: Option<u64>,
}

extern "C" fn each_object(info: *mut DlPhdrInfo, _size: usize, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our `data`.
    let (info, objs) = unsafe { (&*info, &mut *(data as *mut Vec<Obj>)) };
    let mut obj = Obj {
        text: Vec::new(),
        hdr: None,
    };
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
        match ph.p_type {
            PT_LOAD if ph.p_flags & 1 != 0 => obj.text.push((start, start + ph.p_memsz)),
            PT_GNU_EH_FRAME => obj.hdr = Some(start),
            _ => {}
        }
    }
    objs.push(obj);
    0
}

extern "C" fn each_frame(ctx: *mut c_void, data: *mut c_void) -> c_int {
    // SAFETY: `data` is our Vec; ctx is libgcc's context.
    let (ips, ip) = unsafe { (&mut *(data as *mut Vec<u64>), _Unwind_GetIP(ctx)) };
    ips.push(ip as u64);
    0
}

/// The objects' hdrs by code range.
fn objects() -> Vec<Obj> {
    let mut objs: Vec<Obj> = Vec::new();
    // SAFETY: the callback only reads what dl_iterate_phdr passes.
    unsafe { dl_iterate_phdr(each_object, &mut objs as *mut Vec<Obj> as *mut c_void) };
    objs
}

/// Walk the stack from (ip, sp, fp) with `cfi::step`: the return
/// addresses, and how the walk ended.
fn cfi_walk(objs: &[Obj], ip: u64, sp: u64, fp: u64) -> (Vec<u64>, String) {
    let mut mem = SelfMem(File::open("/proc/self/mem").unwrap());
    let mut f = Frame {
        ip,
        sp,
        fp: Some(fp),
        ip_is_return_address: false,
        bx: unwind_logic::cfi::Saved::Unknown,
    };
    let mut ips = vec![ip];
    for _ in 0..256 {
        let pc = if f.ip_is_return_address {
            f.ip - 1
        } else {
            f.ip
        };
        let Some(hdr) = objs
            .iter()
            .find(|o| o.text.iter().any(|&(s, e)| s <= pc && pc < e))
            .and_then(|o| o.hdr)
        else {
            return (ips, format!("no object with a hdr for {pc:#x}"));
        };
        match cfi::step(&mut mem, hdr, WordSize::W8, &f) {
            Ok(Step::Caller(c)) => {
                ips.push(c.ip);
                f = c;
            }
            Ok(Step::EndOfStack) => return (ips, "end of stack".into()),
            Err(r) => return (ips, format!("refused: {r:?}")),
        }
    }
    (ips, "256 frames".into())
}

/// Capture this frame's registers, walk from them with the tables, and
/// have libgcc walk from here too.
#[inline(never)]
fn capture(objs: &[Obj]) -> (Vec<u64>, String, Vec<u64>) {
    let (ip, sp, fp) = here!();
    // Everything below runs on stack below `sp`: the frames above stay.
    let (ours, end) = cfi_walk(objs, ip, sp, fp);
    let mut theirs: Vec<u64> = Vec::new();
    // SAFETY: the callback only pushes to our Vec.
    unsafe { _Unwind_Backtrace(each_frame, &mut theirs as *mut Vec<u64> as *mut c_void) };
    (ours, end, theirs)
}

#[inline(never)]
fn recurse(n: u32, objs: &[Obj]) -> (Vec<u64>, String, Vec<u64>) {
    let r = if n == 0 {
        capture(objs)
    } else {
        recurse(std::hint::black_box(n - 1), objs)
    };
    // Not a tail call.
    std::hint::black_box(r)
}

#[test]
fn walk_own_stack_like_libgcc() {
    let objs = objects();
    assert!(objs.iter().any(|o| o.hdr.is_some()), "no PT_GNU_EH_FRAME");
    let (ours, end, mut theirs) = recurse(std::hint::black_box(12), &objs);
    // libgcc reports the outermost frame (undefined return address) as ip 0.
    if theirs.last() == Some(&0) {
        theirs.pop();
    }
    println!(
        "cfi live: {} frames by the tables ({end}), {} by libgcc",
        ours.len(),
        theirs.len()
    );
    // ours[0] is inside `capture`, theirs[0] is capture's call of
    // _Unwind_Backtrace: both in `capture`; from there on, the callers.
    let n = ours.len().min(theirs.len());
    assert!(n > 14, "ours {ours:x?} theirs {theirs:x?}");
    assert_eq!(
        ours[1..n],
        theirs[1..n],
        "ours {ours:x?} theirs {theirs:x?}"
    );
    // The tables reach the end of the stack (thread start in libc).
    assert_eq!(end, "end of stack", "ours {ours:x?} theirs {theirs:x?}");
    assert_eq!(
        ours.len(),
        theirs.len(),
        "ours {ours:x?} theirs {theirs:x?}"
    );
}

/// `walk::walk_tables`, the kernel's walk, with the kernel's way of
/// finding tables (`elf::locate` on the mapped ELF headers): from a frame
/// of this test, the same return addresses as libgcc to the end of the
/// stack, every step by the tables, one lookup per mapping.
#[inline(never)]
fn capture_walk(t: &mut MapsTables) -> (Vec<u64>, Stop, TableStats, Vec<u64>) {
    let (ip, sp, fp) = here!();
    let regs = walk_cases::regs64(ip, sp, fp);
    let mut out = [0u64; 510];
    let mut stats = TableStats::default();
    let mut mem = SelfMem(File::open("/proc/self/mem").unwrap());
    let (n, stop) = walk::walk_tables(&regs, &mut mem, t, &mut out, &mut stats);
    let mut theirs: Vec<u64> = Vec::new();
    // SAFETY: the callback only pushes to our Vec.
    unsafe { _Unwind_Backtrace(each_frame, &mut theirs as *mut Vec<u64> as *mut c_void) };
    (out[..n].to_vec(), stop, stats, theirs)
}

#[inline(never)]
fn recurse_walk(n: u32, t: &mut MapsTables) -> (Vec<u64>, Stop, TableStats, Vec<u64>) {
    let r = if n == 0 {
        capture_walk(t)
    } else {
        recurse_walk(std::hint::black_box(n - 1), t)
    };
    std::hint::black_box(r)
}

#[test]
fn walk_tables_own_stack_like_libgcc() {
    let mut t = MapsTables::new();
    let (ours, stop, stats, mut theirs) = recurse_walk(std::hint::black_box(12), &mut t);
    if theirs.last() == Some(&0) {
        theirs.pop();
    }
    println!(
        "walk_tables live: {} entries ({stop:?}), {stats:?}, {} lookups; libgcc {}",
        ours.len(),
        t.lookups,
        theirs.len()
    );
    assert_eq!(stop, Stop::EndOfStack, "ours {ours:x?} theirs {theirs:x?}");
    assert_eq!(
        ours.len(),
        theirs.len(),
        "ours {ours:x?} theirs {theirs:x?}"
    );
    assert_eq!(ours[1..], theirs[1..], "ours {ours:x?} theirs {theirs:x?}");
    assert_eq!(stats.table_frames as usize, ours.len() - 1, "{stats:?}");
    assert_eq!(stats.fp_frames, 0, "{stats:?}");
    assert_eq!(stats.refused, [0; cfi::Cause::COUNT], "{stats:?}");
    // One lookup per mapping met (the test binary, libc), not per frame.
    assert!(
        t.lookups <= t.memo.len() as u32 && t.lookups < 6,
        "{}",
        t.lookups
    );
    // A second walk from the same place compiles nothing: every row is
    // remembered, and the walk reads the stack only (one or two words a
    // frame).
    let compiled = t.compiled;
    let (again, stop2, stats2, mut theirs2) = recurse_walk(std::hint::black_box(12), &mut t);
    if theirs2.last() == Some(&0) {
        theirs2.pop();
    }
    assert_eq!(stop2, Stop::EndOfStack);
    assert_eq!(again[1..], theirs2[1..]);
    assert_eq!(t.compiled, compiled, "second walk compiled FDEs again");
    assert!(
        stats2.reads <= 2 * stats2.table_frames,
        "{} reads for {} frames",
        stats2.reads,
        stats2.table_frames
    );
}
