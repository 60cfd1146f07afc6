// SPDX-License-Identifier: GPL-2.0
/*
 * Micro-benchmarks of deferred user unwinding (CONFIG_UNWIND_DEFERRED_BENCH).
 *
 * The same code times whichever implementation the kernel has (upstream C
 * or Rust): it uses only the C API of <linux/unwind_user.h> and
 * <linux/unwind_deferred.h>.  A user program (tools/testing/selftests/
 * unwind_deferred/deferred_bench.c) writes a command to the control file
 * from a known depth of frame-pointer frames; the command runs in that
 * system call and appends one line to the results:
 *
 *   walk ITERS      unwind_user() of the caller's stack, ITERS times
 *   faultable ITERS unwind_user_faultable() of the caller's stack (the
 *                   deferred walk, into the task's cache), ITERS times,
 *                   the cache reset between two; the first two walks
 *                   are reported apart (first_ns, second_ns: the Rust
 *                   table walk allocates its memo in the second), ns
 *                   is the others (iters: how many)
 *   task ITERS      ITERS rounds of: first request of the entry, repeat
 *                   request, the task_work (walk + callbacks), and the
 *                   reset of the return to user space, each timed
 *   nmi ITERS       the same, the requests made in an NMI the task sends
 *                   itself through the local APIC
 *   irq ITERS       the same, the requests made in a hardirq (irq_work)
 *   tracers N       register N tracers (0..16), cancelling the old ones;
 *                   in every round each of them requests (the first one
 *                   timed), so the task_work calls N callbacks
 *   cancel          time unwind_deferred_cancel() of one tracer
 *   clear           empty the results
 *
 * Each result line: "NAME nr=FRAMES iters=N seg=NS ..." with the total
 * nanoseconds of each timed segment, less the measured cost of reading
 * the clock.  Under QEMU with -icount, nanoseconds count guest
 * instructions, so runs repeat exactly.
 *
 * For test and benchmark kernels only: any root process can make it send
 * NMIs.
 */
#include <linux/debugfs.h>
#include <linux/irq_work.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/stat.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sprintf.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/unwind_deferred.h>
#include <linux/unwind_user.h>
#include <asm/apic.h>
#include <asm/nmi.h>

#define UBE_TRACERS	16
#define UBE_ENTRIES	512
#define UBE_RESULTS	(64 * 1024)

static struct {
	struct mutex		lock;
	struct unwind_work	works[UBE_TRACERS];
	int			nr_works;
	unsigned long		entries[UBE_ENTRIES];
	char			*results;
	size_t			len;
	/* The request made from NMI or IRQ context. */
	struct unwind_work	*target;
	u64			first_ns, repeat_ns;
	int			first_ret, repeat_ret;
	atomic_t		pending;
	u64			clock_ns;	/* one clock read pair */
	atomic_t		calls;
} ube = {
	.lock = __MUTEX_INITIALIZER(ube.lock),
};

static DEFINE_PER_CPU(atomic_t, ube_nmi_expected);

static void ube_callback(struct unwind_work *work,
			 struct unwind_stacktrace *trace, u64 cookie)
{
	atomic_inc(&ube.calls);
}

static u64 ube_now(void)
{
	return ktime_get_mono_fast_ns();
}

/*
 * The cost of one pair of clock reads, subtracted from every segment: the
 * least of 1000 pairs, interrupts off.  (It was their mean: an interrupt
 * in one pair raised it by 82 ns in one boot of make bench, and every
 * segment of that boot came out 82 ns short, a repeated request at 0.)
 */
static void ube_calibrate(void)
{
	unsigned long flags;
	u64 t0, t1, least = U64_MAX;
	int i;

	local_irq_save(flags);
	for (i = 0; i < 1000; i++) {
		t0 = ube_now();
		t1 = ube_now();
		least = min(least, t1 - t0);
	}
	local_irq_restore(flags);
	ube.clock_ns = least;
}

static u64 ube_seg(u64 t0, u64 t1)
{
	u64 d = t1 - t0;

	return d > ube.clock_ns ? d - ube.clock_ns : 0;
}

static __printf(1, 2) void ube_result(const char *fmt, ...)
{
	va_list ap;

	if (ube.len >= UBE_RESULTS - 256)
		return;
	va_start(ap, fmt);
	ube.len += vscnprintf(ube.results + ube.len, UBE_RESULTS - ube.len,
			      fmt, ap);
	va_end(ap);
}

/* The two requests of a round, timed where they are made. */
static void ube_request_pair(void)
{
	u64 t0, t1, t2, cookie;

	t0 = ube_now();
	ube.first_ret = unwind_deferred_request(ube.target, &cookie);
	t1 = ube_now();
	ube.repeat_ret = unwind_deferred_request(ube.target, &cookie);
	t2 = ube_now();
	ube.first_ns = ube_seg(t0, t1);
	ube.repeat_ns = ube_seg(t1, t2);
}

static int ube_nmi(unsigned int cmd, struct pt_regs *regs)
{
	if (!atomic_xchg(this_cpu_ptr(&ube_nmi_expected), 0))
		return NMI_DONE;
	ube_request_pair();
	atomic_set(&ube.pending, 0);
	return NMI_HANDLED;
}

static void ube_irq_work_fn(struct irq_work *w)
{
	ube_request_pair();
	atomic_set(&ube.pending, 0);
}

static DEFINE_PER_CPU(struct irq_work, ube_irq_work) =
	IRQ_WORK_INIT_HARD(ube_irq_work_fn);

enum ube_ctx { UBE_TASK, UBE_NMI, UBE_IRQ };

/*
 * Rounds of: the entry's first request and a repeat (in @ctx), the
 * task_work that the first one queued (the walk and every registered
 * tracer's callback), and what the return to user space does.
 */
static int ube_rounds(enum ube_ctx ctx, int iters)
{
	u64 first = 0, repeat = 0, dispatch = 0, reset = 0, t0, t1, t2;
	static const char * const names[] = { "task", "nmi", "irq" };
	int i, j, bad = 0, calls;

	if (!ube.nr_works)
		return -EINVAL;
	ube.target = &ube.works[0];
	/* Start from a clean entry: run what is pending, then reset. */
	task_work_run();
	unwind_reset_info();
	atomic_set(&ube.calls, 0);
	for (i = 0; i < iters; i++) {
		if (ctx == UBE_TASK) {
			ube_request_pair();
		} else {
			int spin = 1000000;

			atomic_set(&ube.pending, 1);
			preempt_disable();
			if (ctx == UBE_NMI) {
				atomic_set(this_cpu_ptr(&ube_nmi_expected), 1);
				__apic_send_IPI(smp_processor_id(), NMI_VECTOR);
			} else {
				irq_work_queue(this_cpu_ptr(&ube_irq_work));
			}
			preempt_enable();
			while (atomic_read(&ube.pending) && --spin)
				cpu_relax();
			if (!spin)
				return -ETIMEDOUT;
		}
		if (ube.first_ret != 0 || ube.repeat_ret != 1)
			bad++;
		/* The other tracers join the entry (not timed). */
		for (j = 1; j < ube.nr_works; j++) {
			u64 cookie;

			if (unwind_deferred_request(&ube.works[j], &cookie))
				bad++;
		}
		first += ube.first_ns;
		repeat += ube.repeat_ns;
		t0 = ube_now();
		task_work_run();
		t1 = ube_now();
		unwind_reset_info();
		t2 = ube_now();
		dispatch += ube_seg(t0, t1);
		reset += ube_seg(t1, t2);
	}
	calls = atomic_read(&ube.calls);
	ube_result("%s tracers=%d iters=%d first=%llu repeat=%llu dispatch=%llu reset=%llu calls=%d bad=%d\n",
		   names[ctx], ube.nr_works, iters, first, repeat, dispatch,
		   reset, calls, bad);
	return bad || calls != iters * ube.nr_works ? -EIO : 0;
}

static int ube_walk(int iters)
{
	struct unwind_stacktrace trace = { .entries = ube.entries };
	u64 t0, t1;
	int i;

	t0 = ube_now();
	for (i = 0; i < iters; i++)
		unwind_user(&trace, UBE_ENTRIES);
	t1 = ube_now();
	ube_result("walk nr=%u iters=%d ns=%llu\n", trace.nr, iters,
		   ube_seg(t0, t1));
	return trace.nr ? 0 : -EINVAL;
}

static int ube_faultable(int iters)
{
	struct unwind_stacktrace trace = { };
	u64 ns = 0, first = 0, second = 0, t0, dt;
	int i, n = 0, ret;

	for (i = 0; i < iters; i++) {
		/* A new entry for the cache: the walk runs again. */
		unwind_reset_info();
		t0 = ube_now();
		ret = unwind_user_faultable(&trace);
		dt = ube_seg(t0, ube_now());
		if (ret)
			return ret;
		/*
		 * The first two apart: the first may fill caches the others
		 * use, the second may allocate more.
		 */
		if (!i) {
			first = dt;
		} else if (i == 1 && iters > 2) {
			second = dt;
		} else {
			ns += dt;
			n++;
		}
	}
	ube_result("faultable nr=%u iters=%d ns=%llu first_ns=%llu second_ns=%llu\n",
		   trace.nr, n ? n : 1, n ? ns : first, first, second);
	unwind_reset_info();
	return trace.nr ? 0 : -EINVAL;
}

static void ube_cancel_all(void)
{
	while (ube.nr_works)
		unwind_deferred_cancel(&ube.works[--ube.nr_works]);
}

static int ube_tracers(int n)
{
	int ret;

	if (n < 0 || n > UBE_TRACERS)
		return -EINVAL;
	ube_cancel_all();
	while (ube.nr_works < n) {
		ret = unwind_deferred_init(&ube.works[ube.nr_works],
					   ube_callback);
		if (ret)
			return ret;
		ube.nr_works++;
	}
	return 0;
}

/* One cancel, as a perf session closing does, against every thread. */
static int ube_cancel(void)
{
	u64 t0, t1;
	int n = ube.nr_works;

	if (!n)
		return -EINVAL;
	t0 = ube_now();
	unwind_deferred_cancel(&ube.works[--ube.nr_works]);
	t1 = ube_now();
	ube_result("cancel threads=%d ns=%llu\n", nr_threads, ube_seg(t0, t1));
	return 0;
}

static int ube_clear(void)
{
	ube.len = 0;
	return 0;
}

static ssize_t ube_ctl_write(struct file *file, const char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	char buf[64], cmd[16];
	int arg = 0, n, ret;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	n = sscanf(buf, "%15s %d", cmd, &arg);
	if (n < 1)
		return -EINVAL;

	mutex_lock(&ube.lock);
	if (!strcmp(cmd, "walk") && arg > 0)
		ret = ube_walk(arg);
	else if (!strcmp(cmd, "faultable") && arg > 0)
		ret = ube_faultable(arg);
	else if (!strcmp(cmd, "task") && arg > 0)
		ret = ube_rounds(UBE_TASK, arg);
	else if (!strcmp(cmd, "nmi") && arg > 0)
		ret = ube_rounds(UBE_NMI, arg);
	else if (!strcmp(cmd, "irq") && arg > 0)
		ret = ube_rounds(UBE_IRQ, arg);
	else if (!strcmp(cmd, "tracers") && n == 2)
		ret = ube_tracers(arg);
	else if (!strcmp(cmd, "cancel"))
		ret = ube_cancel();
	else if (!strcmp(cmd, "clear"))
		ret = ube_clear();
	else
		ret = -EINVAL;
	mutex_unlock(&ube.lock);
	return ret ? ret : count;
}

static const struct file_operations ube_ctl_fops = {
	.write = ube_ctl_write,
	.llseek = noop_llseek,
};

static int ube_results_show(struct seq_file *m, void *v)
{
	mutex_lock(&ube.lock);
	seq_printf(m, "impl %s\nclock_ns %llu\n",
		   IS_ENABLED(CONFIG_UNWIND_USER_RUST) ? "rust" : "c",
		   ube.clock_ns);
	seq_write(m, ube.results, ube.len);
	mutex_unlock(&ube.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ube_results);

static int __init ube_init(void)
{
	struct dentry *dir;
	int ret;

	ube.results = kzalloc(UBE_RESULTS, GFP_KERNEL);
	if (!ube.results)
		return -ENOMEM;
	ret = register_nmi_handler(NMI_LOCAL, ube_nmi, 0, "unwind_bench");
	if (ret) {
		kfree(ube.results);
		return ret;
	}
	ube_calibrate();
	dir = debugfs_create_dir("unwind_deferred_bench", NULL);
	debugfs_create_file("ctl", 0200, dir, NULL, &ube_ctl_fops);
	debugfs_create_file("results", 0400, dir, NULL, &ube_results_fops);
	return 0;
}
late_initcall(ube_init);
