/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the Rust implementation of unwind_user (kernel/unwind/rust/) needs
 * from C: the interrupted user context of current, gathered with the same
 * arch hooks upstream's kernel/unwind/user.c uses, plus the statics that
 * only C can define (a per-CPU variable, a static SRCU, a mutex); and the
 * interface between perf (kernel/events/core.c) and the Rust perf glue
 * (kernel/unwind/rust/perf.rs).
 */
#ifndef _LINUX_UNWIND_USER_RUST_H
#define _LINUX_UNWIND_USER_RUST_H

#include <linux/types.h>
#include <linux/percpu-defs.h>
#include <linux/perf_event.h>
#include <linux/unwind_user_types.h>

struct srcu_struct;
struct mutex;
struct task_struct;
struct mm_struct;

/**
 * struct unwind_user_regs - where a user stack walk starts
 * @ip:		instruction pointer (offset in the code segment for compat)
 * @sp:		stack pointer (offset in the stack segment for compat)
 * @fp:		frame pointer (offset in the stack segment for compat)
 * @bx:		%rbx (%ebx), which an unwind table's CFA may be based on
 * @cs_base:	linear base of the code segment, 0 unless compat with an LDT
 * @ss_base:	linear base of the stack segment, 0 unless compat with an LDT
 * @user_limit:	return addresses at or above this are not user addresses
 * @fp_frame:	the arch's frame-pointer frame (ARCH_INIT_USER_FP_FRAME)
 * @entry_frame: the frame at a function's first instruction
 *		(ARCH_INIT_USER_FP_ENTRY_FRAME)
 * @ws:		word size: 8, or 4 for a compat task
 * @at_function_entry: the topmost frame is at a function's first instruction
 */
struct unwind_user_regs {
	unsigned long	ip;
	unsigned long	sp;
	unsigned long	fp;
	unsigned long	bx;
	unsigned long	cs_base;
	unsigned long	ss_base;
	unsigned long	user_limit;
	struct unwind_user_frame fp_frame;
	struct unwind_user_frame entry_frame;
	unsigned int	ws;
	bool		at_function_entry;
};

void unwind_user_arch_frames(unsigned int ws, struct unwind_user_frame *fp,
			     struct unwind_user_frame *entry);
int unwind_user_get_regs(struct unwind_user_regs *regs);
bool unwind_user_is_user_task(struct task_struct *task);
typedef void (*unwind_thread_fn)(struct task_struct *t, void *data);
void unwind_user_visit_threads(unwind_thread_fn fn, void *data);

#ifndef __BINDGEN__
/* Rust declares it as a per-CPU symbol (cookie.rs), not bindgen's plain u32. */
DECLARE_PER_CPU(u32, unwind_ctx_ctr);
#endif
extern struct srcu_struct unwind_srcu;
extern struct mutex unwind_callback_mutex;

#ifdef CONFIG_UNWIND_USER_RUST_TABLES
/* Deferred walks step by the objects' .eh_frame tables (tables.rs). */
extern bool unwind_user_tables;
/* The per-mm cap of compiled rows, in KiB (sysctl). */
extern unsigned int unwind_user_tables_max_kb;
/* Rows compiled from files are shared by every mm (sysctl). */
extern bool unwind_user_tables_shared;
/* The cap of rows compiled from files, all files, in KiB (sysctl). */
extern unsigned int unwind_user_tables_shared_max_kb;
/* The identity of a file's contents, for the rows compiled from it. */
struct unwind_user_file_key {
	u64 dev;
	u64 ino;
	s64 ctime_sec;
	s64 size;
	u32 ctime_nsec;
	u32 generation;
};
/* C, for Rust: whether @file's page cache can be read, and its key. */
bool unwind_user_file_key(struct file *file, struct unwind_user_file_key *key);
/* A file's page cache read by Rust: the last folio read kept referenced. */
struct unwind_user_file_reader {
	struct file *file;
	struct folio *folio;
};
/* C, for Rust: read @len bytes at @pos of @r's file; 0 or -errno. */
int unwind_user_file_read(struct unwind_user_file_reader *r, u64 pos,
			  void *buf, size_t len);
/* C, for Rust: let go of the folio @r keeps. */
void unwind_user_file_reader_done(struct unwind_user_file_reader *r);
/* Rust: create debugfs unwind_user/stats (kernel::debugfs); 0 or -errno. */
int unwind_user_tables_debugfs_init(void);
/* Rust: free @mm's compiled rows (no task uses @mm any more). */
void unwind_user_mm_exit(struct mm_struct *mm);
static inline void unwind_user_mm_init(struct mm_struct *mm)
{
	mm->unwind_user_tables = NULL;
}
/* C, for Rust: install @new as @mm's rows unless there are some already. */
void *unwind_user_mm_install(struct mm_struct *mm, void *new);
/* C, for Rust: @mm's mmap sequence count in *@seq, false if write-locked. */
bool unwind_user_mm_seq(struct mm_struct *mm, unsigned int *seq);
/* C, for Rust: put a new cache's @link on, or take it off, the shrinker's list. */
void unwind_user_tables_link(struct list_head *link);
void unwind_user_tables_unlink(struct list_head *link);
/*
 * Rust, for the shrinker: pages' worth of rows cached; drop the rows of the
 * cache at @link, returning the bytes freed (the caller holds the list's lock).
 */
unsigned long unwind_user_tables_pages(void);
unsigned long unwind_user_tables_shrink(struct list_head *link);
/* Rust, for the shrinker: drop rows compiled from files; the bytes freed. */
unsigned long unwind_user_tables_shrink_files(unsigned long goal);
/* Rust: make the registry of rows compiled from files ready (once). */
void unwind_user_tables_files_init(void);
#else
static inline void unwind_user_mm_init(struct mm_struct *mm) { }
static inline void unwind_user_mm_exit(struct mm_struct *mm) { }
#endif

/* Rust, called by perf: the callchain of a sample, NULL if empty. */
struct perf_callchain_entry *perf_callchain_rust(struct perf_event *event,
						 struct pt_regs *regs);
/* Rust, called by perf_event_init(): register the deferred callback. */
void perf_callchain_deferred_init(void);

/* C, called by Rust: @output on every event side-band records reach. */
typedef void (unwind_perf_output_fn)(struct perf_event *event, void *data);
void perf_callchain_deferred_iterate(unwind_perf_output_fn *output, void *data);

#endif /* _LINUX_UNWIND_USER_RUST_H */
