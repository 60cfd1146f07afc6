// SPDX-License-Identifier: GPL-2.0

//! Deferred user-space unwinding, in Rust (`CONFIG_UNWIND_USER_RUST`).
//!
//! This object provides the C API of `include/linux/unwind_user.h` and
//! `include/linux/unwind_deferred.h` in place of `kernel/unwind/user.c` and
//! `kernel/unwind/deferred.c`, and perf's deferred-callchain glue in place
//! of its part of `kernel/events/core.c`.  The per-task state is
//! upstream's `struct unwind_task_info`, so the C inline
//! `unwind_reset_info()` on the return-to-user path stays as it is.
//!
//! One file per concern:
//!
//! - [`logic`]: the rules that need no kernel (the frame-pointer walk, the
//!   cookie format, the request bitmask), shared with the host tests;
//! - [`walk`]: `unwind_user()`, the walk over the current task's stack;
//! - [`cache`]: the per-task page of entries and `unwind_user_faultable()`;
//! - `tables`: the objects' unwind tables for the deferred walk
//!   (`CONFIG_UNWIND_USER_RUST_TABLES`), its switch and counters;
//! - [`cookie`]: the per-entry context cookie;
//! - [`deferred`]: registering callbacks, requests, the task_work that runs
//!   them under SRCU, cancel and the exit path;
//! - [`perf`]: perf's side: deferring a sample's user callchain, and
//!   writing `PERF_RECORD_CALLCHAIN_DEFERRED`;
//! - [`ffi`]: the `extern "C"` functions, each with the C caller's duties.
//!
//! Deliberate differences from upstream C, all at the edges of the
//! contract, are listed in the module that makes them.

/// The prefix of `pr_*!` messages (a built-in object has no `module!`).
const __LOG_PREFIX: &[u8] = b"unwind_rust\0";

pub mod logic;

mod cache;
mod cookie;
mod deferred;
pub mod ffi;
pub mod perf;
#[cfg(CONFIG_UNWIND_USER_RUST_TABLES)]
mod tables;
mod task;
mod walk;
