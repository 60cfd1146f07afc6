// SPDX-License-Identifier: GPL-2.0

//! The word size of a user context, shared by the walk, the unwind-table
//! interpreter, the compiled rows and the ELF reader.

/// Word size of the user context being walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WordSize {
    /// A 64-bit task.
    W8,
    /// A compat (32-bit) task.
    W4,
}

impl WordSize {
    /// Size in bytes.
    #[inline]
    pub const fn bytes(self) -> u64 {
        match self {
            WordSize::W8 => 8,
            WordSize::W4 => 4,
        }
    }

    /// Reduce an address to the width of this word size.
    #[inline]
    pub const fn wrap(self, v: u64) -> u64 {
        match self {
            WordSize::W8 => v,
            WordSize::W4 => v & 0xffff_ffff,
        }
    }
}
