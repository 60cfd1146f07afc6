// SPDX-License-Identifier: GPL-2.0

//! The rules of deferred user unwinding that need no kernel: the
//! frame-pointer walk, the context cookie, the per-task request bitmask, and
//! one unwind step by a user object's `.eh_frame` call-frame information,
//! where an object keeps it, and a walk that prefers it to frame pointers.
//!
//! This module uses `core` only.  It is compiled into the kernel as part of
//! the unwinder and, unchanged, into the host crate `unwind-logic`, where
//! `cargo test` checks the same rules with unit tests, property tests, a
//! fuzzer and a model checker.

pub mod cfi;
pub mod cookie;
pub mod elf;
pub mod mask;
pub mod rows;
pub mod walk;
pub mod word;
// Test data: on the host (where no kernel configuration is set) and in a
// kernel with the KUnit tests, not in a production kernel.
#[cfg(any(not(CONFIG_UNWIND_USER_RUST), CONFIG_UNWIND_USER_RUST_KUNIT_TEST))]
pub mod cfi_cases;
#[cfg(any(not(CONFIG_UNWIND_USER_RUST), CONFIG_UNWIND_USER_RUST_KUNIT_TEST))]
pub mod walk_cases;
