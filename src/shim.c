// SPDX-License-Identifier: GPL-2.0
/*
 * The C side of the Rust unwinder: the statics only C can define, and the
 * user context of current read with the arch hooks of <asm/unwind_user.h>.
 * Everything else is in the Rust files next to this one.
 */
#include <linux/highmem.h>
#include <linux/kstrtox.h>
#include <linux/mmap_lock.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/secretmem.h>
#include <linux/shmem_fs.h>
#include <linux/shrinker.h>
#include <linux/spinlock.h>
#include <linux/srcu.h>
#include <linux/sysctl.h>
#include <linux/unwind_user.h>
#include <linux/unwind_user_rust.h>
#include <asm/unwind_user_rust.h>

/* The per-CPU counter of context cookies (see cookie.rs). */
DEFINE_PER_CPU(u32, unwind_ctx_ctr);
/* Readers: the task_work calling callbacks.  Writer: cancel. */
DEFINE_SRCU(unwind_srcu);
/* Guards registering and cancelling callbacks. */
DEFINE_MUTEX(unwind_callback_mutex);

/**
 * unwind_user_arch_frames - the arch's frame rules for word size @ws
 * @ws: 8, or 4 for a compat task
 * @fp: the frame-pointer frame (ARCH_INIT_USER_FP_FRAME)
 * @entry: the frame at a function's first instruction
 *	(ARCH_INIT_USER_FP_ENTRY_FRAME)
 */
void unwind_user_arch_frames(unsigned int ws, struct unwind_user_frame *fp,
			     struct unwind_user_frame *entry)
{
	*fp = (struct unwind_user_frame){ ARCH_INIT_USER_FP_FRAME(ws) };
	*entry = (struct unwind_user_frame){ ARCH_INIT_USER_FP_ENTRY_FRAME(ws) };
}

/**
 * unwind_user_get_regs - the user context a walk of current starts from
 * @r: filled in on success
 *
 * Return: 0, or -EINVAL if current has no user context to unwind (a kernel
 * thread, not entered from user mode, VM86, a segment that cannot be
 * resolved, an NMI while another mm is loaded).  Any context: does not
 * sleep or take a lock.
 */
int unwind_user_get_regs(struct unwind_user_regs *r)
{
	struct pt_regs *regs = task_pt_regs(current);

	if ((current->flags & PF_KTHREAD) || !user_mode(regs))
		return -EINVAL;
	/*
	 * An NMI that hit switch_mm_irqs_off() may run with another mm than
	 * current's loaded: user addresses would then read that address
	 * space (perf's user callchain checks the same).  Interrupts are
	 * off across a switch, so only an NMI can see it.
	 */
	if (in_nmi() && !nmi_uaccess_okay())
		return -EINVAL;
	r->ws = unwind_user_word_size(regs);
	if (!r->ws)
		return -EINVAL;
	r->ip = instruction_pointer(regs);
	r->sp = user_stack_pointer(regs);
	r->fp = frame_pointer(regs);
	r->bx = unwind_user_bx(regs);
	r->at_function_entry = unwind_user_at_function_start(regs);
	unwind_user_arch_frames(r->ws, &r->fp_frame, &r->entry_frame);
	r->user_limit = unwind_user_limit(regs);
	return unwind_user_segment_bases(regs, &r->cs_base, &r->ss_base);
}

/* is_user_task(), for Rust (a static inline). */
bool unwind_user_is_user_task(struct task_struct *task)
{
	return is_user_task(task);
}

/**
 * unwind_user_visit_threads - call @fn on every thread, under RCU
 * @fn: must not sleep
 * @data: passed to @fn
 */
void unwind_user_visit_threads(unwind_thread_fn fn, void *data)
{
	struct task_struct *g, *t;

	guard(rcu)();
	for_each_process_thread(g, t)
		fn(t, data);
}

#ifdef CONFIG_UNWIND_USER_RUST_TABLES
/* Deferred walks step by .eh_frame tables (tables.rs); on at boot. */
bool unwind_user_tables __read_mostly = true;
/* Compiled rows kept per mm, at most (tables.rs). */
unsigned int unwind_user_tables_max_kb __read_mostly = 1024;
/* Rows compiled from files, shared by every mm (tables.rs); on at boot. */
bool unwind_user_tables_shared __read_mostly = true;
/* Rows compiled from files kept in all, at most (tables.rs). */
unsigned int unwind_user_tables_shared_max_kb __read_mostly = 16384;

static int __init unwind_user_tables_setup(char *s)
{
	return !kstrtobool(s, &unwind_user_tables);
}
__setup("unwind_user_tables=", unwind_user_tables_setup);

void *unwind_user_mm_install(struct mm_struct *mm, void *new)
{
	void *old = cmpxchg(&mm->unwind_user_tables, NULL, new);

	return old ?: new;
}

bool unwind_user_mm_seq(struct mm_struct *mm, unsigned int *seq)
{
	return mmap_lock_speculate_try_begin(mm, seq);
}

/*
 * Whether @file's rows can be compiled from its page cache, and the identity
 * of its contents: not for DAX (no page cache), secretmem, or a mapping with
 * no ->read_folio() other than shmem's.
 */
bool unwind_user_file_key(struct file *file, struct unwind_user_file_key *key)
{
	struct address_space *mapping = file->f_mapping;
	struct inode *inode = file_inode(file);
	struct timespec64 ctime;

	if (IS_DAX(inode) || secretmem_mapping(mapping) ||
	    (!mapping->a_ops->read_folio && !shmem_mapping(mapping)))
		return false;
	ctime = inode_get_ctime(inode);
	key->dev = inode->i_sb->s_dev;
	key->ino = inode->i_ino;
	key->generation = inode->i_generation;
	key->ctime_sec = ctime.tv_sec;
	key->ctime_nsec = ctime.tv_nsec;
	key->size = i_size_read(inode);
	return true;
}

/*
 * Copy @len bytes at @pos of @r->file's page cache to @buf, as uprobes'
 * __copy_insn() reads an instruction: no fsnotify event, no atime.  The
 * folio read is kept referenced in @r for the next read (an FDE's reads
 * are near each other) until unwind_user_file_reader_done().  May sleep
 * (reading the pages in).  0, or -EFAULT past the end, or the read's
 * error.
 */
int unwind_user_file_read(struct unwind_user_file_reader *r, u64 pos,
			  void *buf, size_t len)
{
	struct address_space *mapping = r->file->f_mapping;
	u64 size = i_size_read(file_inode(r->file));

	if (pos > size || len > size - pos)
		return -EFAULT;
	while (len) {
		struct folio *folio = r->folio;
		size_t off, n;

		if (!folio || pos < folio_pos(folio) ||
		    pos - folio_pos(folio) >= folio_size(folio)) {
			unwind_user_file_reader_done(r);
			if (shmem_mapping(mapping))
				folio = shmem_read_folio(mapping, pos >> PAGE_SHIFT);
			else
				folio = read_mapping_folio(mapping, pos >> PAGE_SHIFT,
							   r->file);
			if (IS_ERR(folio))
				return PTR_ERR(folio);
			r->folio = folio;
		}
		off = pos - folio_pos(folio);
		n = min(len, folio_size(folio) - off);
		memcpy_from_folio(buf, folio, off, n);
		buf += n;
		pos += n;
		len -= n;
	}
	return 0;
}

void unwind_user_file_reader_done(struct unwind_user_file_reader *r)
{
	if (r->folio)
		folio_put(r->folio);
	r->folio = NULL;
}

/*
 * Every mm's cache of compiled rows, for the shrinker.  The kernel crate
 * has no shrinker abstraction (Rust Binder keeps a driver-local one), so
 * the glue is here and the policy in tables.rs: drop a cache's rows unless
 * a walk holds it.  Not memcg-aware: the rows are charged to the process's
 * memcg, but reclaim gives them back only on global pressure (and by
 * drop_caches).
 */
static DEFINE_SPINLOCK(unwind_user_tables_lock);
static LIST_HEAD(unwind_user_tables_list);

void unwind_user_tables_link(struct list_head *link)
{
	spin_lock(&unwind_user_tables_lock);
	list_add_tail(link, &unwind_user_tables_list);
	spin_unlock(&unwind_user_tables_lock);
}

void unwind_user_tables_unlink(struct list_head *link)
{
	spin_lock(&unwind_user_tables_lock);
	list_del_init(link);
	spin_unlock(&unwind_user_tables_lock);
}

static unsigned long unwind_user_tables_count(struct shrinker *s,
					      struct shrink_control *sc)
{
	return unwind_user_tables_pages() ?: SHRINK_EMPTY;
}

/*
 * Drop caches until @sc->nr_to_scan pages' worth of rows are freed, then
 * make the first cache not visited the list's front, so that the next scan
 * starts there and every cache takes its turn.
 */
static unsigned long unwind_user_tables_scan(struct shrinker *s,
					     struct shrink_control *sc)
{
	unsigned long goal = sc->nr_to_scan << PAGE_SHIFT, bytes;
	struct list_head *link;

	/* First the rows compiled from files (no lock held: a mutex). */
	bytes = unwind_user_tables_shrink_files(goal);
	spin_lock(&unwind_user_tables_lock);
	list_for_each(link, &unwind_user_tables_list) {
		if (bytes >= goal)
			break;
		bytes += unwind_user_tables_shrink(link);
	}
	if (link != &unwind_user_tables_list)
		list_rotate_to_front(link, &unwind_user_tables_list);
	spin_unlock(&unwind_user_tables_lock);
	return DIV_ROUND_UP(bytes, PAGE_SIZE) ?: SHRINK_STOP;
}

static int __init unwind_user_tables_shrinker(void)
{
	struct shrinker *s;

	unwind_user_tables_files_init();
	s = shrinker_alloc(0, "unwind_user_tables");
	if (!s)
		return -ENOMEM;
	s->count_objects = unwind_user_tables_count;
	s->scan_objects = unwind_user_tables_scan;
	shrinker_register(s);
	return 0;
}
late_initcall(unwind_user_tables_shrinker);

#ifdef CONFIG_SYSCTL
static const struct ctl_table unwind_user_sysctls[] = {
	{
		.procname	= "unwind_user_tables",
		.data		= &unwind_user_tables,
		.maxlen		= sizeof(bool),
		.mode		= 0644,
		.proc_handler	= proc_dobool,
	},
	{
		.procname	= "unwind_user_tables_max_kb",
		.data		= &unwind_user_tables_max_kb,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec,
	},
	{
		.procname	= "unwind_user_tables_shared",
		.data		= &unwind_user_tables_shared,
		.maxlen		= sizeof(bool),
		.mode		= 0644,
		.proc_handler	= proc_dobool,
	},
	{
		.procname	= "unwind_user_tables_shared_max_kb",
		.data		= &unwind_user_tables_shared_max_kb,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec,
	},
};

static int __init unwind_user_tables_sysctl(void)
{
	register_sysctl_init("kernel", unwind_user_sysctls);
	return 0;
}
late_initcall(unwind_user_tables_sysctl);
#endif

#ifdef CONFIG_DEBUG_FS
/* unwind_user/stats, a kernel::debugfs file made by tables.rs. */
static int __init unwind_user_tables_debugfs(void)
{
	return unwind_user_tables_debugfs_init();
}
late_initcall(unwind_user_tables_debugfs);
#endif
#endif
