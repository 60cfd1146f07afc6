// SPDX-License-Identifier: GPL-2.0

#include <linux/percpu.h>

__rust_helper void *rust_helper_raw_cpu_ptr(void __percpu *ptr)
{
	return raw_cpu_ptr(ptr);
}
