/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _ASM_X86_UNWIND_USER_RUST_H
#define _ASM_X86_UNWIND_USER_RUST_H

#include <asm/insn-eval.h>
#include <asm/inat.h>
#include <asm/ptrace.h>
#include <asm/segment.h>

/*
 * Linear bases of the code and stack segments of a compat task.  The flat
 * selectors every ordinary 32-bit program uses have base 0; anything else
 * (an LDT segment, as set up by Wine or DOSEMU) is looked up.  May sleep
 * (the LDT is read under the mm's context lock): call it only where a
 * fault may be taken.  Returns -EINVAL if a selector cannot be resolved.
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
		*cs_base = insn_get_seg_base(regs, INAT_SEG_REG_CS);
	if (regs->ss != __USER_DS)
		*ss_base = insn_get_seg_base(regs, INAT_SEG_REG_SS);
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
