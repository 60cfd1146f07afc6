#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Differential check: the same workload, recorded by the real perf tool on
the upstream C kernel and on the Rust kernel, must give the same set of
merged user stacks.

perf_defer.sh prints each distinct merged user stack of the workload, as
function names from `perf script` (the same dc_workload binary runs on both
kernels, so names stand for addresses: the comparison is by name), with
the number of samples that had it:

    # STACK <session>: <count>: workload_leaf workload_c workload_b ... main

for each session (perf-task: per-task events, perf-all: perf record -a).
Which IPs a timer hits differs from run to run, so a stack seen a few times
on one kernel may not be seen on the other.  The rule: for every session,
both kernels have stacks, and every *common* stack of either kernel (at
least 2% of its samples and at least 3 samples) was also seen on the other.
Rare stacks seen on one side only are printed.  Writes "passed failed
differential" to --results.
"""
import argparse
import re
import sys

LINE = re.compile(r'^# STACK (\S+): (\d+): (.*\S)\s*$')


def stacks(path):
    out = {}
    with open(path, 'rb') as f:
        for raw in f.read().decode('utf-8', 'replace').replace('\r', '').split('\n'):
            m = LINE.match(raw)
            if m:
                d = out.setdefault(m.group(1), {})
                d[m.group(3)] = d.get(m.group(3), 0) + int(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('c_log')
    ap.add_argument('rust_log')
    ap.add_argument('--results')
    ap.add_argument('--session', action='append', default=[],
                    help='a session that must be present in both logs')
    a = ap.parse_args()
    c, r = stacks(a.c_log), stacks(a.rust_log)
    passed = failed = 0
    for s in sorted(set(c) | set(r) | set(a.session)):
        cs, rs = c.get(s, {}), r.get(s, {})
        bad, notes = [], []
        for name, mine, other in (('C', cs, rs), ('Rust', rs, cs)):
            total = sum(mine.values())
            for st, n in sorted(mine.items()):
                if st in other:
                    continue
                common = n >= 3 and n * 50 >= total
                notes.append('    only %-4s %5d of %5d samples: %s%s'
                             % (name, n, total, st, ' (COMMON)' if common else ' (rare)'))
                if common:
                    bad.append(st)
        both = sorted(set(cs) & set(rs))
        if cs and rs and not bad:
            passed += 1
            print('%-10s the same: %d stacks on both kernels (C %d samples, Rust %d)'
                  % (s, len(both), sum(cs.values()), sum(rs.values())))
            for st in both:
                print('    %5d / %5d  %s' % (cs[st], rs[st], st))
            for n in notes:
                print(n)
            continue
        failed += 1
        print('%-10s DIFFERENT: C %d stacks, Rust %d; %d common stacks on one side only'
              % (s, len(cs), len(rs), len(bad)))
        for n in notes:
            print(n)
    if not passed and not failed:
        failed = 1
        print('no "# STACK" lines in either log')
    print('differential: %d sessions the same, %d different' % (passed, failed))
    if a.results:
        with open(a.results, 'w') as f:
            f.write('%d %d differential\n' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
