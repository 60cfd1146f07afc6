// SPDX-License-Identifier: GPL-2.0

#include <linux/irqflags.h>
#include <linux/preempt.h>

__rust_helper bool rust_helper_in_nmi(void)
{
	return in_nmi();
}

__rust_helper bool rust_helper_irqs_disabled(void)
{
	return irqs_disabled();
}

__rust_helper void rust_helper_local_irq_disable(void)
{
	local_irq_disable();
}

__rust_helper void rust_helper_local_irq_enable(void)
{
	local_irq_enable();
}
