/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _ASM_X86_UNWIND_USER_RUST_H
#define _ASM_X86_UNWIND_USER_RUST_H

#include <linux/irqflags.h>
#include <linux/sched.h>
#include <asm/desc.h>
#include <asm/mmu_context.h>
#include <asm/ptrace.h>
#include <asm/segment.h>
#include <asm/tlbflush.h>

/*
 * The linear base of user segment @sel, or -1UL if it cannot be resolved.
 * The LDT is read as perf's get_segment_base() reads it, without the mm's
 * context lock (insn_get_seg_base() takes it: a mutex): with interrupts
 * off, the LDT the mm has installed cannot be freed under us, because
 * install_ldt() frees the old one only after an IPI to every CPU running
 * the mm, which waits for interrupts here to be enabled again.  Any
 * context, NMI included.
 */
static inline unsigned long unwind_user_seg_base(unsigned int sel)
{
	unsigned int idx = sel >> 3;
	struct desc_struct *desc;

	guard(irqsave)();
	if ((sel & SEGMENT_TI_MASK) == SEGMENT_LDT) {
#ifdef CONFIG_MODIFY_LDT_SYSCALL
		struct ldt_struct *ldt;

		/* Not in a lazy or switching mm: current->mm is the loaded one. */
		if (!nmi_uaccess_okay())
			return -1UL;
		/* Pairs with install_ldt()'s smp_store_release(). */
		ldt = smp_load_acquire(&current->mm->context.ldt);
		if (!ldt || idx >= ldt->nr_entries)
			return -1UL;
		desc = &ldt->entries[idx];
#else
		return -1UL;
#endif
	} else {
		if (!idx || idx >= GDT_ENTRIES)
			return -1UL;
		desc = raw_cpu_ptr(gdt_page.gdt) + idx;
	}
	if (!desc->p)
		return -1UL;
	return get_desc_base(desc);
}

/*
 * Linear bases of the code and stack segments of a compat task.  The flat
 * selectors every ordinary 32-bit program uses have base 0; anything else
 * (an LDT segment, as set up by Wine or DOSEMU) is looked up without
 * sleeping or taking a lock, so that unwind_user() may run in any context.
 * Returns -EINVAL if a selector cannot be resolved.
 */
static inline int unwind_user_segment_bases(struct pt_regs *regs,
					    unsigned long *cs_base,
					    unsigned long *ss_base)
{
	*cs_base = 0;
	*ss_base = 0;
	if (user_64bit_mode(regs))
		return 0;
	if (regs->cs != __USER32_CS)
		*cs_base = unwind_user_seg_base(regs->cs);
	if (regs->ss != __USER_DS)
		*ss_base = unwind_user_seg_base(regs->ss);
	if (*cs_base == -1UL || *ss_base == -1UL)
		return -EINVAL;
	return 0;
}

/* %rbx (%ebx): an unwind table's CFA may be based on it (ld.so's PLT). */
static inline unsigned long unwind_user_bx(struct pt_regs *regs)
{
	return regs->bx;
}

static inline unsigned long unwind_user_limit(struct pt_regs *regs)
{
	return user_64bit_mode(regs) ? TASK_SIZE_MAX : 1UL << 32;
}

#endif /* _ASM_X86_UNWIND_USER_RUST_H */
