// SPDX-License-Identifier: GPL-2.0

//! Host build of the unwinder's kernel-independent rules.  The code is
//! `src/logic/`, exactly as the kernel compiles it; this root only makes it
//! a `no_std` library so that `cargo test` can exercise it.

#![no_std]

#[path = "../src/logic/mod.rs"]
mod logic;

pub use logic::*;

extern crate alloc;

/// The host's storage of compiled rows: a `Vec` (the kernel uses `KVec`).
impl<T> logic::rows::Store<T> for alloc::vec::Vec<T> {
    fn items(&self) -> &[T] {
        self
    }
    fn items_mut(&mut self) -> &mut [T] {
        self
    }
    fn push(&mut self, v: T) -> bool {
        alloc::vec::Vec::push(self, v);
        true
    }
    fn truncate(&mut self, n: usize) {
        alloc::vec::Vec::truncate(self, n)
    }
    fn extend(&mut self, n: usize, v: T) -> bool
    where
        T: Clone,
    {
        let len = self.len();
        self.resize(len + n, v);
        true
    }
}
