// SPDX-License-Identifier: GPL-2.0

//! What the host tests share.
// Each test uses a part.
#![allow(dead_code, unused_macros)]

/// The instruction, stack and frame pointers where it is used (a macro,
/// so that they are the calling function's own): x86-64 only.
#[macro_export]
macro_rules! here {
    () => {{
        let (ip, sp, fp): (u64, u64, u64);
        // SAFETY: reads registers only.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {fp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                fp = out(reg) fp,
                options(nomem, nostack, preserves_flags)
            );
        }
        (ip, sp, fp)
    }};
}

/// Implement `MaskWord` for a newtype `$w` around an `AtomicUsize` (std's
/// or loom's), with sequentially consistent orderings: the kernel's
/// value-returning atomics are full barriers.
#[macro_export]
macro_rules! mask_word {
    ($w:ident, $atomic:ty) => {
        struct $w($atomic);

        impl unwind_logic::mask::MaskWord for $w {
            fn load(&self) -> usize {
                self.0.load(SeqCst)
            }
            fn store(&self, v: usize) {
                self.0.store(v, SeqCst)
            }
            fn fetch_or(&self, b: usize) -> usize {
                self.0.fetch_or(b, SeqCst)
            }
            fn fetch_andnot(&self, b: usize) -> usize {
                self.0.fetch_and(!b, SeqCst)
            }
            fn try_cmpxchg(&self, old: &mut usize, new: usize) -> bool {
                match self.0.compare_exchange(*old, new, SeqCst, SeqCst) {
                    Ok(_) => true,
                    Err(v) => {
                        *old = v;
                        false
                    }
                }
            }
        }
    };
}

/// Implement `cookie::Cell32` for a newtype `$c` around an `AtomicU32`
/// (std's or loom's), with sequentially consistent orderings.  The kernel
/// uses relaxed atomics: every access is on one CPU (the task's, by the
/// task or an interrupt or NMI that hit it), where program order is the
/// order seen; on the host, where the model checker runs the contexts on
/// different threads, SeqCst stands for that single-CPU order.
#[macro_export]
macro_rules! cell32 {
    ($c:ident, $atomic:ty) => {
        struct $c($atomic);

        impl unwind_logic::cookie::Cell32 for $c {
            fn load(&self) -> u32 {
                self.0.load(SeqCst)
            }
            fn store(&self, v: u32) {
                self.0.store(v, SeqCst)
            }
            fn cmpxchg(&self, old: u32, new: u32) -> bool {
                self.0.compare_exchange(old, new, SeqCst, SeqCst).is_ok()
            }
        }
    };
}

/// The mask part of the C inline `unwind_reset_info()`
/// (`include/linux/unwind_deferred.h`), which the return to user space
/// runs on both kernels; transcribed here for the model checker:
///
/// ```c
/// unsigned long bits = atomic_long_read(&info->unwind_mask);
/// if (likely(!bits))
///         return;
/// do {
///         if (bits & UNWIND_PENDING)
///                 return;
/// } while (!atomic_long_try_cmpxchg(&info->unwind_mask, &bits, 0UL));
/// /* then the cookie, nr_entries and unwind_completed are zeroed */
/// ```
///
/// Returns whether it cleared the word (and so the rest).
#[allow(dead_code)]
pub fn unwind_reset_info(mask: &impl unwind_logic::mask::MaskWord) -> bool {
    let mut bits = mask.load();
    if bits == 0 {
        return false;
    }
    loop {
        if bits & unwind_logic::mask::PENDING != 0 {
            return false;
        }
        if mask.try_cmpxchg(&mut bits, 0) {
            return true;
        }
    }
}

/// The kernel's way of finding the tables of the object that maps `pc`,
/// over this process's mappings (`/proc/self/maps` as (start, end, file
/// offset, name)): the mapping of `pc`, the same file's mapping of
/// offset 0 (its ELF header; the vDSO's own base), `elf::locate` and
/// `cfi::read_hdr` there.  The mapping's range and its hdr, if any.
pub fn tables_of<M: unwind_logic::cfi::UserBytes>(
    maps: &[(u64, u64, u64, String)],
    r: &mut unwind_logic::cfi::Reader<'_, M>,
    pc: u64,
    ws: unwind_logic::walk::WordSize,
) -> Option<(u64, u64, Option<unwind_logic::cfi::Hdr>)> {
    use unwind_logic::{cfi, elf};
    let &(start, end, _, ref name) = maps.iter().find(|m| m.0 <= pc && pc < m.1)?;
    let base = if name == "[vdso]" {
        Some(start)
    } else if name.starts_with('/') {
        maps.iter().find(|m| m.3 == *name && m.2 == 0).map(|m| m.0)
    } else {
        None
    };
    let hdr = base
        .and_then(|b| elf::locate(r.mem(), b, ws))
        .and_then(|a| cfi::read_hdr(r, a, ws).ok());
    Some((start, end, hdr))
}
