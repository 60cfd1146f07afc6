// SPDX-License-Identifier: GPL-2.0

//! The deferred-callchain side of perf, in Rust.
//!
//! Two halves, the same as upstream's in `kernel/events/core.c`:
//!
//! - On the sample path, [`perf_callchain_rust`] decides whether a sample's
//!   user callchain is deferred.  If it is, the sample's callchain ends with
//!   `PERF_CONTEXT_USER_DEFERRED` and the kernel entry's cookie, placed by
//!   `get_perf_callchain()` (the callchain buffers stay perf's), and the
//!   user stack is requested from [`crate::deferred`].
//! - When the task is about to return to user space, [`deferred_callback`]
//!   runs once per kernel entry and writes one `PERF_RECORD_CALLCHAIN_DEFERRED`
//!   (`header, cookie, nr, ips[nr]`, `PERF_RECORD_MISC_USER`, the sample-id
//!   trailer when `sample_id_all` is set) to every `defer_output` event that
//!   side-band records reach: the task's context and the CPU's.
//!
//! The records are upstream's byte for byte.  C keeps what only
//! `kernel/events/core.c` can do: iterating the side-band events
//! (`perf_callchain_deferred_iterate()`, over the static `perf_iterate_sb()`).
//!
//! Differences from upstream 7.3 in upstream's own C, fixed by the C fix
//! series (`patches/upstream/`) that the Rust kernel is built on, and
//! tested by the selftests (they fail on the unmodified C kernel):
//!
//! - a per-CPU event with `defer_output` is a side-band event even when it
//!   asks for no other side-band record, so `pid == -1` sessions that set
//!   only `defer_output` get their records (`is_sb_event()`);
//! - an exiting task runs its pending deferred unwind before perf detaches
//!   the task's events, so samples taken just before exit keep their record
//!   on per-task events (`do_exit()`).

use crate::deferred::{self, Work};
use core::{
    ffi::c_void,
    mem::{size_of, size_of_val, MaybeUninit},
};
use kernel::{bindings, ffi::c_ulong, prelude::*};

/// perf's registration with the deferred unwinder.
static PERF_WORK: Work = Work::new();

/// The fixed part of `PERF_RECORD_CALLCHAIN_DEFERRED`.
#[repr(C)]
struct DeferredHeader {
    header: bindings::perf_event_header,
    cookie: u64,
    nr: u64,
}

// The uapi layout: `struct perf_event_header` then two `__u64`, then the
// entries as `__u64` (the kernel's `unsigned long` on 64-bit, the only
// kind this builds for).
const _: () = assert!(size_of::<DeferredHeader>() == 24 && size_of::<c_ulong>() == 8);

/// One deferred record, as it is written to each event.
struct Deferred<'a> {
    head: DeferredHeader,
    ips: &'a [c_ulong],
}

/// `perf_callchain()` with `CONFIG_UNWIND_USER_RUST`: the callchain of a
/// sample of `event` taken with `regs`, or null for an empty one.
///
/// # Safety
///
/// Called by `perf_callchain()` only, from perf's sample path (any context,
/// NMI included) for an active `event` whose context is set; `regs` are the
/// sample's registers.
#[no_mangle]
pub unsafe extern "C" fn perf_callchain_rust(
    event: *mut bindings::perf_event,
    regs: *mut bindings::pt_regs,
) -> *mut bindings::perf_callchain_entry {
    // SAFETY: `event` is a valid, active event (caller's duty); its `attr`
    // changes only while the event is disabled
    // (`PERF_EVENT_IOC_MODIFY_ATTRIBUTES`), never while it takes samples.
    let attr = unsafe { &(*event).attr };
    let task = current!();
    // SAFETY: An active event has a context; its `task` is fixed for the
    // context's life (null for a per-CPU context).
    let ctx_task = unsafe { (*(*event).ctx).task };

    let kernel = attr.exclude_callchain_kernel() == 0;
    // SAFETY: `current` is valid; `is_user_task()` reads its `mm` and
    // `flags`, which only current itself changes.
    let user = attr.exclude_callchain_user() == 0
        && unsafe { bindings::unwind_user_is_user_task(task.as_ptr()) };
    // Cross-task user callchains are never taken.
    let crosstask = !ctx_task.is_null() && ctx_task != task.as_ptr();

    if !kernel && !user {
        return core::ptr::null_mut();
    }

    let cookie = if user && !crosstask && attr.defer_callchain() != 0 {
        deferred::request(task, &PERF_WORK).map_or(0, |r| r.cookie)
    } else {
        0
    };

    // SAFETY: Called from the sample path as `get_perf_callchain()`
    // requires; `regs` are the sample's (caller's duty).
    unsafe {
        bindings::get_perf_callchain(
            regs,
            kernel,
            user,
            attr.sample_max_stack.into(),
            crosstask,
            true,
            cookie,
        )
    }
}

/// Write the record in `data` to `event`, if it has `defer_output`.
///
/// # Safety
///
/// Called by `perf_iterate_sb()` only (RCU read side, preemption off), with
/// a valid `event` and the `data` that [`deferred_callback`] passed.
unsafe extern "C" fn deferred_output(event: *mut bindings::perf_event, data: *mut c_void) {
    // SAFETY: `data` is the `Deferred` on `deferred_callback()`'s stack,
    // alive for the whole iteration and used by nothing else meanwhile.
    let d = unsafe { &mut *data.cast::<Deferred<'_>>() };
    // SAFETY: `event` is valid (caller's duty); `attr` is immutable.
    if unsafe { (*event).attr.defer_output() } == 0 {
        return;
    }
    let ips_size = size_of_val(d.ips);
    // Cannot fail: the cache holds at most 510 entries.
    let Ok(size) = u16::try_from(size_of::<DeferredHeader>() + ips_size) else {
        return;
    };
    let mut sample = MaybeUninit::<bindings::perf_sample_data>::uninit();
    let mut handle = MaybeUninit::<bindings::perf_output_handle>::uninit();
    let sample = sample.as_mut_ptr();
    let handle = handle.as_mut_ptr();

    // SAFETY: Valid pointers; `perf_event_header__init()` sets the header
    // and, with `sample_id_all`, the sample-id fields of `sample` that
    // `perf_output_begin()` and `perf_event__output_id_sample()` read.
    unsafe {
        bindings::perf_event_header__init(
            &mut d.head.header,
            sample,
            bindings::perf_event_type_PERF_RECORD_CALLCHAIN_DEFERRED,
            bindings::PERF_RECORD_MISC_USER as u16,
            size,
            event,
        )
    };
    // SAFETY: As above; `handle` is initialised on success.
    if unsafe { bindings::perf_output_begin(handle, sample, event, d.head.header.size.into()) } != 0
    {
        return;
    }
    // SAFETY: `handle` was begun above for `header.size` bytes: the fixed
    // part, the entries and the sample-id trailer, written in that order.
    unsafe {
        bindings::perf_output_copy(
            handle,
            (&raw const d.head).cast(),
            size_of::<DeferredHeader>() as u32,
        );
        bindings::perf_output_copy(handle, d.ips.as_ptr().cast(), ips_size as u32);
        bindings::perf_event__output_id_sample(event, handle, sample);
        bindings::perf_output_end(handle);
    }
}

/// The deferred unwinder's callback: the user stack of the kernel entry
/// with `cookie` is `trace`; write it to every `defer_output` event.
///
/// # Safety
///
/// Called by the deferred unwinder only, in the task, with a valid `trace`
/// whose `entries` hold `nr` words (or `nr == 0`).
unsafe extern "C" fn deferred_callback(
    _work: *mut bindings::unwind_work,
    trace: *mut bindings::unwind_stacktrace,
    cookie: u64,
) {
    // SAFETY: `trace` is valid (caller's duty).
    let trace = unsafe { &*trace };
    let ips: &[c_ulong] = if trace.nr == 0 || trace.entries.is_null() {
        &[]
    } else {
        // SAFETY: `entries` holds `nr` words for the callback's duration.
        unsafe { core::slice::from_raw_parts(trace.entries, trace.nr as usize) }
    };
    let mut d = Deferred {
        head: DeferredHeader {
            header: bindings::perf_event_header::default(),
            cookie,
            nr: ips.len() as u64,
        },
        ips,
    };
    // SAFETY: `deferred_output` has the iterator's signature and `d`
    // outlives the call.
    unsafe {
        bindings::perf_callchain_deferred_iterate(Some(deferred_output), (&raw mut d).cast())
    };
}

/// Register perf's deferred callback.  Called once, by `perf_event_init()`.
#[no_mangle]
pub extern "C" fn perf_callchain_deferred_init() {
    // perf registers first, so a bit is free; a second call finds the
    // work registered and changes nothing.  Like upstream, a failure only
    // means no deferred callchains.
    // SAFETY: `PERF_WORK` is static, valid forever.
    let r = unsafe { deferred::init(&PERF_WORK, Some(deferred_callback)) };
    kernel::warn_on_once!(r.is_err());
}

// Each function has the type of its C prototype.
const _: () = {
    type Callchain = unsafe extern "C" fn(
        *mut bindings::perf_event,
        *mut bindings::pt_regs,
    ) -> *mut bindings::perf_callchain_entry;
    let _: [Callchain; 2] = [perf_callchain_rust, bindings::perf_callchain_rust];
    let _: [extern "C" fn(); 1] = [perf_callchain_deferred_init];
    let _: unsafe extern "C" fn() = bindings::perf_callchain_deferred_init;
};
