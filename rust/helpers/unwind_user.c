// SPDX-License-Identifier: GPL-2.0

#include <linux/unwind_user_rust_uaccess.h>

__rust_helper bool rust_helper_unwind_user_from_user_mode(void)
{
	return unwind_user_from_user_mode();
}

__rust_helper int rust_helper_unwind_user_read_frame(unsigned long addr,
						     unsigned int ws, u64 *words)
{
	return unwind_user_read_frame(addr, ws, words);
}

__rust_helper int rust_helper_unwind_user_read_word(unsigned long addr,
						    unsigned int ws, u64 *word)
{
	return unwind_user_read_word(addr, ws, word);
}
