// SPDX-License-Identifier: GPL-2.0

#include <linux/uaccess.h>

__rust_helper int rust_helper_get_user_u32(u32 *dst, const u32 __user *src)
{
	return get_user(*dst, src);
}

__rust_helper int rust_helper_get_user_u64(u64 *dst, const u64 __user *src)
{
	return get_user(*dst, src);
}
