// SPDX-License-Identifier: GPL-2.0

#include <linux/preempt.h>

__rust_helper bool rust_helper_in_nmi(void)
{
	return in_nmi();
}
