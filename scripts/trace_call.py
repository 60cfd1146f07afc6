# SPDX-License-Identifier: GPL-2.0
"""gdb script (scripts/trace-call.sh): every instruction one call of a
kernel function executes, single-stepped through QEMU's gdbstub with
interrupts and timers masked while stepping, so that only the call's own
instructions (its callees' included) are counted.

Environment: TRACE_FN, the function (a symbol of vmlinux); TRACE_SKIP,
how many of its calls to let go by first; TRACE_OUT, the JSON file of
the counts by address; TRACE_MAX, a bound on the instructions stepped
(a call that reaches it is reported as cut).
"""
import collections
import json
import os

import gdb  # pylint: disable=import-error

fn = os.environ['TRACE_FN']
skip = int(os.environ.get('TRACE_SKIP', '0'))
out = os.environ['TRACE_OUT']
limit = int(os.environ.get('TRACE_MAX', '200000'))

gdb.execute('set pagination off')
gdb.execute('set confirm off')
gdb.execute('target remote :%s' % os.environ.get('TRACE_PORT', '1234'))
# SSTEP_ENABLE | SSTEP_NOIRQ | SSTEP_NOTIMER: no interrupt while stepping.
gdb.execute('maintenance packet Qqemu.sstep=0x7')
bp = gdb.Breakpoint('*' + fn)
bp.ignore_count = skip
gdb.execute('continue')
bp.delete()
sp0 = int(gdb.parse_and_eval('$rsp'))
ret = int(gdb.parse_and_eval('*(unsigned long *)$rsp'))
pcs = collections.Counter()
n = 0
while n < limit:
    pc = int(gdb.parse_and_eval('$pc'))
    if pc == ret and int(gdb.parse_and_eval('$rsp')) > sp0:
        break
    pcs[pc] += 1
    n += 1
    gdb.execute('stepi', to_string=True)
with open(out, 'w') as f:
    json.dump({'fn': fn, 'skip': skip, 'n': n, 'cut': n >= limit,
               'pcs': {'%#x' % k: v for k, v in pcs.items()}}, f)
print('TRACED %d instructions%s' % (n, ' (cut)' if n >= limit else ''))
gdb.execute('kill')
