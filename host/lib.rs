// SPDX-License-Identifier: GPL-2.0

//! Host build of the unwinder's kernel-independent rules.  The code is
//! `src/logic/`, exactly as the kernel compiles it; this root only makes it
//! a `no_std` library so that `cargo test` can exercise it.

#![no_std]

#[path = "../src/logic/mod.rs"]
mod logic;

pub use logic::*;
