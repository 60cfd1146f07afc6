// SPDX-License-Identifier: GPL-2.0
/*
 * Test driver for deferred user unwinding (CONFIG_UNWIND_DEFERRED_TEST).
 * Reset only while nothing runs: "spin", "request" and callbacks log
 * without the lock.
 *
 * It registers unwind_works of its own ("tracers") and calls
 * unwind_deferred_request() from every context the API allows:
 *
 *  - NMI: local APIC NMIs sent to the CPU the target thread runs on, from a
 *    timer interrupt of that same CPU (the NMI then nests in the interrupt,
 *    which may itself be making a request) or of another CPU (the NMI then
 *    hits the thread in user mode or inside a system call);
 *  - hardirq: per-CPU hrtimers firing while the target thread runs;
 *  - task: a write to the control file, a busy loop in the kernel, and
 *    from a callback (the task_work) asking for another tracer;
 *  - NMI while the task_work runs: a callback sends an NMI to its own CPU,
 *    which asks for another tracer and for the callback's own again; and
 *    on the way out after the task_work (from a task_work of the driver's
 *    that the callback queued behind it), the same.
 *
 * The same NMIs and interrupts can also call unwind_user() itself on the
 * target (SRC bit 2), with page faults disabled as its contract asks of an
 * atomic caller: the walk must neither sleep nor take a lock there (a
 * compat task with LDT segments, tools/testing/selftests/unwind_deferred/
 * deferred_hostile.c, case ldt_atomic).
 *
 * Every request and every callback is logged; user space reads the logs
 * back and checks them (tools/testing/selftests/unwind_deferred/
 * deferred_nmi.c).  Only the C API of <linux/unwind_deferred.h> is used,
 * so the same tests run on the upstream C and on the Rust implementation.
 *
 * For test kernels only: any root process can make it send NMIs.
 *
 * debugfs: unwind_deferred_test/
 *   ctl        commands, one per write (see udt_ctl_write())
 *   requests   one line per request:
 *              "R tid cpu ctx user label slot gen rep ret cookie nmi hardirq"
 *              (nmi, hardirq: in_nmi() and in_hardirq() at the request)
 *   callbacks  one line per callback:
 *              "C tid cpu slot gen flags cookie nr ip..."
 *   tracers    one line per registered tracer: "T slot gen bit"
 *   unwinds    one line per unwind_user() call:
 *              "U tid cpu ctx in_nmi in_hardirq ret cs ip nr ip..."
 *   stats      "name value" lines
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/init.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/task_work.h>
#include <linux/uaccess.h>
#include <linux/unwind_deferred.h>
#include <linux/vmalloc.h>
#include <asm/apic.h>
#include <asm/irq_regs.h>
#include <asm/nmi.h>

#define UDT_SLOTS	BITS_PER_LONG
#define UDT_MAX_REQ	(1 << 18)
#define UDT_MAX_CB	(1 << 14)
#define UDT_MAX_UW	(1 << 13)
#define UDT_IPS		32
/*
 * Requests stop this far from a full log, so every logged one's callback
 * fits too: rounds in flight x 2 requests x UDT_SLOTS.
 */
#define UDT_ROOM	1024

/*
 * Where a request was made: UDT_WORK from a callback, UDT_WORK_NMI from an
 * NMI that the chain's first callback (or the driver's task_work after
 * the unwinder's) sent to its own CPU.
 */
enum {
	UDT_NMI = 'N', UDT_IRQ = 'I', UDT_TASK = 'T', UDT_WORK = 'W', UDT_WORK_NMI = 'M'
};

/* Where the chain's request for chain_to is made ("chain FROM TO MODE"). */
enum { UDT_CHAIN_TASK, UDT_CHAIN_NMI, UDT_CHAIN_NMI_AFTER, UDT_CHAIN_MODES };

/*
 * Labels name one kernel entry of the target thread, independently of the
 * cookie under test: every request with the same label must get the same
 * cookie, and requests with different labels different ones.
 */
#define UDT_LABEL_SPIN	(1U << 28)	/* one "spin" system call */
#define UDT_LABEL_IRQ	(2U << 28)	/* timer interrupts from user mode */
#define UDT_LABEL_NMI	(3U << 28)	/* NMIs from user mode */
#define UDT_LABEL_MASK	((1U << 28) - 1)

/* Callback flags. */
#define UDT_CB_IRQS_OFF	BIT(0)	/* interrupts were disabled */
#define UDT_CB_ATOMIC	BIT(1)	/* not a sleepable task context */
#define UDT_CB_DEAD	BIT(2)	/* the tracer's cancel had returned */

struct udt_tracer {
	struct unwind_work	work;
	struct list_head	node;	/* on udt.dead once cancelled */
	int			slot;
	u32			gen;	/* unique per registration */
	bool			active;	/* may request */
	bool			dead;	/* unwind_deferred_cancel() returned */
};

struct udt_req {
	u64	cookie;
	u32	tid, label, gen;
	int	ret;
	u8	ctx, user, slot, rep, cpu, nmi, hardirq, valid;
};

struct udt_cb {
	u64	cookie;
	u32	tid, gen, nr;
	u8	slot, flags, cpu, valid;
	u64	ips[UDT_IPS];
};

/* An unwind_user() call in NMI or hardirq; ip and cs: the user context. */
struct udt_uw {
	u64	ip;
	u32	tid, nr;
	int	ret;
	u16	cs;
	u8	ctx, nmi, hardirq, cpu, valid;
	unsigned long ips[UDT_IPS];
};

static struct {
	struct mutex		lock;		/* commands */
	struct udt_tracer	*slots[UDT_SLOTS];
	struct list_head	dead;
	u32			next_gen;
	/* What the timers and NMIs do, set by "arm". */
	struct task_struct	*target;
	unsigned long		mask;		/* slots that request */
	unsigned int		sources;
	ktime_t			period;
	bool			armed;
	/* The "spin" system call of the target in progress. */
	struct task_struct	*spin_task;
	u32			spin_label;
	/*
	 * The target's entry from user mode: one NMI or interrupt from user
	 * mode starts it, and it lasts until the target's task_work has run
	 * (the cookie is reset only after that), so NMIs and interrupts from
	 * user mode before then (back-to-back NMIs, the irq_work that
	 * TWA_NMI_CURRENT sends) are the same entry.
	 */
	u32			user_label;
	unsigned int		user_label_epoch;
	unsigned int		cb_epoch;	/* target's task_works run */
	/* Callback behaviour. */
	unsigned int		cb_delay_us;
	int			chain_from, chain_to, chain_mode;
	/* UDT_CHAIN_NMI_AFTER: the task_work queued behind the unwinder's. */
	struct callback_head	after_work;
	bool			after_queued;
	/* Logs. */
	struct udt_req		*req;
	struct udt_cb		*cb;
	struct udt_uw		*uw;
	atomic_t		nr_req, nr_cb, nr_uw, next_label;
	atomic_t		nr_queued;	/* requests that returned 0 */
} udt = {
	.lock = __MUTEX_INITIALIZER(udt.lock),
	.dead = LIST_HEAD_INIT(udt.dead),
	.chain_from = -1,
	.chain_to = -1,
};

#define UDT_SRC_NMI	BIT(0)
#define UDT_SRC_IRQ	BIT(1)
#define UDT_SRC_UNWIND	BIT(2)

static struct {
	atomic_t	nmi, nmi_sent, req_nmi_user, req_nmi_kernel, req_irq;
	atomic_t	req_task, req_work, req_lost, cb_lost, after_cancel;
	atomic_t	irqs_off_after_request, irqs_on_in_irq, spins;
	atomic_t	nmi_kernel_skipped, req_nmi_timer, req_nmi_spin, throttled;
	atomic_t	uw_lost, req_work_nmi, chain_nmi_missed;
} stats;

static DEFINE_PER_CPU(struct hrtimer, udt_timer);
static DEFINE_PER_CPU(atomic_t, udt_nmi_expected);
/* Set while this CPU's timer runs for the target: its entry's label. */
static DEFINE_PER_CPU(u32, udt_irq_label);
static DEFINE_PER_CPU(bool, udt_in_timer);
/* This CPU's next NMI of ours makes the chain's requests (udt_chain_nmi()). */
static DEFINE_PER_CPU(bool, udt_chain_pending);

static void udt_log_req(int ctx, bool user, u32 label, struct udt_tracer *t,
			int rep, int ret, u64 cookie)
{
	int i = atomic_inc_return(&udt.nr_req) - 1;
	struct udt_req *r;

	if (i >= UDT_MAX_REQ) {
		atomic_inc(&stats.req_lost);
		return;
	}
	r = &udt.req[i];
	r->cookie = cookie;
	r->tid = task_pid_nr(current);
	r->label = label;
	r->gen = t->gen;
	r->ret = ret;
	if (!ret)
		atomic_inc(&udt.nr_queued);
	r->ctx = ctx;
	r->user = user;
	r->slot = t->slot;
	r->rep = rep;
	r->cpu = raw_smp_processor_id();
	r->nmi = !!in_nmi();
	r->hardirq = !!in_hardirq();
	/* Publish the record: pairs with the reader's smp_load_acquire(). */
	smp_store_release(&r->valid, 1);
}

/*
 * Each active tracer in udt.mask requests twice: the second request of an
 * entry must answer 1 ("already requested").  Called in NMI, hardirq or
 * under rcu_read_lock(): cancel waits for it with synchronize_rcu().
 */
/* Room in both logs for a round of requests and their callbacks. */
static bool udt_room(void)
{
	if (atomic_read(&udt.nr_req) < UDT_MAX_REQ - UDT_ROOM &&
	    atomic_read(&udt.nr_queued) < UDT_MAX_CB - UDT_ROOM)
		return true;
	atomic_inc(&stats.throttled);
	return false;
}

static void udt_requests(int ctx, bool user, u32 label)
{
	unsigned long mask = READ_ONCE(udt.mask);
	int slot;

	if (!udt_room())
		return;

	for_each_set_bit(slot, &mask, UDT_SLOTS) {
		struct udt_tracer *t = READ_ONCE(udt.slots[slot]);
		u64 cookie;
		int rep, ret;

		if (!t || !READ_ONCE(t->active))
			continue;
		for (rep = 0; rep < 2; rep++) {
			ret = unwind_deferred_request(&t->work, &cookie);
			udt_log_req(ctx, user, label, t, rep, ret, cookie);
		}
	}
}

/*
 * The chain's requests ("chain FROM TO MODE"), from a callback of FROM
 * (task context, under rcu_read_lock()) or from the NMI that such a
 * callback, or the driver's task_work behind the unwinder's, sent to its
 * own CPU: TO, which the entry has not asked for (0: called once more,
 * with the same cookie and trace); from NMI also TO again and FROM, whose
 * callback has run (1 each).  NMIs are waited for by cancel's
 * synchronize_rcu() too.
 */
static void udt_chain_requests(int ctx)
{
	int to = READ_ONCE(udt.chain_to), from = READ_ONCE(udt.chain_from);
	int slots[3] = { to, to, from };
	int i, n = ctx == UDT_WORK_NMI ? 3 : 1;

	for (i = 0; i < n; i++) {
		struct udt_tracer *t = NULL;
		u64 cookie;
		int ret;

		if (slots[i] >= 0 && slots[i] < UDT_SLOTS)
			t = READ_ONCE(udt.slots[slots[i]]);
		if (!t || !READ_ONCE(t->active) || !udt_room())
			continue;
		ret = unwind_deferred_request(&t->work, &cookie);
		atomic_inc(ctx == UDT_WORK_NMI ? &stats.req_work_nmi : &stats.req_work);
		udt_log_req(ctx, false, 0, t, i == 1, ret, cookie);
	}
}

/*
 * unwind_user() on the target, from the NMI or hardirq that hit it (in
 * user mode or in the kernel: the walk starts from the user context saved
 * at kernel entry either way).  Page faults are disabled, as unwind_user()
 * asks of a caller that may not sleep; lockdep and DEBUG_ATOMIC_SLEEP see
 * anything else it would take.  The walk writes straight into its record.
 */
static void udt_unwind(int ctx)
{
	int i = atomic_inc_return(&udt.nr_uw) - 1;
	struct pt_regs *regs = task_pt_regs(current);
	struct unwind_stacktrace trace;
	struct udt_uw *u;

	if (i >= UDT_MAX_UW) {
		atomic_inc(&stats.uw_lost);
		return;
	}
	u = &udt.uw[i];
	trace.entries = u->ips;
	trace.nr = 0;
	pagefault_disable();
	u->ret = unwind_user(&trace, UDT_IPS);
	pagefault_enable();
	u->nr = trace.nr;
	u->ip = instruction_pointer(regs);
	u->cs = regs->cs;
	u->tid = task_pid_nr(current);
	u->ctx = ctx;
	u->nmi = !!in_nmi();
	u->hardirq = !!in_hardirq();
	u->cpu = raw_smp_processor_id();
	/* Pairs with the reader's smp_load_acquire(). */
	smp_store_release(&u->valid, 1);
}

static u32 udt_new_label(u32 kind)
{
	return kind | (atomic_inc_return(&udt.next_label) & UDT_LABEL_MASK);
}

/* The label of the target's entry from user mode (see udt.user_label). */
static u32 udt_user_label(u32 kind)
{
	unsigned int epoch = READ_ONCE(udt.cb_epoch);
	u32 label = READ_ONCE(udt.user_label);

	if (!label || READ_ONCE(udt.user_label_epoch) != epoch) {
		label = udt_new_label(kind);
		WRITE_ONCE(udt.user_label_epoch, epoch);
		WRITE_ONCE(udt.user_label, label);
	}
	return label;
}

/* The label of the target's current entry when it is inside "spin". */
static u32 udt_spin_label(void)
{
	return READ_ONCE(udt.spin_task) == current ? READ_ONCE(udt.spin_label) : 0;
}

/*
 * At most one NMI of ours is outstanding per CPU (udt_send_nmi()), so an
 * NMI that finds none expected is not ours: the NMI core reports it.
 */
static int udt_nmi(unsigned int cmd, struct pt_regs *regs)
{
	u32 label;

	if (!atomic_xchg(this_cpu_ptr(&udt_nmi_expected), 0))
		return NMI_DONE;
	atomic_inc(&stats.nmi);
	if (!READ_ONCE(udt.armed) || current != READ_ONCE(udt.target) ||
	    (current->flags & PF_EXITING))
		return NMI_HANDLED;
	if (__this_cpu_read(udt_chain_pending)) {
		__this_cpu_write(udt_chain_pending, false);
		udt_chain_requests(UDT_WORK_NMI);
		return NMI_HANDLED;
	}
	if (READ_ONCE(udt.sources) & UDT_SRC_UNWIND)
		udt_unwind(UDT_NMI);

	if (__this_cpu_read(udt_in_timer))
		label = __this_cpu_read(udt_irq_label);
	else if (user_mode(regs))
		label = udt_user_label(UDT_LABEL_NMI);
	else
		label = udt_spin_label();
	/*
	 * An NMI in the kernel outside "spin" may hit the way back to user
	 * space after unwind_reset_info() cleared the mask but before it
	 * cleared the cookie: the request would get the old entry's cookie,
	 * and its callback, run at a later return to user space, that
	 * entry's cookie or 0.  That window is in the shared C inline, the
	 * same on both implementations; it is left out here (counted), so
	 * that every other request has an exact outcome.
	 */
	if (!label) {
		atomic_inc(&stats.nmi_kernel_skipped);
		return NMI_HANDLED;
	}
	if (user_mode(regs))
		atomic_inc(&stats.req_nmi_user);
	else
		atomic_inc(&stats.req_nmi_kernel);
	if (__this_cpu_read(udt_in_timer))
		atomic_inc(&stats.req_nmi_timer);
	else if (!user_mode(regs))
		atomic_inc(&stats.req_nmi_spin);
	udt_requests(UDT_NMI, user_mode(regs), label);
	if (!irqs_disabled())
		atomic_inc(&stats.irqs_on_in_irq);
	return NMI_HANDLED;
}

/*
 * Send an NMI to @cpu unless one is outstanding there: NMIs do not queue
 * (one is latched at most), so this keeps the count exact.
 */
static void udt_send_nmi(int cpu)
{
	if (atomic_cmpxchg(per_cpu_ptr(&udt_nmi_expected, cpu), 0, 1))
		return;
	atomic_inc(&stats.nmi_sent);
	/* Not send_IPI_self: x2APIC's self-IPI register takes no NMIs. */
	__apic_send_IPI(cpu, NMI_VECTOR);
}

/*
 * Have an NMI on this CPU make the chain's requests, and wait for it: it
 * hits this task in the kernel, in the task_work that called this.
 */
static void udt_chain_nmi(void)
{
	int spin = 100000;

	preempt_disable();
	__this_cpu_write(udt_chain_pending, true);
	udt_send_nmi(smp_processor_id());
	/* cpu_relax() is a compiler barrier: the flag is read each time. */
	while (__this_cpu_read(udt_chain_pending) && --spin)
		cpu_relax();
	if (__this_cpu_read(udt_chain_pending)) {
		__this_cpu_write(udt_chain_pending, false);
		atomic_inc(&stats.chain_nmi_missed);
	}
	preempt_enable();
}

/* UDT_CHAIN_NMI_AFTER: run after the unwinder's task_work, before user mode. */
static void udt_after_fn(struct callback_head *head)
{
	WRITE_ONCE(udt.after_queued, false);
	udt_chain_nmi();
}

static enum hrtimer_restart udt_timer_fn(struct hrtimer *timer)
{
	struct task_struct *target = READ_ONCE(udt.target);
	unsigned int sources = READ_ONCE(udt.sources);
	struct pt_regs *regs = get_irq_regs();
	bool user = regs && user_mode(regs);
	int cpu = smp_processor_id();

	if (!READ_ONCE(udt.armed) || !target)
		return HRTIMER_NORESTART;

	if (current == target && !(current->flags & PF_EXITING)) {
		u32 label = user ? udt_user_label(UDT_LABEL_IRQ) : udt_spin_label();

		__this_cpu_write(udt_irq_label, label);
		__this_cpu_write(udt_in_timer, true);
		if (sources & UDT_SRC_UNWIND)
			udt_unwind(UDT_IRQ);
		if (sources & UDT_SRC_IRQ) {
			atomic_inc(&stats.req_irq);
			udt_requests(UDT_IRQ, user, label);
		}
		if (sources & UDT_SRC_NMI) {
			int spin = 100000;

			/* Wait for the NMI, so that it nests in this entry. */
			udt_send_nmi(cpu);
			while (atomic_read(this_cpu_ptr(&udt_nmi_expected)) &&
			       --spin)
				cpu_relax();
		}
		__this_cpu_write(udt_in_timer, false);
		if (!irqs_disabled())
			atomic_inc(&stats.irqs_on_in_irq);
	} else if (sources & UDT_SRC_NMI) {
		int tcpu = task_cpu(target);

		/* Hit the target where it runs: in user mode or a syscall. */
		if (tcpu != cpu && task_curr(target))
			udt_send_nmi(tcpu);
	}
	hrtimer_forward_now(timer, READ_ONCE(udt.period));
	return HRTIMER_RESTART;
}

static void udt_timer_start(void *unused)
{
	hrtimer_start(this_cpu_ptr(&udt_timer), READ_ONCE(udt.period),
		      HRTIMER_MODE_REL_PINNED_HARD);
}

static void udt_disarm(void)
{
	int cpu;

	struct task_struct *t = udt.target;

	WRITE_ONCE(udt.armed, false);
	for_each_possible_cpu(cpu)
		hrtimer_cancel(per_cpu_ptr(&udt_timer, cpu));
	WRITE_ONCE(udt.target, NULL);
	/* No NMI handler may still look at the target. */
	synchronize_rcu();
	if (t)
		put_task_struct(t);
	WRITE_ONCE(udt.user_label, 0);
}

static int udt_arm(pid_t tid, unsigned long mask, unsigned int sources,
		   unsigned int period_us)
{
	struct task_struct *t;

	if (period_us < 10)
		return -EINVAL;
	t = find_get_task_by_vpid(tid);
	if (!t)
		return -ESRCH;
	udt_disarm();
	WRITE_ONCE(udt.mask, mask);
	WRITE_ONCE(udt.sources, sources);
	WRITE_ONCE(udt.period, ns_to_ktime((u64)period_us * NSEC_PER_USEC));
	WRITE_ONCE(udt.target, t);
	WRITE_ONCE(udt.armed, true);
	on_each_cpu(udt_timer_start, NULL, 1);
	return 0;
}

static void udt_callback(struct unwind_work *work,
			 struct unwind_stacktrace *trace, u64 cookie)
{
	struct udt_tracer *t = container_of(work, struct udt_tracer, work);
	int i = atomic_inc_return(&udt.nr_cb) - 1;
	unsigned int delay;
	u8 flags = 0;

	/* Callbacks run in task context and may sleep. */
	might_sleep();
	/* The target's entry ends with this task_work (see udt.user_label). */
	if (current == READ_ONCE(udt.target))
		WRITE_ONCE(udt.cb_epoch, READ_ONCE(udt.cb_epoch) + 1);
	if (irqs_disabled())
		flags |= UDT_CB_IRQS_OFF;
	if (!in_task() || preempt_count())
		flags |= UDT_CB_ATOMIC;
	if (READ_ONCE(t->dead)) {
		flags |= UDT_CB_DEAD;
		atomic_inc(&stats.after_cancel);
	}
	if (i < UDT_MAX_CB) {
		struct udt_cb *c = &udt.cb[i];

		c->cookie = cookie;
		c->tid = task_pid_nr(current);
		c->gen = t->gen;
		c->slot = t->slot;
		c->flags = flags;
		c->cpu = raw_smp_processor_id();
		c->nr = trace->nr;
		memcpy(c->ips, trace->entries,
		       min_t(u32, trace->nr, UDT_IPS) * sizeof(u64));
		/* Pairs with the reader's smp_load_acquire(). */
		smp_store_release(&c->valid, 1);
	} else {
		atomic_inc(&stats.cb_lost);
	}

	delay = READ_ONCE(udt.cb_delay_us);
	if (delay)
		usleep_range(delay, delay + 10);

	/* Requests from the task_work, for a tracer not requested yet. */
	if (t->slot != READ_ONCE(udt.chain_from))
		return;
	switch (READ_ONCE(udt.chain_mode)) {
	case UDT_CHAIN_NMI:
		udt_chain_nmi();
		break;
	case UDT_CHAIN_NMI_AFTER:
		/* Queued during the task_work run: it runs after this one. */
		if (current == READ_ONCE(udt.target) && !READ_ONCE(udt.after_queued)) {
			WRITE_ONCE(udt.after_queued, true);
			init_task_work(&udt.after_work, udt_after_fn);
			if (task_work_add(current, &udt.after_work, TWA_RESUME))
				WRITE_ONCE(udt.after_queued, false);
		}
		break;
	default:
		rcu_read_lock();
		udt_chain_requests(UDT_WORK);
		rcu_read_unlock();
	}
}

static int udt_register(int slot)
{
	struct udt_tracer *t;
	int ret;

	if (slot < 0 || slot >= UDT_SLOTS)
		return -EINVAL;
	if (udt.slots[slot])
		return -EEXIST;
	t = kzalloc_obj(*t, GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	ret = unwind_deferred_init(&t->work, udt_callback);
	if (ret) {
		kfree(t);
		return ret;
	}
	t->slot = slot;
	t->gen = ++udt.next_gen;
	INIT_LIST_HEAD(&t->node);
	t->active = true;
	/* Publish: pairs with the READ_ONCE() of requesters (dependency). */
	smp_store_release(&udt.slots[slot], t);
	return 0;
}

/*
 * The caller's side of the cancel contract: no request may be in flight
 * or start once cancel runs.  Requests run in NMI, hardirq or under
 * rcu_read_lock(), so one RCU grace period after the tracer stops being
 * active, none is left.  The tracer is kept (on udt.dead) so that a
 * callback after cancel returned is seen, not a use after free.
 */
static int udt_cancel(int slot)
{
	struct udt_tracer *t;

	if (slot < 0 || slot >= UDT_SLOTS || !udt.slots[slot])
		return -ENOENT;
	t = udt.slots[slot];
	WRITE_ONCE(t->active, false);
	WRITE_ONCE(udt.slots[slot], NULL);
	synchronize_rcu();
	unwind_deferred_cancel(&t->work);
	WRITE_ONCE(t->dead, true);
	list_add(&t->node, &udt.dead);
	return 0;
}

/* The target thread, in a system call: busy in the kernel for @us. */
static void udt_spin(unsigned int us, bool requests)
{
	ktime_t end = ktime_add_us(ktime_get(), us);

	WRITE_ONCE(udt.spin_label, udt_new_label(UDT_LABEL_SPIN));
	WRITE_ONCE(udt.spin_task, current);
	atomic_inc(&stats.spins);
	while (ktime_before(ktime_get(), end)) {
		if (requests) {
			rcu_read_lock();
			udt_requests(UDT_TASK, false, udt_spin_label());
			rcu_read_unlock();
			atomic_inc(&stats.req_task);
			if (irqs_disabled())
				atomic_inc(&stats.irqs_off_after_request);
		}
		cpu_relax();
		cond_resched();
	}
	WRITE_ONCE(udt.spin_task, NULL);
	if (irqs_disabled())
		atomic_inc(&stats.irqs_off_after_request);
}

/*
 * The target thread, in a system call: one round of task-context requests,
 * then asleep for @ms.  Its task_work runs only when the call returns, so
 * its requests stay queued meanwhile, and sleeping lets a cancel's grace
 * periods end (a busy "spin" holds them off on non-preemptible RCU).
 */
static void udt_nap(unsigned int ms)
{
	WRITE_ONCE(udt.spin_label, udt_new_label(UDT_LABEL_SPIN));
	WRITE_ONCE(udt.spin_task, current);
	atomic_inc(&stats.spins);
	rcu_read_lock();
	udt_requests(UDT_TASK, false, udt_spin_label());
	rcu_read_unlock();
	atomic_inc(&stats.req_task);
	msleep(ms);
	WRITE_ONCE(udt.spin_task, NULL);
}

static void udt_reset(void)
{
	struct udt_tracer *t, *tmp;

	udt_disarm();
	/* Every tracer on the list was cancelled: none of its callbacks runs. */
	list_for_each_entry_safe(t, tmp, &udt.dead, node) {
		list_del(&t->node);
		kfree(t);
	}
	memset(udt.req, 0, UDT_MAX_REQ * sizeof(*udt.req));
	memset(udt.cb, 0, UDT_MAX_CB * sizeof(*udt.cb));
	memset(udt.uw, 0, UDT_MAX_UW * sizeof(*udt.uw));
	atomic_set(&udt.nr_req, 0);
	atomic_set(&udt.nr_cb, 0);
	atomic_set(&udt.nr_uw, 0);
	atomic_set(&udt.nr_queued, 0);
	memset(&stats, 0, sizeof(stats));
	WRITE_ONCE(udt.cb_delay_us, 0);
	WRITE_ONCE(udt.chain_from, -1);
	WRITE_ONCE(udt.chain_to, -1);
	WRITE_ONCE(udt.chain_mode, UDT_CHAIN_TASK);
}

/*
 * Commands:
 *   register SLOT            register a tracer in SLOT (0..63)
 *   cancel SLOT              cancel it (waits for its callbacks)
 *   arm TID MASK SRC US      timers every US µs on each CPU; while thread
 *                            TID runs, tracers in hex MASK request from
 *                            hardirq (SRC bit 1) and NMI (SRC bit 0), and
 *                            both call unwind_user() if SRC bit 2 is set
 *   disarm                   stop the timers
 *   request                  the writer requests for every tracer in MASK
 *   spin US [REQ]            the writer busy-waits US µs in the kernel,
 *                            making task-context requests if REQ is 1
 *   nap MS                   the writer requests for every tracer in MASK,
 *                            then sleeps MS ms in the kernel
 *   delay US                 callbacks sleep US µs
 *   chain FROM TO [MODE]     FROM's callback requests TO (-1: off); MODE
 *                            1: from an NMI it sends to its CPU, 2: from
 *                            an NMI sent after the unwinder's task_work
 *                            (from a task_work FROM's callback queues);
 *                            both also request TO again and FROM
 *   reset                    disarm, clear logs and counters
 * The write returns the command's error, if any.
 */
static ssize_t udt_ctl_write(struct file *file, const char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	char buf[96], cmd[16];
	unsigned long a1 = 0, a2 = 0, a3 = 0, a4 = 0;
	long s1 = 0, s2 = 0;
	int ret = 0, n;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	n = sscanf(buf, "%15s %lu %lx %lu %lu", cmd, &a1, &a2, &a3, &a4);
	if (n < 1)
		return -EINVAL;

	/* Work of the target itself: not under the lock. */
	if (!strcmp(cmd, "spin")) {
		n = sscanf(buf, "%15s %lu %lu", cmd, &a1, &a2);
		if (n < 2 || a1 > 10 * USEC_PER_SEC)
			return -EINVAL;
		udt_spin(a1, n > 2 && a2);
		return count;
	}
	if (!strcmp(cmd, "nap")) {
		if (n < 2 || a1 > 10 * MSEC_PER_SEC)
			return -EINVAL;
		udt_nap(a1);
		return count;
	}
	if (!strcmp(cmd, "request")) {
		rcu_read_lock();
		udt_requests(UDT_TASK, false, 0);
		rcu_read_unlock();
		atomic_inc(&stats.req_task);
		if (irqs_disabled())
			atomic_inc(&stats.irqs_off_after_request);
		return count;
	}

	mutex_lock(&udt.lock);
	if (!strcmp(cmd, "register") && n >= 2) {
		ret = udt_register(a1);
	} else if (!strcmp(cmd, "cancel") && n >= 2) {
		ret = udt_cancel(a1);
	} else if (!strcmp(cmd, "arm") && n >= 5) {
		ret = udt_arm(a1, a2, a3, a4);
	} else if (!strcmp(cmd, "disarm")) {
		udt_disarm();
	} else if (!strcmp(cmd, "delay") && n >= 2) {
		WRITE_ONCE(udt.cb_delay_us, min(a1, 100000UL));
	} else if (!strcmp(cmd, "chain")) {
		a3 = UDT_CHAIN_TASK;
		n = sscanf(buf, "%15s %ld %ld %lu", cmd, &s1, &s2, &a3);
		if (n < 3 || a3 >= UDT_CHAIN_MODES) {
			ret = -EINVAL;
		} else {
			WRITE_ONCE(udt.chain_mode, a3);
			WRITE_ONCE(udt.chain_to, s2);
			WRITE_ONCE(udt.chain_from, s1);
		}
	} else if (!strcmp(cmd, "reset")) {
		udt_reset();
	} else {
		ret = -EINVAL;
	}
	mutex_unlock(&udt.lock);
	return ret ? ret : count;
}

/* A test that dies leaves no timer running and no task referenced. */
static int udt_ctl_release(struct inode *inode, struct file *file)
{
	mutex_lock(&udt.lock);
	udt_disarm();
	mutex_unlock(&udt.lock);
	return 0;
}

static const struct file_operations udt_ctl_fops = {
	.write = udt_ctl_write,
	.release = udt_ctl_release,
	.llseek = noop_llseek,
};

/*
 * The logs are streamed, one record per ->show(), so that reading a full
 * log needs no large buffer.  Records not yet published are skipped.
 */
static void *udt_req_start(struct seq_file *m, loff_t *pos)
{
	int n = min(atomic_read(&udt.nr_req), UDT_MAX_REQ);

	return *pos < n ? &udt.req[*pos] : NULL;
}

static void *udt_req_next(struct seq_file *m, void *v, loff_t *pos)
{
	++*pos;
	return udt_req_start(m, pos);
}

static int udt_req_show(struct seq_file *m, void *v)
{
	struct udt_req *r = v;

	/* Pairs with udt_log_req()'s smp_store_release(). */
	if (smp_load_acquire(&r->valid))
		seq_printf(m, "R %u %u %c %u %#x %u %u %u %d %#llx %u %u\n",
			   r->tid, r->cpu, r->ctx, r->user, r->label, r->slot,
			   r->gen, r->rep, r->ret, r->cookie, r->nmi, r->hardirq);
	return 0;
}

static void *udt_cb_start(struct seq_file *m, loff_t *pos)
{
	int n = min(atomic_read(&udt.nr_cb), UDT_MAX_CB);

	return *pos < n ? &udt.cb[*pos] : NULL;
}

static void *udt_cb_next(struct seq_file *m, void *v, loff_t *pos)
{
	++*pos;
	return udt_cb_start(m, pos);
}

static int udt_cb_show(struct seq_file *m, void *v)
{
	struct udt_cb *c = v;
	u32 j;

	/* Pairs with udt_callback()'s smp_store_release(). */
	if (!smp_load_acquire(&c->valid))
		return 0;
	seq_printf(m, "C %u %u %u %u %#x %#llx %u", c->tid, c->cpu, c->slot,
		   c->gen, c->flags, c->cookie, c->nr);
	for (j = 0; j < min_t(u32, c->nr, UDT_IPS); j++)
		seq_printf(m, " %#llx", c->ips[j]);
	seq_putc(m, '\n');
	return 0;
}

static void *udt_uw_start(struct seq_file *m, loff_t *pos)
{
	int n = min(atomic_read(&udt.nr_uw), UDT_MAX_UW);

	return *pos < n ? &udt.uw[*pos] : NULL;
}

static void *udt_uw_next(struct seq_file *m, void *v, loff_t *pos)
{
	++*pos;
	return udt_uw_start(m, pos);
}

static int udt_uw_show(struct seq_file *m, void *v)
{
	struct udt_uw *u = v;
	u32 j;

	/* Pairs with udt_unwind()'s smp_store_release(). */
	if (!smp_load_acquire(&u->valid))
		return 0;
	seq_printf(m, "U %u %u %c %u %u %d %#x %#llx %u", u->tid, u->cpu,
		   u->ctx, u->nmi, u->hardirq, u->ret, u->cs, u->ip, u->nr);
	for (j = 0; j < min_t(u32, u->nr, UDT_IPS); j++)
		seq_printf(m, " %#lx", u->ips[j]);
	seq_putc(m, '\n');
	return 0;
}

static void udt_stop(struct seq_file *m, void *v)
{
}

static const struct seq_operations udt_requests_sops = {
	.start = udt_req_start,
	.next = udt_req_next,
	.stop = udt_stop,
	.show = udt_req_show,
};
DEFINE_SEQ_ATTRIBUTE(udt_requests);

static const struct seq_operations udt_callbacks_sops = {
	.start = udt_cb_start,
	.next = udt_cb_next,
	.stop = udt_stop,
	.show = udt_cb_show,
};
DEFINE_SEQ_ATTRIBUTE(udt_callbacks);

static const struct seq_operations udt_unwinds_sops = {
	.start = udt_uw_start,
	.next = udt_uw_next,
	.stop = udt_stop,
	.show = udt_uw_show,
};
DEFINE_SEQ_ATTRIBUTE(udt_unwinds);

static int udt_tracers_show(struct seq_file *m, void *v)
{
	int slot;

	mutex_lock(&udt.lock);
	for (slot = 0; slot < UDT_SLOTS; slot++) {
		struct udt_tracer *t = udt.slots[slot];

		if (t)
			seq_printf(m, "T %d %u %d\n", slot, t->gen, t->work.bit);
	}
	mutex_unlock(&udt.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(udt_tracers);

static int udt_stats_show(struct seq_file *m, void *v)
{
#define UDT_STAT(x) seq_printf(m, #x " %d\n", atomic_read(&stats.x))
	seq_printf(m, "impl %s\n",
		   IS_ENABLED(CONFIG_UNWIND_USER_RUST) ? "rust" : "c");
	UDT_STAT(nmi);
	UDT_STAT(nmi_sent);
	UDT_STAT(req_nmi_user);
	UDT_STAT(req_nmi_kernel);
	UDT_STAT(req_irq);
	UDT_STAT(req_task);
	UDT_STAT(req_work);
	UDT_STAT(req_lost);
	UDT_STAT(cb_lost);
	UDT_STAT(after_cancel);
	UDT_STAT(irqs_off_after_request);
	UDT_STAT(irqs_on_in_irq);
	UDT_STAT(spins);
	UDT_STAT(nmi_kernel_skipped);
	UDT_STAT(req_nmi_timer);
	UDT_STAT(req_nmi_spin);
	UDT_STAT(throttled);
	UDT_STAT(uw_lost);
	UDT_STAT(req_work_nmi);
	UDT_STAT(chain_nmi_missed);
	seq_printf(m, "max_req %d\nmax_cb %d\n", UDT_MAX_REQ, UDT_MAX_CB);
#undef UDT_STAT
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(udt_stats);

static int __init udt_init(void)
{
	struct dentry *dir;
	int cpu, ret;

	udt.req = vzalloc(UDT_MAX_REQ * sizeof(*udt.req));
	udt.cb = vzalloc(UDT_MAX_CB * sizeof(*udt.cb));
	udt.uw = vzalloc(UDT_MAX_UW * sizeof(*udt.uw));
	if (!udt.req || !udt.cb || !udt.uw)
		goto nomem;
	for_each_possible_cpu(cpu)
		hrtimer_setup(per_cpu_ptr(&udt_timer, cpu), udt_timer_fn,
			      CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	ret = register_nmi_handler(NMI_LOCAL, udt_nmi, 0, "unwind_test");
	if (ret)
		goto fail;

	dir = debugfs_create_dir("unwind_deferred_test", NULL);
	debugfs_create_file("ctl", 0200, dir, NULL, &udt_ctl_fops);
	debugfs_create_file("requests", 0400, dir, NULL, &udt_requests_fops);
	debugfs_create_file("callbacks", 0400, dir, NULL, &udt_callbacks_fops);
	debugfs_create_file("tracers", 0400, dir, NULL, &udt_tracers_fops);
	debugfs_create_file("stats", 0400, dir, NULL, &udt_stats_fops);
	debugfs_create_file("unwinds", 0400, dir, NULL, &udt_unwinds_fops);
	return 0;
nomem:
	ret = -ENOMEM;
fail:
	vfree(udt.req);
	vfree(udt.cb);
	vfree(udt.uw);
	return ret;
}
late_initcall(udt_init);
