// SPDX-License-Identifier: GPL-2.0

//! What the host tests share.

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
