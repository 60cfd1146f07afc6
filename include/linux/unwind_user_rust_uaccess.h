/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Rust unwinder's per-frame and per-request accesses to current's
 * user context (kernel/unwind/rust/), as inline functions that
 * rust/helpers/unwind_user.c wraps one to one: with
 * CONFIG_RUST_INLINE_HELPERS they are inlined into the Rust code.
 *
 * Why not kernel::uaccess::UserSliceReader: it reads with copy_from_user(),
 * an out-of-line call per read, which per frame costs four times
 * upstream's two inline get_user()s (read_pair() in walk.rs); and a batched
 * read cannot be built in Rust from helpers for user_read_access_begin()
 * and unsafe_get_user(), because no call may be made while user access is
 * open (objtool rejects it) and those helpers are calls unless inlined.
 */
#ifndef _LINUX_UNWIND_USER_RUST_UACCESS_H
#define _LINUX_UNWIND_USER_RUST_UACCESS_H

#include <linux/ptrace.h>
#include <linux/sched/task_stack.h>
#include <linux/uaccess.h>

/* Whether current entered the kernel from user mode (NMI-safe). */
static __always_inline bool unwind_user_from_user_mode(void)
{
	return user_mode(task_pt_regs(current));
}

/* Two adjacent words of @type at user address @addr, zero-extended. */
#define UNWIND_USER_READ_PAIR(type)					\
static __always_inline int unwind_user_read_pair_##type(unsigned long addr, \
							 u64 *words)	\
{									\
	const type __user *w = (const type __user *)addr;		\
	type a, b;							\
									\
	if (!user_read_access_begin(w, 2 * sizeof(*w)))			\
		return -EFAULT;						\
	unsafe_get_user(a, &w[0], fault);				\
	unsafe_get_user(b, &w[1], fault);				\
	user_read_access_end();						\
	words[0] = a;							\
	words[1] = b;							\
	return 0;							\
fault:									\
	user_read_access_end();						\
	return -EFAULT;							\
}
UNWIND_USER_READ_PAIR(u64)
UNWIND_USER_READ_PAIR(u32)
#undef UNWIND_USER_READ_PAIR

/**
 * unwind_user_read_frame - read two adjacent words of user memory
 * @addr: user address of the first word
 * @ws: word size: 8, or 4 for a compat task
 * @words: the two words, zero-extended
 *
 * A frame's saved frame pointer and return address, in one user-access
 * window, as upstream's walk reads them with two inline get_user()s.
 * Faults are fixed up like get_user()'s: a missing page is faulted in
 * where that is allowed.
 *
 * Return: 0, or -EFAULT.
 */
static __always_inline int unwind_user_read_frame(unsigned long addr,
						  unsigned int ws, u64 *words)
{
	might_fault();
	return ws == 8 ? unwind_user_read_pair_u64(addr, words) :
			 unwind_user_read_pair_u32(addr, words);
}

/**
 * unwind_user_read_word - read one word of user memory
 * @addr: user address of the word
 * @ws: word size: 8, or 4 for a compat task
 * @word: the word, zero-extended
 *
 * A return address or saved register that is not next to another the
 * step needs, with get_user() (copy_from_user() costs three times as
 * many instructions for one word).  Faults are fixed up as get_user()'s.
 *
 * Return: 0, or -EFAULT.
 */
static __always_inline int unwind_user_read_word(unsigned long addr,
						 unsigned int ws, u64 *word)
{
	if (ws == 8) {
		u64 v;

		if (get_user(v, (const u64 __user *)addr))
			return -EFAULT;
		*word = v;
	} else {
		u32 v;

		if (get_user(v, (const u32 __user *)addr))
			return -EFAULT;
		*word = v;
	}
	return 0;
}

#endif /* _LINUX_UNWIND_USER_RUST_UACCESS_H */
