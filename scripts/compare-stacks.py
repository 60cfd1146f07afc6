#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Differential check: the same workload, recorded by the real perf tool on
the upstream C kernel and on the Rust kernel, must give the same set of
merged user stacks.

perf_defer.sh prints each distinct merged user stack of the workload, as
function names from `perf script` (the same dc_workload binary runs on both
kernels, so names stand for addresses), one per line:

    # STACK <session>: workload_leaf workload_c workload_b ... main

for each session (perf-task: per-task events, perf-all: perf record -a).
For every session, the two logs must hold the same non-empty set.  Writes
"passed failed differential" to --results.
"""
import argparse
import re
import sys

LINE = re.compile(r'^# STACK (\S+): (.*\S)\s*$')


def stacks(path):
    out = {}
    with open(path, 'rb') as f:
        for raw in f.read().decode('utf-8', 'replace').replace('\r', '').split('\n'):
            m = LINE.match(raw)
            if m:
                out.setdefault(m.group(1), set()).add(m.group(2))
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
        cs, rs = c.get(s, set()), r.get(s, set())
        if cs and cs == rs:
            passed += 1
            print('%-10s same %d stacks on both kernels:' % (s, len(cs)))
            for st in sorted(cs):
                print('    ' + st)
            continue
        failed += 1
        print('%-10s DIFFERENT (C %d stacks, Rust %d)' % (s, len(cs), len(rs)))
        for st in sorted(cs - rs):
            print('    only C:    ' + st)
        for st in sorted(rs - cs):
            print('    only Rust: ' + st)
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
