// SPDX-License-Identifier: GPL-2.0

//! Unwind tables for the deferred walk (`CONFIG_UNWIND_USER_RUST_TABLES`):
//! the compiled rows of the objects of an address space, kept per mm, the
//! switches and the counters.
//!
//! Only the faultable walk (`unwind_user_faultable()`, in task_work) uses
//! tables: finding an object takes the mmap lock, and compiling an FDE
//! reads the tables with `copy_from_user()`, which may fault pages in.  The
//! walk, the table format and the rows are [`crate::logic::walk`],
//! [`crate::logic::cfi`] and [`crate::logic::rows`], shared with the host
//! tests; this file is allocation, locking and invalidation.
//!
//! **The cache.**  Each mm that a table walk met has an [`MmTables`]
//! (`mm->unwind_user_tables`, allocated at its first walk, freed by
//! `__mmput()` through `unwind_user_mm_exit()` ([`mm_exit`]), so at exit
//! and at exec, whose old mm goes the same way).  It holds, sorted by
//! address, one
//! [`Object`] per mapping that a walk met: its VMA range, the file it
//! maps (a reference is held, so the file cannot be freed and another one
//! take its address) and file offset, its parsed `.eh_frame_hdr` or none
//! (anonymous memory, JIT code, no `PT_GNU_EH_FRAME`: remembered as
//! such), and the rows compiled so far ([`ObjectRows`]).  Rows depend on
//! the file's contents and its load bias only, so they stay right as long
//! as the mapping is the same file at the same place.
//!
//! **Rows shared by file** (`kernel.unwind_user_tables_shared`, on by
//! default).  An object mapped from a file whose page cache can be read
//! keeps no rows of its own: its [`Object::shared`] names the file's
//! [`FileRows`], one per file in a global registry ([`FILES`]), compiled
//! from the file's page cache (as uprobes reads instructions: no fsnotify
//! event, no atime; never from a process's memory, so that no process's
//! private writes to its copy of the tables can decide another's stacks)
//! at offsets from the object's base ([`elf::Layout`]: the `PT_LOAD`s
//! turn them into file offsets), so that one file's rows serve every
//! process that maps it, at any address.  A new process of a program
//! that ran before finds its objects' rows compiled: its first walk looks
//! up objects, not FDEs.  An entry is found by the identity of the file's
//! contents (device, inode number and generation, change time, size:
//! [`FileKey`]) and holds no reference to the file or inode (a filesystem
//! stays unmountable once its last process is gone): a file rewritten in
//! place has a new change time and is compiled again; the process's
//! object holds the file it reads.  Entries outlive their processes, so a
//! program run again finds its rows; those no object uses are dropped by
//! the shrinker first and when the registry reaches
//! `kernel.unwind_user_tables_shared_max_kb` (16 MiB by default; the rows
//! of the file being compiled start again if it is still reached).  The
//! rows of the vDSO (no file), of files whose page cache cannot be read
//! (DAX, secretmem) and of objects with more than [`elf::MAX_LOADS`]
//! `PT_LOAD`s, and every object's rows with sharing switched off, are the
//! mm's own, compiled from its memory as below.  Rows compiled from a
//! file are charged to the memory cgroup of the process whose walk
//! compiled them, as its page-cache reads are.
//!
//! **Invalidation** by the mm's mmap sequence count
//! (`mmap_lock_speculate_try_begin()`, the count that per-VMA locking and
//! uprobes use; every mmap, munmap, mremap, mprotect, brk takes the mmap
//! write lock and moves it).  A walk starts by comparing it with the count
//! its cache was last validated at: equal, nothing changed and every
//! object is used as it is; different (or write-locked now, or no per-VMA
//! locking), the objects are checked again under the mmap read lock, each
//! against the VMA now at its start (same range, same file, same offset),
//! and those that differ are dropped with their rows.  So munmap, mremap,
//! dlclose and a new object mapped at the same address all drop what no
//! longer holds; the rows of unchanged objects survive malloc's mmaps.
//!
//! **Bounds.**  The objects and rows of one mm are capped at
//! `kernel.unwind_user_tables_max_kb` (sysctl, 1 MiB by default): a walk
//! that needs to compile more drops every other object and all rows first
//! (counted as an eviction) and starts again.  Allocations are `GFP_KERNEL_ACCOUNT`,
//! charged to the process's memory cgroup.  A walk finds at most
//! [`MAX_LOOKUPS`] new objects (each takes the mmap read lock and reads
//! ELF headers), and every user read of a lookup or a compilation is
//! charged to the walk's read budget.  Nothing transient (a fault, the
//! budget, no memory) is remembered.  A shrinker ([`shrink`], registered
//! by `shim.c`) drops the objects and rows of every cache no walk holds
//! under global memory pressure; each mm's memo and interpreter scratch
//! (about 9 KiB) stay until the mm goes.  An object's file stays
//! referenced until a walk finds its mapping gone, the shrinker drops it
//! or the mm goes: a file unmapped since the process's last walk keeps its
//! filesystem busy (umount says EBUSY) until then.
//!
//! **Concurrency.**  The cache's mutex is held for a whole walk: threads of
//! one mm walk one after the other.  Lock order: the cache's mutex, then
//! the mmap lock (object lookups, page faults), or [`FILES`]' mutex (to
//! find or add an entry, nothing else under it but an allocation), or a
//! [`FileRows`]' mutex (a row lookup, or compiling into it, reading the
//! page cache, which may sleep); nothing takes them the other way round
//! (`__mmput()` frees the cache when no task uses the mm, without the
//! mutex).  The shrinker's list lock (a spinlock) comes before a cache's
//! mutex, which it only try-locks; it try-locks [`FILES`]' and the
//! [`FileRows`]' mutexes before taking the list lock; `mm_tables()` links
//! a new cache and `mm_exit()` unlinks it without the mutex held.
//!
//! On at boot unless `unwind_user_tables=0`; sysctl
//! `kernel.unwind_user_tables` switches it, debugfs `unwind_user/stats` has
//! the counters (`shim.c`): `files_found` (object lookups whose file's
//! rows were in the registry), `files_cached` and `file_bytes` (its
//! entries and their bytes, rows included) beside the per-mm ones.

use crate::logic::{
    cfi::{self, Cause, Hdr, Reader, Scratch, UserBytes},
    elf,
    rows::{self, FdeEntry, Found, ObjectRows, PackedRow, PcMemo, Store},
    walk::{Answer, Stop, TableStats, TableWalk, Tables},
    word::WordSize,
};
use core::{marker::PhantomData, pin::Pin};
use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    bindings,
    debugfs::Dir,
    fs::File,
    mm::{virt::VmaRef, MmWithUser, MmapReadGuard},
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Acquire, Atomic, Relaxed, Release},
        lock::{mutex::MutexBackend, Guard},
        Arc, Mutex,
    },
    types::Opaque,
};

/// New objects a walk may look up (mmap lock, ELF headers) at most.
pub(crate) const MAX_LOOKUPS: u32 = 16;

/// Whether deferred walks use tables now (`unwind_user_tables`).
pub(crate) fn enabled() -> bool {
    // SAFETY: A bool written by the sysctl and the boot parameter; a racy
    // read gives either value, as READ_ONCE() would.
    unsafe { core::ptr::read_volatile(&raw const bindings::unwind_user_tables) }
}

/// The per-mm cap, in bytes.
fn cap() -> usize {
    // SAFETY: As for `enabled`.
    let kb = unsafe { core::ptr::read_volatile(&raw const bindings::unwind_user_tables_max_kb) };
    (kb as usize).saturating_mul(1024)
}

/// Whether objects' rows are compiled from their files and shared by every
/// mm (`unwind_user_tables_shared`).
fn shared_enabled() -> bool {
    // SAFETY: As for `enabled`.
    unsafe { core::ptr::read_volatile(&raw const bindings::unwind_user_tables_shared) }
}

/// The cap of the rows compiled from files, all files together, in bytes.
fn shared_cap() -> usize {
    // SAFETY: As for `enabled`.
    let kb =
        unsafe { core::ptr::read_volatile(&raw const bindings::unwind_user_tables_shared_max_kb) };
    (kb as usize).saturating_mul(1024)
}

/// A `KVec` as the rows' [`Store`], charged to the memory cgroup.
///
/// It must stay `kmalloc`-backed: [`shrink`] drops rows under the
/// shrinker's spinlock, where `kvfree()` of a vmalloc'ed area could sleep.
struct KStore<T>(KVec<T>);

impl<T> Default for KStore<T> {
    fn default() -> Self {
        KStore(KVec::new())
    }
}

impl<T> Store<T> for KStore<T> {
    fn items(&self) -> &[T] {
        &self.0
    }
    fn items_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
    fn push(&mut self, v: T) -> bool {
        self.0.push(v, GFP_KERNEL_ACCOUNT).is_ok()
    }
    fn truncate(&mut self, n: usize) {
        self.0.truncate(n)
    }
    fn reserve(&mut self, n: usize) -> bool {
        self.0.reserve(n, GFP_KERNEL_ACCOUNT).is_ok()
    }
    fn extend(&mut self, n: usize, v: T) -> bool
    where
        T: Clone,
    {
        self.0.extend_with(n, v, GFP_KERNEL_ACCOUNT).is_ok()
    }
}

type Rows = ObjectRows<KStore<FdeEntry>, KStore<PackedRow>, KStore<cfi::Probe>>;

/// A mapping a walk met, and the compiled rows of its object.
struct Object {
    start: u64,
    end: u64,
    /// The file mapped; `None` for anonymous memory and the vDSO.
    file: Option<ARef<File>>,
    pgoff: u64,
    vdso: bool,
    /// The object's tables; `None`: it has none (remembered).  For an
    /// object whose rows are its file's ([`Object::shared`]), the file's
    /// hdr, at offsets from the object's base.
    hdr: Option<Hdr>,
    /// Where the object's first page is mapped (the mapping of file
    /// offset 0): what its file's rows are offset by.
    base: u64,
    /// The rows of its file, shared by every mm that maps it; `None`: the
    /// object's own `rows`, compiled from this mm's memory (the vDSO,
    /// files whose page cache cannot be read, sharing switched off).
    shared: Option<FileUse>,
    rows: Rows,
}

impl Object {
    /// Bytes allocated for it and its rows (counted against the cap, so
    /// that many objects without rows are bounded too).
    fn bytes(&self) -> usize {
        // Saturating: no overflow panic under an object's insertion.
        rows_bytes(&self.rows).saturating_add(core::mem::size_of::<Object>())
    }

    /// Whether the mapping at its start is still the one it was made from.
    fn still_mapped(&self, mm: &MmWithUser, lock: &MmapReadGuard<'_>) -> bool {
        let Some(vma) = usize::try_from(self.start)
            .ok()
            .and_then(|a| lock.vma_lookup(a))
        else {
            return false;
        };
        if vma.start() as u64 != self.start || vma.end() as u64 != self.end {
            return false;
        }
        let (file, pgoff) = file_and_pgoff(vma);
        let same_file = match &self.file {
            Some(f) => core::ptr::eq(file, f.as_ptr()),
            None => file.is_null(),
        };
        same_file && pgoff as u64 == self.pgoff && is_vdso(mm, vma.start()) == self.vdso
    }
}

/// Bytes allocated for `rows`.
#[inline(never)]
fn rows_bytes(rows: &Rows) -> usize {
    // Out of line: a leaf, not in its callers' frames.  Saturating (the capacities' bytes fit: they are allocated), so that
    // no overflow panic's frames are under the lookup's and fill's.
    let bytes = |n: usize, size: usize| n.saturating_mul(size);
    bytes(rows.fdes.0.capacity(), core::mem::size_of::<FdeEntry>())
        .saturating_add(bytes(
            rows.rows.0.capacity(),
            core::mem::size_of::<PackedRow>(),
        ))
        .saturating_add(bytes(
            rows.probes.0.capacity(),
            core::mem::size_of::<cfi::Probe>(),
        ))
}

/// The file a vma maps (null for anonymous memory and the vDSO) and its
/// offset in pages.
fn file_and_pgoff(vma: &VmaRef) -> (*mut bindings::file, usize) {
    // SAFETY: `vma` is a valid vma (a `VmaRef` is only had under its
    // mmap or vma lock), whose fields are stable while it is.
    unsafe { ((*vma.as_ptr()).vm_file, (*vma.as_ptr()).vm_pgoff) }
}

/// Whether `start` is the vDSO's base in `mm`.
fn is_vdso(mm: &MmWithUser, start: usize) -> bool {
    // SAFETY: `context.vdso` is set at exec and stays while the mm is in
    // use; reading it under the mmap lock is not a race.
    let vdso = unsafe { (*mm.as_raw()).__bindgen_anon_1.context.vdso } as usize;
    vdso == start
}

/// The identity of a file's contents (`unwind_user_file_key()`): its
/// inode's device, number and generation, change time and size.  A file
/// rewritten in place gets a new change time, so rows compiled before are
/// not found for it; an inode freed and its number given to another file
/// would need the same generation, change time to the nanosecond and size
/// to be taken for it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct FileKey {
    dev: u64,
    ino: u64,
    ctime_sec: i64,
    size: i64,
    ctime_nsec: u32,
    generation: u32,
}

impl FileKey {
    /// `file`'s key into `out` (the caller's, maybe not on the stack);
    /// `false` if its rows cannot be compiled from its page cache (DAX,
    /// secretmem, no `read_folio`).  Out of line: its own frame is beside
    /// its caller's reads, not in the frame over them.
    #[inline(never)]
    fn read_into(file: &File, out: &mut Self) -> bool {
        match Self::of(file) {
            Some(k) => {
                *out = k;
                true
            }
            None => false,
        }
    }

    /// `file`'s key; `None` if its rows cannot be compiled from its page
    /// cache (DAX, secretmem, no `read_folio`).
    fn of(file: &File) -> Option<Self> {
        let mut k = bindings::unwind_user_file_key {
            dev: 0,
            ino: 0,
            ctime_sec: 0,
            size: 0,
            ctime_nsec: 0,
            generation: 0,
        };
        // SAFETY: `file` is a valid file; the function fills `k`.
        if !unsafe { bindings::unwind_user_file_key(file.as_ptr(), &mut k) } {
            return None;
        }
        Some(FileKey {
            dev: k.dev,
            ino: k.ino,
            ctime_sec: k.ctime_sec,
            size: k.size,
            ctime_nsec: k.ctime_nsec,
            generation: k.generation,
        })
    }
}

/// An object's file read through its page cache (as uprobes reads an
/// instruction: no fsnotify event, no atime), at offsets from the object's
/// base: the [`UserBytes`] its shared rows are compiled from.  Not a
/// process's memory, so that no process's private writes to its copy of
/// the tables can decide another's stacks.  The last folio read stays
/// referenced until it is dropped: an FDE's reads are near each other.
struct FileBytes<'a> {
    reader: bindings::unwind_user_file_reader,
    /// Where the object's bytes are in the file; `None`: the address is
    /// the file offset (the ELF header and program headers, read before
    /// the layout is known).
    layout: Option<&'a elf::Layout>,
    _file: PhantomData<&'a File>,
}

impl<'a> FileBytes<'a> {
    fn new(file: &'a File, layout: Option<&'a elf::Layout>) -> Self {
        FileBytes {
            reader: bindings::unwind_user_file_reader {
                file: file.as_ptr(),
                folio: core::ptr::null_mut(),
            },
            layout,
            _file: PhantomData,
        }
    }
}

impl UserBytes for FileBytes<'_> {
    // Inlined into the window's refill: a frame of its own would be on
    // every path to a read of a file.
    #[inline]
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Option<()> {
        let len = buf.len();
        let pos = match self.layout {
            Some(l) => l.file_offset(addr, len as u64)?,
            None => addr,
        };
        // SAFETY: `reader.file` is a valid file for `'a` (borrowed by
        // `new`), `reader.folio` null or a folio it referenced, and `buf`
        // is valid for `len` bytes of writes.
        let ret = unsafe {
            bindings::unwind_user_file_read(&mut self.reader, pos, buf.as_mut_ptr().cast(), len)
        };
        (ret == 0).then_some(())
    }
}

impl Drop for FileBytes<'_> {
    fn drop(&mut self) {
        // SAFETY: `reader.folio` is null or a folio the reader referenced.
        unsafe { bindings::unwind_user_file_reader_done(&mut self.reader) };
    }
}

/// The rows of one file, compiled from its page cache at offsets from the
/// object's base, shared by every mm that maps it at any address.
#[pin_data(PinnedDrop)]
struct FileRows {
    /// The word size of the tasks whose walks compiled them (the ELF class).
    ws: WordSize,
    info: KBox<FileInfo>,
    /// The mms' objects that use it ([`FileUse`]); an entry of [`FILES`]
    /// no object uses may be dropped.
    users: Atomic<u32>,
    /// Bytes of rows, written under `rows`' mutex (read without it when
    /// it is dropped, maybe under the shrinker's spinlock).
    bytes: Atomic<usize>,
    #[pin]
    rows: Mutex<Rows>,
}

#[pinned_drop]
impl PinnedDrop for FileRows {
    fn drop(self: Pin<&mut Self>) {
        let bytes = self.bytes.load(Relaxed).saturating_add(FILE_ROWS_SIZE);
        file_gauge(bytes, 0);
        if let Some(c) = STATS.get(FILES_CACHED) {
            c.add(u64::MAX, Relaxed);
        }
    }
}

/// A file's key, where its bytes are, and its hdr: one allocation, made
/// before they are read, so that they are not in the frames over the
/// reads of an object's lookup (docs/design.md, "Stack use").
struct FileInfo {
    key: FileKey,
    layout: elf::Layout,
    hdr: Hdr,
}

impl FileRows {
    /// Count its rows' bytes going from `before` to `after` (its rows'
    /// mutex held).
    fn set_bytes(&self, before: usize, after: usize) {
        self.bytes.store(after, Relaxed);
        file_gauge(before, after);
    }

    /// Compile the FDE of `rel` (from the object's base) into `rows`, its
    /// rows locked, reading `file` and charging `r`, as
    /// [`ObjectRows::fill`]; and whether the rows were dropped first, the
    /// cap of all files' rows reached.  Inlined into the walk's row
    /// lookup, which calls the compilation: a frame of its own would add
    /// to the deepest path (the compilation's).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn fill<M: UserBytes>(
        &self,
        mut rows: Guard<'_, Rows, MutexBackend>,
        r: &mut Reader<'_, M>,
        file: &File,
        hdr: &Hdr,
        ws: WordSize,
        rel: u64,
        scratch: &mut Scratch,
    ) -> (Result<(), cfi::Refusal>, bool) {
        let mut before = rows_bytes(&rows);
        let evict = file_bytes() >= shared_cap();
        if evict {
            *rows = Rows::default();
            self.set_bytes(before, 0);
            before = 0;
        }
        let mut fb = FileBytes::new(file, Some(&self.info.layout));
        let mut fr = Reader::with_limit(&mut fb, r.left());
        let res = rows.compile_pc(&mut fr, hdr, ws, rel, scratch);
        // Within what `r` had left: the charge fits.
        r.charge(fr.reads());
        self.set_bytes(before, rows_bytes(&rows));
        (res, evict)
    }
}

/// An object's use of its file's rows: counted in [`FileRows::users`].
struct FileUse(Arc<FileRows>);

impl FileUse {
    /// Made only under [`FILES`]' lock, so that an entry found unused there
    /// stays unused while the lock is held.
    fn new(f: &Arc<FileRows>) -> Self {
        f.users.fetch_add(1, Relaxed);
        FileUse(f.clone())
    }
}

impl Drop for FileUse {
    fn drop(&mut self) {
        self.0.users.fetch_sub(1, Relaxed);
    }
}

kernel::sync::global_lock! {
    // Sorted by key and word size: found by binary search (an idle
    // machine's registry holds every file profiled until the cap or the
    // shrinker drops it).
    // SAFETY: Initialised by `files_init()` (an initcall) before
    // `FILES_READY` is set, and used only when it is.
    unsafe(uninit) static FILES: Mutex<KVec<Arc<FileRows>>> = KVec::new();
}

/// [`FILES`] is initialised.
static FILES_READY: Atomic<bool> = Atomic::new(false);

/// Initialise [`FILES`] (`shim.c`'s initcall).
///
/// # Safety
///
/// Called once.
pub(crate) unsafe fn files_init() {
    // SAFETY: Called once (caller's duty), and `FILES_READY` lets nothing
    // use the lock before.
    unsafe { FILES.init() };
    FILES_READY.store(true, Release);
}

/// Keep the global count of bytes of rows compiled from files.
fn file_gauge(before: usize, after: usize) {
    if let Some(c) = STATS.get(FILE_BYTES) {
        c.add((after as u64).wrapping_sub(before as u64), Relaxed);
    }
}

/// Bytes of rows compiled from files now (and their entries).
fn file_bytes() -> usize {
    STATS.get(FILE_BYTES).map_or(0, |c| {
        usize::try_from(c.load(Relaxed)).unwrap_or(usize::MAX)
    })
}

/// The shared rows of `file` for a task of word size `ws`: found in
/// [`FILES`], or a new entry for it (its ELF header, program headers and
/// `.eh_frame_hdr` read from the file, each read charged to `r`).  Out of
/// line, as its callers: not on the path of a compilation.  `None`:
/// the object keeps its own rows (no key, not an ELF object with tables,
/// more `PT_LOAD`s than [`elf::MAX_LOADS`], a read failed, no memory).
#[inline(never)]
fn file_rows<M: UserBytes>(
    r: &mut Reader<'_, M>,
    file: &File,
    ws: WordSize,
    found: &mut u32,
) -> Option<FileUse> {
    if !FILES_READY.load(Acquire) {
        return None;
    }
    if let Some(u) = registered(file, ws, found)? {
        return Some(u);
    }
    // On the heap: the key, the layout and the hdr are not in this frame
    // over the reads.  The key is taken again (it is taken before the
    // bytes it stands for are read): the file's, or a newer one.
    let mut info = KBox::init(FileInfo::init_zeroed(), GFP_KERNEL_ACCOUNT).ok()?;
    if !FileKey::read_into(file, &mut info.key) {
        return None;
    }
    let FileInfo { layout, hdr, .. } = &mut *info;
    let found_layout = {
        let mut fb = FileBytes::new(file, None);
        let mut fr = Reader::with_limit(&mut fb, r.left());
        let found = elf::layout(&mut fr, 0, ws, layout);
        // Each reader may read what `r` has left: its charge fits.
        r.charge(fr.reads());
        found
    };
    if found_layout.is_none() || layout.nr_loads > elf::MAX_LOADS {
        return None;
    }
    let read = {
        let mut fb = FileBytes::new(file, Some(layout));
        let mut fr = Reader::with_limit(&mut fb, r.left());
        let read = cfi::read_hdr_to(&mut fr, layout.hdr, ws, hdr);
        r.charge(fr.reads());
        read
    };
    read.ok()?;
    let new = new_file_rows(ws, info)?;
    let mut files = FILES.lock();
    let at = match find_file(&files, &new.info.key, ws) {
        // Another walk added it meanwhile: `new` is dropped.
        Ok(i) => {
            let f = files.get(i)?;
            *found = found.saturating_add(1);
            return Some(FileUse::new(f));
        }
        Err(at) => at,
    };
    // May reclaim, and so call the shrinker, which only try-locks `FILES`.
    files.push(new.clone(), GFP_KERNEL_ACCOUNT).ok()?;
    // Sorted insertion: the new entry moves down to its place.
    rows::shift_up(&mut files, at);
    Some(FileUse::new(&new))
}

/// The registered entry of `file` (its key now) for `ws`, counted in
/// `found`; `Some(None)` if there is none, `None` if the file has no key.
/// Out of line: the key is in this frame, not in [`file_rows`]'s over
/// its reads.
#[inline(never)]
fn registered(file: &File, ws: WordSize, found: &mut u32) -> Option<Option<FileUse>> {
    let key = FileKey::of(file)?;
    let files = FILES.lock();
    let f = find_file(&files, &key, ws).ok().and_then(|i| files.get(i));
    if f.is_some() {
        *found = found.saturating_add(1);
    }
    Some(f.map(FileUse::new))
}

/// The place of the entry of `key` and `ws` in the sorted registry:
/// found, or where it goes.
fn find_file(files: &[Arc<FileRows>], key: &FileKey, ws: WordSize) -> Result<usize, usize> {
    files.binary_search_by(|f| (&f.info.key, f.ws.bytes()).cmp(&(key, ws.bytes())))
}

/// A new entry, unregistered, dropping unused ones first if the cap is
/// reached.
#[inline(never)]
fn new_file_rows(ws: WordSize, info: KBox<FileInfo>) -> Option<Arc<FileRows>> {
    if file_bytes() >= shared_cap() {
        drop_unused();
    }
    let new = Arc::pin_init(
        pin_init!(FileRows {
            ws,
            info,
            users: Atomic::new(0),
            bytes: Atomic::new(0),
            rows <- new_mutex!(Rows::default()),
        }),
        GFP_KERNEL_ACCOUNT,
    )
    .ok()?;
    file_gauge(0, FILE_ROWS_SIZE);
    if let Some(c) = STATS.get(FILES_CACHED) {
        c.add(1, Relaxed);
    }
    Some(new)
}

/// Bytes of an entry of [`FILES`] without its rows.
const FILE_ROWS_SIZE: usize = core::mem::size_of::<FileRows>() + core::mem::size_of::<FileInfo>();

/// Drop the entries of [`FILES`] that no object uses.
fn drop_unused() {
    let mut files = FILES.lock();
    let kept = rows::keep_first(&mut files, |f| f.users.load(Relaxed) != 0);
    files.truncate(kept);
}

/// The shrinker's share of the rows compiled from files: drop the entries
/// no object uses, then the rows of others until `goal` bytes are freed
/// (objects keep their entries: the next walks compile again).  The bytes
/// freed.  Never waits for a lock.
pub(crate) fn shrink_files(goal: usize) -> usize {
    if !FILES_READY.load(Acquire) {
        return 0;
    }
    let Some(mut files) = FILES.try_lock() else {
        return 0;
    };
    let before = file_bytes();
    let kept = rows::keep_first(&mut files, |f| f.users.load(Relaxed) != 0);
    files.truncate(kept);
    for f in files.iter() {
        if before.saturating_sub(file_bytes()) >= goal {
            break;
        }
        if let Some(mut rows) = f.rows.try_lock() {
            let bytes = rows_bytes(&rows);
            *rows = Rows::default();
            f.set_bytes(bytes, 0);
        }
    }
    drop(files);
    let freed = before.saturating_sub(file_bytes());
    if let Some(c) = STATS.get(SHRUNK) {
        c.add(freed as u64, Relaxed);
    }
    freed
}

// SAFETY: All zeroes is a valid `elf::Layout` (integers: no load).
unsafe impl Zeroable for elf::Layout {}

// SAFETY: All zeroes is a valid `FileInfo`: its fields are integers (an
// `elf::Layout` with no load, a `Hdr` of no table).
unsafe impl Zeroable for FileInfo {}

// SAFETY: All zeroes is a valid `PcMemo` (an empty one: its slots' keys
// are 0, and the rest is integers).
unsafe impl Zeroable for PcMemo {}

/// What the cache's mutex guards.
struct Inner {
    /// The mmap sequence count the objects were last validated at.
    seq: Option<u32>,
    /// The objects, sorted by start, not overlapping.
    objects: KVec<Object>,
    /// Bytes of rows of all objects.
    bytes: usize,
    /// The rows of recent pcs: copies of the objects' rows, cleared
    /// whenever an object or rows are dropped.  Allocated (8 KiB, zeroed)
    /// at the mm's second table walk: a process walked once (most of a
    /// build's) never needs it, and its first walk, which would fill it,
    /// finds the rows of its objects without it.
    memo: Option<KBox<PcMemo>>,
    /// Whether a table walk of the mm has begun before.
    walked: bool,
    /// The word size of the walks its objects were found by: their tables
    /// were located, and their rows are compiled, at it only.  A 64-bit
    /// task can run 32-bit code: a walk of the other word size drops the
    /// objects first, so that no rows of the other register numbering go
    /// into a file's rows that other processes use.
    ws: Option<WordSize>,
    /// The interpreter's state while it compiles an FDE (1,760 bytes, a
    /// 2 KiB slab object, off the kernel stack; used under the mutex, so
    /// one per mm is enough),
    /// allocated at the mm's first compilation.
    scratch: Option<KBox<Scratch>>,
    /// A walk's state and counters (336 bytes, off the kernel
    /// stack), allocated at the mm's first table walk and moved out of
    /// the cache for each ([`TaskTables::take_walk`]).
    walk: Option<KBox<WalkState>>,
    /// The current walk's counts of the tables' work, zeroed when it
    /// begins ([`TaskTables::begin`]) and added to [`STATS`] when it ends
    /// ([`TaskTables::account`]): here, not in [`TaskTables`], which is
    /// on the stack under every lookup and compilation.
    counts: Counts,
}

/// [`Inner::counts`].
#[derive(Clone, Copy, Default)]
struct Counts {
    lookups: u32,
    no_object: u32,
    no_eh_frame: u32,
    hits: u32,
    misses: u32,
    evictions: u32,
    capped: u32,
    files_found: u32,
    revalidated: bool,
}

/// The state and counters of a walk by tables, kept off the stack: the
/// walk's caller is under every frame of the walk, the compilations'
/// included (docs/design.md, "Stack use").
pub(crate) struct WalkState {
    pub(crate) tw: TableWalk,
    pub(crate) stats: TableStats,
}

/// An interpreter's state, written straight into its allocation: not on
/// the stack.
fn new_scratch() -> Option<KBox<Scratch>> {
    Some(
        KBox::<Scratch>::new_uninit(GFP_KERNEL_ACCOUNT)
            .ok()?
            .write(Scratch::new()),
    )
}

/// Remember `found` as the row of `pc` in `memo`, if it is there.
fn memo_put(memo: &mut Option<KBox<PcMemo>>, pc: u64, ws: WordSize, found: Found) {
    if let Some(m) = memo.as_mut() {
        m.put(pc, ws, found);
    }
}

/// An mm's interpreter state, allocated at its first compilation; a
/// refusal for want of memory if it cannot be (transient: not remembered).
fn scratch_of(s: &mut Option<KBox<Scratch>>) -> Result<&mut Scratch, Cause> {
    if s.is_none() {
        *s = new_scratch();
    }
    s.as_deref_mut()
        .ok_or(cfi::Refusal::Bound(cfi::Bound::Memory).cause())
}

impl Inner {
    /// Add the object of the mapping `(start, end, pgoff, base, vdso)` in
    /// its place, without tables (its caller looks them up); its index.
    /// What overlaps it must be dropped first ([`Inner::retain`], by the
    /// caller: what the drops call is not under this frame).  Out of
    /// line, and given the object's parts: the object is made in this
    /// frame, not in [`TaskTables::add_object`]'s.
    #[inline(never)]
    fn insert(
        &mut self,
        (start, end, pgoff, base, vdso): (u64, u64, u64, u64, bool),
        file: Option<ARef<File>>,
    ) -> Option<usize> {
        let at = self.objects.partition_point(|o| o.start < start);
        // At the first, room for a walk's usual objects (the program,
        // libc, ld.so, one more) without growing.
        let room = if self.objects.capacity() == 0 { 4 } else { 1 };
        self.objects.reserve(room, GFP_KERNEL_ACCOUNT).ok()?;
        let object = Object {
            start,
            end,
            file,
            pgoff,
            vdso,
            hdr: None,
            base,
            shared: None,
            rows: Rows::default(),
        };
        self.objects.insert_within_capacity(at, object).ok()?;
        let bytes = self.objects.get(at).map_or(0, Object::bytes);
        self.add_bytes(0, bytes);
        Some(at)
    }

    fn memo_clear(&mut self) {
        if let Some(m) = self.memo.as_mut() {
            m.clear();
        }
    }

    fn add_bytes(&mut self, before: usize, after: usize) {
        self.bytes = self.bytes.saturating_sub(before).saturating_add(after);
        gauge(before, after);
    }

    /// Drop the objects for which `keep` says no.  The kept ones are moved
    /// down in place (as `Vec::retain`, without its panicking index: its
    /// panic's frames would be the deepest under an object's lookup).
    fn retain(&mut self, mut keep: impl FnMut(&Object) -> bool) {
        let mut freed = 0;
        let kept = rows::keep_first(&mut self.objects, |o| {
            let k = keep(o);
            if !k {
                freed = o.bytes().saturating_add(freed);
            }
            k
        });
        if kept != self.objects.len() {
            self.objects.truncate(kept);
            self.memo_clear();
        }
        self.add_bytes(freed, 0);
    }
}

/// The compiled rows of an mm.
#[pin_data]
pub(crate) struct MmTables {
    #[pin]
    inner: Mutex<Inner>,
    /// Its link in the shrinker's list of every mm's cache (`shim.c`):
    /// linked once installed, unlinked by [`mm_exit`] before it is freed.
    #[pin]
    link: Opaque<bindings::list_head>,
}

// SAFETY: The threads of an mm and the shrinker share its cache: `inner`
// is a mutex, and `link` is touched only under the shrinker's list lock
// (`unwind_user_tables_link()`, `_unlink()`, the scan).
unsafe impl Sync for MmTables {}

/// `mm`'s cache, allocated at its first use; `None` if there is no memory.
fn mm_tables(mm: &MmWithUser) -> Option<&MmTables> {
    // SAFETY: The field is written once from null by
    // `unwind_user_mm_install()` (a cmpxchg) and cleared only when no task
    // uses the mm; a racy read sees null or the installed cache.
    let mut cur = unsafe {
        core::ptr::read_volatile(&raw const (*mm.as_raw()).__bindgen_anon_1.unwind_user_tables)
    };
    if cur.is_null() {
        let new = new_mm_tables()?;
        // SAFETY: `mm` is valid; the function installs `new` unless the
        // field is already set, and returns what is installed.
        cur = unsafe { bindings::unwind_user_mm_install(mm.as_raw(), new.cast()) };
        if cur != new.cast() {
            // Another thread installed one first.
            // SAFETY: `new` came from `KBox::into_raw` and was not installed.
            drop(unsafe { KBox::from_raw(new) });
        } else {
            // SAFETY: The link is initialised and on no list, and the cache
            // lives until `mm_exit()` unlinks it.
            unsafe { bindings::unwind_user_tables_link((*new).link.get()) };
        }
    }
    // SAFETY: An installed cache lives until `__mmput()`, which cannot run
    // while `mm` (current's, with a user count) is in use.
    Some(unsafe { &*cur.cast::<MmTables>() })
}

/// A new cache for [`mm_tables`] to install, as a raw pointer from
/// `KBox::into_raw()`.  Out of line: once per mm, its frame not in every
/// walk's start (nor is a lost one's drop under it).
#[inline(never)]
#[cold]
fn new_mm_tables() -> Option<*mut MmTables> {
    // Empty: [`Inner::insert`] makes room for a walk's usual objects at
    // the first (`KVec::with_capacity()` would bring its overflow check's
    // panic into this frame's path).
    let new = KBox::pin_init(
        pin_init!(MmTables {
            // Made in place, not on this frame.
            inner <- new_mutex!(init!(Inner {
                seq: None,
                objects: KVec::new(),
                bytes: 0,
                memo: None,
                walked: false,
                ws: None,
                scratch: None,
                walk: None,
                counts: Counts::default(),
            })),
            // SAFETY: `p` points to the field, at its final place.
            link <- Opaque::ffi_init(|p| unsafe { bindings::INIT_LIST_HEAD(p) }),
        }),
        GFP_KERNEL_ACCOUNT,
    )
    .ok()?;
    // SAFETY: The box is only ever used pinned: through the pointer
    // installed in the mm, and freed as a whole by `unwind_user_mm_exit()`
    // (or by `mm_tables()`, if another thread installed one first).
    Some(KBox::into_raw(unsafe { Pin::into_inner_unchecked(new) }))
}

/// Free `mm`'s compiled rows (`unwind_user_mm_exit()`, called by
/// `__mmput()` when no task uses `mm` any more, so nothing else can hold
/// the cache).
///
/// # Safety
///
/// `mm` must be valid, and no walk may use its cache (no task uses it).
pub(crate) unsafe fn mm_exit(mm: *mut bindings::mm_struct) {
    // SAFETY: `mm` is valid (caller's duty) and nobody else uses the field.
    let p = unsafe {
        core::ptr::replace(
            &raw mut (*mm).__bindgen_anon_1.unwind_user_tables,
            core::ptr::null_mut(),
        )
    };
    if p.is_null() {
        return;
    }
    let p = p.cast::<MmTables>();
    // SAFETY: `p` is an installed cache: its link is initialised (and on
    // the shrinker's list unless it was installed by a thread that has not
    // linked it yet, which cannot be: that thread uses `mm`). Off the
    // list, the shrinker cannot reach it any more.
    unsafe { bindings::unwind_user_tables_unlink((*p).link.get()) };
    // SAFETY: Installed by `mm_tables` from `KBox::into_raw`, and nobody
    // else holds it (caller's duty; the shrinker no longer can).
    let tables = unsafe { KBox::from_raw(p) };
    let mut inner = tables.inner.lock();
    let bytes = inner.bytes;
    inner.add_bytes(bytes, 0);
}

/// Pages' worth of compiled rows in every mm's cache (the shrinker's
/// count; what [`shrink`] can free).
pub(crate) fn pages() -> usize {
    let bytes = STATS.get(CACHE_BYTES).map_or(0, |c| {
        usize::try_from(c.load(Relaxed)).unwrap_or(usize::MAX)
    });
    let bytes = bytes.saturating_add(file_bytes());
    bytes.div_ceil(kernel::page::PAGE_SIZE)
}

/// Drop every object and row of the cache linked at `link`, unless a walk
/// holds it (the shrinker does not wait): what `shim.c`'s shrinker does to
/// each cache until it has freed what reclaim asked for. Returns the bytes
/// of rows freed. The objects are looked up again, their rows compiled
/// again, by the next walks that meet them.
///
/// # Safety
///
/// `link` must be the link of an [`MmTables`] on the shrinker's list, and
/// the list's lock held (so that [`mm_exit`] cannot free it meanwhile).
pub(crate) unsafe fn shrink(link: *mut bindings::list_head) -> usize {
    let link = Opaque::cast_from(link).cast_mut();
    // SAFETY: `link` is the `link` field of a live `MmTables` (caller's
    // duty).
    let tables = unsafe { &*kernel::container_of!(link, MmTables, link) };
    // Reclaim may run in a walk's allocation, under this very mutex.
    let Some(mut g) = tables.inner.try_lock() else {
        return 0;
    };
    let bytes = g.bytes;
    if bytes == 0 {
        return 0;
    }
    // Dropped here, under a spinlock: the rows are kmalloc'ed, and `fput()`
    // of the objects' files defers the last close.
    g.objects = KVec::new();
    g.memo_clear();
    g.seq = None;
    g.add_bytes(bytes, 0);
    if let Some(c) = STATS.get(SHRUNK) {
        c.add(bytes as u64, Relaxed);
    }
    bytes
}

/// The rows of the objects of current's address space, as one walk uses
/// them: the cache's mutex is held while it lives.
pub(crate) struct TaskTables<'a> {
    mm: &'a MmWithUser,
    inner: Option<Guard<'a, Inner, MutexBackend>>,
    /// The object of the last row found (a walk stays in one for several
    /// frames).
    last: usize,
}

impl<'a> TaskTables<'a> {
    /// The tables of `mm`, the address space of current, locked; a walk
    /// by them begins with [`TaskTables::begin`].
    #[inline(never)]
    pub(crate) fn new(mm: &'a MmWithUser) -> Self {
        TaskTables {
            mm,
            inner: mm_tables(mm).map(|c| c.inner.lock()),
            last: 0,
        }
    }

    /// Begin a walk of word size `ws`: the tables checked against the
    /// mm's mappings, and for that word size.
    #[inline(never)]
    pub(crate) fn begin(&mut self, ws: WordSize) {
        if let Some(g) = self.inner.as_mut() {
            // The memo from the mm's second walk on (see `Inner::memo`).
            if g.walked && g.memo.is_none() {
                g.memo = KBox::init(PcMemo::init_zeroed(), GFP_KERNEL_ACCOUNT).ok();
            }
            g.walked = true;
            g.counts = Counts::default();
            if g.ws != Some(ws) {
                if g.ws.is_some() {
                    g.retain(|_| false);
                }
                g.ws = Some(ws);
            }
        }
        self.validate();
    }

    /// The mm's walk state, moved out of its cache for a walk (allocated
    /// at its first); `None` if the mm has no cache, or no memory for it.
    /// Given back by [`TaskTables::put_walk`].
    #[inline(never)]
    pub(crate) fn take_walk(&mut self) -> Option<KBox<WalkState>> {
        let g = self.inner.as_mut()?;
        match g.walk.take() {
            Some(w) => Some(w),
            None => KBox::new(
                WalkState {
                    tw: TableWalk::IDLE,
                    stats: TableStats::default(),
                },
                GFP_KERNEL_ACCOUNT,
            )
            .ok(),
        }
    }

    /// Give the walk state back to the mm's cache for its next walk.
    pub(crate) fn put_walk(&mut self, w: KBox<WalkState>) {
        if let Some(g) = self.inner.as_mut() {
            g.walk = Some(w);
        }
    }

    /// Drop the objects whose mapping changed since the last walk.
    fn validate(&mut self) {
        let mm = self.mm;
        let Some(g) = self.inner.as_mut() else {
            return;
        };
        let mut seq = 0u32;
        // SAFETY: `mm` is valid; the function reads its sequence count.
        let stable = unsafe { bindings::unwind_user_mm_seq(mm.as_raw(), &mut seq) };
        if stable && g.seq == Some(seq) {
            return;
        }
        let lock = mm.mmap_read_lock();
        if !g.objects.is_empty() {
            g.counts.revalidated = true;
            g.retain(|o| o.still_mapped(mm, &lock));
        }
        // No writer while the read lock is held: the count is stable.
        // SAFETY: As above.
        let stable = unsafe { bindings::unwind_user_mm_seq(mm.as_raw(), &mut seq) };
        g.seq = stable.then_some(seq);
        drop(lock);
    }

    /// Look up the mapping of `pc` and add it; its index.  Out of line:
    /// its frame is not on the path of a compilation's.
    #[inline(never)]
    fn add_object<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Option<usize> {
        let mm = self.mm;
        let c = &mut self.inner.as_mut()?.counts;
        if c.lookups >= MAX_LOOKUPS {
            c.capped = c.capped.saturating_add(1);
            return None;
        }
        c.lookups += 1;
        let (start, end, file, pgoff, base, vdso) = {
            let lock = mm.mmap_read_lock();
            let vma = lock.vma_lookup(usize::try_from(pc).ok()?)?;
            let start = vma.start();
            let (f, pgoff) = file_and_pgoff(vma);
            let vdso = f.is_null() && is_vdso(mm, start);
            let (file, base) = if f.is_null() {
                (None, vdso.then_some(start))
            } else {
                // SAFETY: `vm_file` is a valid file while the vma is; the
                // reference taken keeps it valid after the lock.
                let file: ARef<File> = unsafe { File::from_raw_file(f) }.into();
                let base = pgoff
                    .checked_mul(bindings::PAGE_SIZE)
                    .and_then(|off| start.checked_sub(off))
                    .and_then(|base| {
                        let first = lock.vma_lookup(base)?;
                        let (f0, o) = file_and_pgoff(first);
                        // The same file, or its inode mapped through
                        // another open() (a MAP_FIXED remap of the code).
                        let same = core::ptr::eq(f0, f)
                            || (!f0.is_null()
                                // SAFETY: Both files are valid while their
                                // vmas are (the mmap read lock is held).
                                && unsafe { core::ptr::eq((*f0).f_inode, (*f).f_inode) });
                        (first.start() == base && same && o == 0).then_some(base)
                    });
                (Some(file), base)
            };
            (
                start as u64,
                vma.end() as u64,
                file,
                pgoff as u64,
                base,
                vdso,
            )
        };
        // The object goes in first, without tables, which are looked up
        // after: over the lookups' reads this frame keeps the object's
        // index, not its parts.
        let g = self.inner.as_mut()?;
        // What overlaps it is stale (the mappings changed during the walk).
        g.retain(|o| o.end <= start || o.start >= end);
        let i = g.insert((start, end, pgoff, base.unwrap_or(0) as u64, vdso), file)?;
        let o = g.objects.get_mut(i)?;
        // Taken for the lookups and put back (the object is still at `i`:
        // nothing in between adds or drops objects).
        let file = o.file.take();
        let shared = match (&file, base) {
            (Some(f), Some(_)) if shared_enabled() => {
                file_rows(r, f, ws, &mut g.counts.files_found)
            }
            _ => None,
        };
        let o = g.objects.get_mut(i)?;
        o.file = file;
        match (shared, base) {
            (Some(u), _) => {
                o.hdr = Some(u.0.info.hdr);
                o.shared = Some(u);
            }
            (None, Some(base)) => {
                // Read into the object's own hdr, not a copy in this frame.
                let h = o.hdr.insert(cfi::Hdr::NONE);
                let found = elf::locate(r, base as u64, ws)
                    .and_then(|at| cfi::read_hdr_to(r, at, ws, h).ok());
                if found.is_none() {
                    o.hdr = None;
                    g.counts.no_eh_frame = g.counts.no_eh_frame.saturating_add(1);
                }
            }
            (None, None) => {
                g.counts.no_object = g.counts.no_object.saturating_add(1);
            }
        }
        Some(i)
    }

    /// Count this walk's outcome (`stats`, the lookups, how it ended).
    /// Out of line: its frame is not under the walk's.
    #[inline(never)]
    pub(crate) fn account(&self, stats: &TableStats, stop: Stop) {
        let add = |i: usize, v: u64| {
            if let Some(c) = STATS.get(i) {
                c.add(v, Relaxed);
            }
        };
        add(WALKS, 1);
        add(TABLE_FRAMES, stats.table_frames.into());
        add(FP_FRAMES, stats.fp_frames.into());
        add(NO_TABLES, stats.no_tables.into());
        add(READS, stats.reads.into());
        add(END_OF_STACK, (stop == Stop::EndOfStack).into());
        let c = self.inner.as_ref().map(|g| g.counts).unwrap_or_default();
        add(ROW_HITS, c.hits.into());
        // The others are 0 in a warm walk (nothing looked up, compiled or
        // refused): adding 0 changes nothing, so they are added only when
        // one is not, one test instead of 25 atomic adds.
        let budget = u32::from(stats.budget_exhausted);
        let fp_unknown = u32::from(stop == Stop::FpUnknown);
        let revalidated = u32::from(c.revalidated);
        let rare = [
            (LOOKUPS, c.lookups),
            (NO_OBJECT, c.no_object),
            (NO_EH_FRAME, c.no_eh_frame),
            (BUDGET_EXHAUSTED, budget),
            (FP_UNKNOWN, fp_unknown),
            (ROW_MISSES, c.misses),
            (EVICTIONS, c.evictions),
            (LOOKUPS_CAPPED, c.capped),
            (REVALIDATIONS, revalidated),
            (FILES_FOUND, c.files_found),
        ];
        if rare.iter().any(|&(_, n)| n != 0) {
            for (i, n) in rare {
                add(i, n.into());
            }
        }
        if stats.refusals != 0 {
            for (i, &n) in stats.refused.iter().enumerate() {
                add(REFUSED + i, n.into());
            }
        }
    }
}

/// What [`TaskTables::fill`] did: `None` if the pc's object has no
/// tables, else whether its row is now compiled (which
/// [`TaskTables::compiled`] then looks up) or why not.
type Filled = Option<Result<(), Cause>>;

impl TaskTables<'_> {
    /// [`Tables::row`] where [`Tables::known`] has no answer: the row of
    /// `pc` compiled into the rows of its object (`self.last`, known), or
    /// its file's.
    #[inline(always)]
    fn fill<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, pc: u64, ws: WordSize) -> Filled {
        // The object's hdr is not copied here: this frame is under both.
        let o = self.inner.as_ref()?.objects.get(self.last)?;
        o.hdr.as_ref()?;
        if o.shared.is_some() && o.file.is_some() {
            self.fill_shared(r, pc, ws)
        } else {
            self.fill_own(r, pc, ws)
        }
    }

    /// [`TaskTables::fill`] into the rows of the object's file.  Out of
    /// line, as [`TaskTables::fill_own`]: each frame, over the
    /// compilation's, has only its own locals.
    #[inline(never)]
    fn fill_shared<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
    ) -> Filled {
        let g: &mut Inner = self.inner.as_mut()?;
        let o = g.objects.get(self.last)?;
        let (Some(u), Some(file)) = (&o.shared, &o.file) else {
            return None;
        };
        // The file's rows, at offsets from the object's base.
        let f = &*u.0;
        let rel = match ws {
            WordSize::W8 => pc.wrapping_sub(o.base),
            WordSize::W4 => pc.wrapping_sub(o.base) & 0xffff_ffff,
        };
        let rows = f.rows.lock();
        // Another mm's walk may have compiled it since it was asked.
        if rows.lookup(rel).is_some() {
            g.counts.hits = g.counts.hits.saturating_add(1);
            return Some(Ok(()));
        }
        g.counts.misses = g.counts.misses.saturating_add(1);
        let scratch = match scratch_of(&mut g.scratch) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        // The object's hdr is its file's.
        let (res, evicted) = f.fill(rows, r, file, &f.info.hdr, ws, rel, scratch);
        g.counts.evictions = g.counts.evictions.saturating_add(evicted.into());
        Some(res.map_err(|e| e.cause()))
    }

    /// [`TaskTables::fill`] into the object's own rows (the vDSO's, or an
    /// object whose file's rows are not shared), within the mm's cap.
    #[inline(never)]
    fn fill_own<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, pc: u64, ws: WordSize) -> Filled {
        let mut i = self.last;
        let g: &mut Inner = self.inner.as_mut()?;
        let o = g.objects.get(i)?;
        let hdr = o.hdr?;
        if o.rows.lookup(pc).is_some() {
            g.counts.hits = g.counts.hits.saturating_add(1);
            return Some(Ok(()));
        }
        g.counts.misses = g.counts.misses.saturating_add(1);
        if g.bytes >= cap() {
            // Over the cap: drop every other object and every row, and
            // start again from this object.
            let start = o.start;
            g.retain(|o| o.start == start);
            g.memo_clear();
            if let Some(o) = g.objects.get_mut(0) {
                let before = o.bytes();
                o.rows = Rows::default();
                let after = o.bytes();
                g.add_bytes(before, after);
            }
            i = 0;
            self.last = 0;
            g.counts.evictions = g.counts.evictions.saturating_add(1);
        }
        let o = g.objects.get_mut(i)?;
        let before = o.bytes();
        let scratch = match scratch_of(&mut g.scratch) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        let res = o.rows.compile_pc(r, &hdr, ws, pc, scratch);
        let after = o.bytes();
        g.add_bytes(before, after);
        Some(res.map_err(|e| e.cause()))
    }
}

impl TaskTables<'_> {
    /// The row of `pc` in the rows of its object (its own or its file's),
    /// put in the memo; `Some(None)` for an object without tables, `None`
    /// if the object is not known or the row not compiled.  Not counted.
    #[inline(always)]
    fn compiled(&mut self, pc: u64, ws: WordSize) -> Option<Option<Found>> {
        let g = self.inner.as_mut()?;
        let i = rows::object_of(&g.objects, self.last, pc, |o| (o.start, o.end))?;
        self.last = i;
        let o = g.objects.get(i)?;
        if o.hdr.is_none() {
            return Some(None);
        }
        let found = match (&o.shared, &o.file) {
            (Some(u), Some(_)) => {
                let rel = match ws {
                    WordSize::W8 => pc.wrapping_sub(o.base),
                    WordSize::W4 => pc.wrapping_sub(o.base) & 0xffff_ffff,
                };
                u.0.rows.lock().lookup(rel)?
            }
            _ => o.rows.lookup(pc)?,
        };
        memo_put(&mut g.memo, pc, ws, found);
        Some(Some(found))
    }

    /// [`Tables::row`]'s answer after [`TaskTables::fill`], into `slot`:
    /// the row just compiled (or found compiled by another mm's walk),
    /// looked up beside the compilation's frames, not in them.  A shared
    /// row evicted by another mm's compilation in between is refused for
    /// this frame, as a row that does not fit.  Out of line, and written
    /// into the walk's slot, not returned: nothing of it is in the frame
    /// the walk's asks are settled from, which is over every
    /// compilation's.
    #[inline(never)]
    fn just_compiled(&mut self, pc: u64, ws: WordSize, slot: &mut Option<Answer>) {
        *slot = Some(match self.compiled(pc, ws) {
            Some(found) => found.map(Ok),
            None => Some(Err(cfi::Refusal::Bound(cfi::Bound::Memory).cause())),
        });
    }

    /// [`Tables::known`]'s answer into `slot`, if it has one.  Out of
    /// line, as [`TaskTables::just_compiled`].
    #[inline(never)]
    fn known_into(&mut self, pc: u64, ws: WordSize, slot: &mut Option<Answer>) -> bool {
        match self.known(pc, ws) {
            Some(a) => {
                *slot = Some(a);
                true
            }
            None => false,
        }
    }
}

impl Tables for TaskTables<'_> {
    #[inline]
    fn row<M: UserBytes>(&mut self, r: &mut Reader<'_, M>, pc: u64, ws: WordSize) -> Answer {
        let mut slot = None;
        self.row_into(r, pc, ws, &mut slot);
        slot.flatten()
    }

    /// The answers are written into `slot` by out-of-line functions
    /// ([`TaskTables::known_into`], [`TaskTables::just_compiled`]): this
    /// frame, inlined into the walk's caller, over every lookup and
    /// compilation, holds none.
    #[inline]
    fn row_into<M: UserBytes>(
        &mut self,
        r: &mut Reader<'_, M>,
        pc: u64,
        ws: WordSize,
        slot: &mut Option<Answer>,
    ) {
        if self.known_into(pc, ws, slot) {
            return;
        }
        let Some(g) = self.inner.as_ref() else {
            *slot = Some(None);
            return;
        };
        if rows::object_of(&g.objects, self.last, pc, |o| (o.start, o.end)).is_none() {
            let Some(i) = self.add_object(r, pc, ws) else {
                *slot = Some(None);
                return;
            };
            self.last = i;
            // Its rows may be its file's, compiled before.
            if self.known_into(pc, ws, slot) {
                return;
            }
        }
        match self.fill(r, pc, ws) {
            None => *slot = Some(None),
            Some(Err(e)) => *slot = Some(Some(Err(e))),
            Some(Ok(())) => self.just_compiled(pc, ws, slot),
        }
    }

    /// `row`'s answer where it takes no work: the memo's, or the rows of
    /// a known object (its own or its file's) where they hold the pc;
    /// counted as `row` counts them.  An object's lookup or a compilation
    /// is left to `row`, which the walk calls from a frame below its own.
    #[inline]
    fn known(&mut self, pc: u64, ws: WordSize) -> Option<Answer> {
        let Some(g) = self.inner.as_mut() else {
            return Some(None);
        };
        let found = match g.memo.as_ref().and_then(|m| m.get(pc, ws)) {
            Some(found) => found,
            // An object without tables is known to have none: an answer
            // without work (not an ask left to `row`).
            None => match self.compiled(pc, ws)? {
                Some(found) => found,
                None => return Some(None),
            },
        };
        if let Some(g) = self.inner.as_mut() {
            g.counts.hits = g.counts.hits.saturating_add(1);
        }
        Some(Some(Ok(found)))
    }

    fn bare(&self, pc: u64) -> Option<(u64, u64)> {
        let o = self.inner.as_ref()?.objects.get(self.last)?;
        (o.hdr.is_none() && o.start <= pc && pc < o.end).then_some((o.start, o.end))
    }

    #[inline]
    fn memo(&self) -> Option<&PcMemo> {
        self.inner.as_ref()?.memo.as_deref()
    }

    #[inline]
    fn memo_hits(&mut self, n: u32) {
        if let Some(g) = self.inner.as_mut() {
            g.counts.hits = g.counts.hits.saturating_add(n);
        }
    }
}

/// Keep the global count of cached bytes.
fn gauge(before: usize, after: usize) {
    if let Some(c) = STATS.get(CACHE_BYTES) {
        c.add((after as u64).wrapping_sub(before as u64), Relaxed);
    }
}

// The counters, in the order of `NAMES`.
const WALKS: usize = 0;
const TABLE_FRAMES: usize = 1;
const FP_FRAMES: usize = 2;
const NO_TABLES: usize = 3;
const READS: usize = 4;
const LOOKUPS: usize = 5;
const NO_OBJECT: usize = 6;
const NO_EH_FRAME: usize = 7;
const BUDGET_EXHAUSTED: usize = 8;
const END_OF_STACK: usize = 9;
const FP_UNKNOWN: usize = 10;
const ROW_HITS: usize = 11;
const ROW_MISSES: usize = 12;
const EVICTIONS: usize = 13;
const LOOKUPS_CAPPED: usize = 14;
const REVALIDATIONS: usize = 15;
const CACHE_BYTES: usize = 16;
const SHRUNK: usize = 17;
const FILES_FOUND: usize = 18;
const FILES_CACHED: usize = 19;
const FILE_BYTES: usize = 20;
const REFUSED: usize = 21;
const NR_STATS: usize = REFUSED + Cause::COUNT;

/// The counters' names, as debugfs `unwind_user/stats` prints them.
const NAMES: [&CStr; NR_STATS] = [
    c"walks",
    c"table_frames",
    c"fp_frames",
    c"no_tables",
    c"reads",
    c"lookups",
    c"no_object",
    c"no_eh_frame",
    c"budget_exhausted",
    c"end_of_stack",
    c"fp_unknown",
    c"row_hits",
    c"row_misses",
    c"evictions",
    c"lookups_capped",
    c"revalidations",
    c"cache_bytes",
    c"shrunk",
    c"files_found",
    c"files_cached",
    c"file_bytes",
    // `refused_` + `Cause::NAMES`, in order (checked by KUnit).
    c"refused_no_table",
    c"refused_no_fde",
    c"refused_fault",
    c"refused_malformed",
    c"refused_encoding",
    c"refused_augmentation",
    c"refused_opcode",
    c"refused_ra_column",
    c"refused_ra_rule",
    c"refused_fp_rule",
    c"refused_cfa_register",
    c"refused_cfa_expression",
    c"refused_fp_unknown",
    c"refused_cfa_not_above",
    c"refused_cfa_unaligned",
    c"refused_bound",
];

static STATS: [Atomic<u64>; NR_STATS] = [const { Atomic::new(0) }; NR_STATS];

/// Counter `i`: its name and value, `None` past the last.
pub(crate) fn stat(i: usize) -> Option<(&'static CStr, u64)> {
    Some((*NAMES.get(i)?, STATS.get(i)?.load(Relaxed)))
}

/// debugfs `unwind_user/stats`: a `name value` line per counter.
struct Stats;

impl core::fmt::Debug for Stats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // `kernel::debugfs` ends the output with a newline.
        let mut i = 0;
        while let Some((name, val)) = stat(i) {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{} {}", name.to_str().unwrap_or("?"), val)?;
            i += 1;
        }
        Ok(())
    }
}

/// The debugfs file of [`debugfs_init()`], never removed: the counters
/// live as long as the kernel.  Kept here, not forgotten, so that kmemleak
/// (which scans static data for pointers) sees the file, and through it
/// its directory, referenced.  Written once, never read.
static STATS_FILE: Atomic<*mut kernel::debugfs::File<Stats>> = Atomic::new(core::ptr::null_mut());

/// Create debugfs `unwind_user/stats` (mode 0400), for the rest of the
/// kernel's life.
pub(crate) fn debugfs_init() -> Result {
    let dir = Dir::new(c"unwind_user");
    let file = KBox::pin_init(dir.read_only_file(c"stats", Stats), GFP_KERNEL)?;
    // SAFETY: The file stays where its box put it: the raw pointer is only
    // kept in `STATS_FILE`, never used to move or free it.
    let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(file) });
    STATS_FILE.store(raw, Relaxed);
    Ok(())
}

#[cfg(CONFIG_UNWIND_USER_RUST_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(unwind_rust_tables)]
mod tests {
    use super::*;

    #[test]
    fn cfi_shared_cases() {
        // The interpreter on the made-up tables of
        // `crate::logic::cfi_cases` (the host tests run the same cases).
        use crate::logic::cfi_cases::{run, CASES};
        assert!(CASES.len() >= 20);
        for case in CASES {
            let (got, reads) = run(case);
            if got != case.want {
                pr_err!(
                    "cfi case {}: got {:?}, want {:?}\n",
                    case.name,
                    got,
                    case.want
                );
            }
            assert_eq!(got, case.want);
            assert!(reads <= cfi::MAX_READS);
        }
    }

    #[test]
    fn compiled_rows_are_the_interpreters() {
        // Every shared case's FDE compiled into the kernel's stores: the
        // row for the case's pc is the interpreter's, packed.
        use crate::logic::cfi_cases::{CaseMemory, CASES, HDR};
        for case in CASES {
            let pc = if case.frame.ip_is_return_address {
                case.frame.ip.wrapping_sub(1)
            } else {
                case.frame.ip
            };
            let arch = cfi::Arch::of(case.ws);
            let mut mem = CaseMemory { case, reads: 0 };
            let mut r = Reader::new(&mut mem);
            let Ok(hdr) = cfi::read_hdr(&mut r, HDR, case.ws) else {
                continue;
            };
            let want = cfi::rules_in(&mut r, &hdr, case.ws, &case.frame);
            let mut mem = CaseMemory { case, reads: 0 };
            let mut r = Reader::new(&mut mem);
            let mut rows = Rows::default();
            let scratch = new_scratch();
            assert!(scratch.is_some());
            let Some(mut scratch) = scratch else { return };
            let got = rows.fill(&mut r, &hdr, case.ws, pc, &mut scratch);
            match (got, want) {
                (Ok((row, signal)), want) => {
                    let packed = PackedRow::pack(row.start, want.map(|(w, _)| w), arch);
                    if row != packed || want.is_ok_and(|(_, s)| s != signal) {
                        pr_err!("rows case {}: {:?} vs {:?}\n", case.name, row, packed);
                    }
                    assert_eq!(row, packed);
                    // Remembered: found again, without a read.
                    assert_eq!(rows.lookup(pc), Some((row, signal)));
                    // And through the memo, allocated as `mm_tables`
                    // allocates it (zeroed: empty).
                    let memo = KBox::init(PcMemo::init_zeroed(), GFP_KERNEL_ACCOUNT);
                    assert!(memo.is_ok());
                    let Ok(mut memo) = memo else { return };
                    assert_eq!(memo.get(pc, case.ws), None);
                    memo.put(pc, case.ws, (row, signal));
                    assert_eq!(memo.get(pc, case.ws), Some((row, signal)));
                    memo.clear();
                    assert_eq!(memo.get(pc, case.ws), None);
                }
                // Only a transient refusal is not remembered.
                (Err(e), _) => {
                    assert!(cfi::transient(e));
                    assert!(rows.lookup(pc).is_none());
                }
            }
        }
    }

    /// `known()` answers for an object without tables without work: `no
    /// tables` (`Some(None)`), not an ask left to `row()` (`None`), which
    /// would settle every such frame of every walk (the same answer, by
    /// the longer path: a static program's samples cost 0.2 us more
    /// when it did, 95a1b83 to e492cd1); a pc of no known object is left
    /// to `row()`.  On an object inserted into the tables of the mm KUnit
    /// gives this thread at its first `vm_mmap()`.
    #[test]
    fn known_answers_for_objects_without_tables() {
        const PAGE: usize = 4096;
        // The mm and its tables are dropped when the test ends.
        let base = crate::walk::kunit_map_anon(1);
        let task = kernel::current!();
        let Some(mm) = task.mm() else {
            panic!("no mm after vm_mmap()");
        };
        let (start, end) = (base as u64, (base + PAGE) as u64);
        // The tables' mutex is released before any assertion (a failed
        // one ends the test's thread where it is).
        let (i, inside, outside) = {
            let mut t = TaskTables::new(mm);
            t.begin(WordSize::W8);
            let i = t
                .inner
                .as_mut()
                .and_then(|g| g.insert((start, end, 0, 0, false), None));
            let inside = t.known(start + 16, WordSize::W8);
            let outside = t.known(end + PAGE as u64, WordSize::W8);
            (i, inside, outside)
        };
        assert_eq!(i, Some(0));
        assert_eq!(inside, Some(None));
        assert_eq!(outside, None);
    }

    #[test]
    fn refusal_counter_names_are_the_causes() {
        for (i, name) in Cause::NAMES.iter().enumerate() {
            let c = NAMES[REFUSED + i].to_bytes();
            assert_eq!(c.strip_prefix(b"refused_"), Some(name.as_bytes()));
        }
        assert!(stat(NR_STATS).is_none());
    }
}
