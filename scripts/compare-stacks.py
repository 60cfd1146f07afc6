#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Differential check: the same workload, recorded by the real perf tool on
the upstream C kernel and on the Rust kernel, must give the same
distribution of merged user stacks.

perf_defer.sh prints, for each session (perf-task: per-task events,
perf-all: perf record -a), every distinct merged stack of the workload's
samples with the number of samples that had it:

    # ASTACK <session>: <count>: <K|U> <sampled function> <return address>...

keyed by address: the same static dc_workload binary runs at the same
addresses on both kernels, so every caller is compared by its return
address, the sampled frame by its function (where in it the timer hit is
chance); K or U says whether the sample was taken in the kernel or in user
space (the kernel frames themselves differ by design between the kernels:
the unwinders' own functions).  All samples count: truncated stacks,
start-up and exit included.  ("# STACK" lines, by function name and
inside workload() only, are printed for reading.)

The rule, per session:
- both kernels have at least MIN_SAMPLES samples (fewer cannot show a
  distribution; that fails the check, it does not pass it);
- every stack's share of its kernel's samples agrees within
  SYSTEMATIC + SIGMAS standard errors of the difference of two binomial
  shares (pooled share p: sqrt(p (1 - p) (1/n_C + 1/n_Rust))).  SYSTEMATIC
  (2 points) allows for what differs between the kernels on purpose: the
  time their deferred paths take changes, under TCG, where timer
  interrupts land (in the kernel or in user space) by about a point; the
  statistical part is 4 sigma, so that with a few dozen stacks a chance
  failure is rarer than one in a thousand runs.
Writes "passed failed differential" to --results.
"""
import argparse
import math
import re
import sys

ALINE = re.compile(r'^# ASTACK (\S+): (\d+): (.*\S)\s*$')
NLINE = re.compile(r'^# STACK (\S+): (\d+): (.*\S)\s*$')
MIN_SAMPLES = 200
SYSTEMATIC = 0.02
SIGMAS = 4.0


def stacks(path, line):
    out = {}
    with open(path, 'rb') as f:
        for raw in f.read().decode('utf-8', 'replace').replace('\r', '').split('\n'):
            m = line.match(raw)
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
    c, r = stacks(a.c_log, ALINE), stacks(a.rust_log, ALINE)
    cn, rn = stacks(a.c_log, NLINE), stacks(a.rust_log, NLINE)
    passed = failed = 0
    for s in sorted(set(c) | set(r) | set(a.session)):
        cs, rs = c.get(s, {}), r.get(s, {})
        nc, nr = sum(cs.values()), sum(rs.values())
        print('%-10s C %d samples in %d stacks, Rust %d in %d' % (s, nc, len(cs), nr, len(rs)))
        if nc < MIN_SAMPLES or nr < MIN_SAMPLES:
            failed += 1
            print('    DIFFERENT: too few samples to compare distributions (at least %d each)'
                  % MIN_SAMPLES)
            continue
        bad = []
        rows = []
        for st in set(cs) | set(rs):
            pc, pr = cs.get(st, 0) / nc, rs.get(st, 0) / nr
            p = (cs.get(st, 0) + rs.get(st, 0)) / (nc + nr)
            bound = SYSTEMATIC + SIGMAS * math.sqrt(p * (1 - p) * (1 / nc + 1 / nr))
            rows.append((max(pc, pr), st, pc, pr, bound))
            if abs(pc - pr) > bound:
                bad.append(st)
        rows.sort(reverse=True)
        for _, st, pc, pr, bound in rows[:8]:
            print('    %6.2f%% / %6.2f%%  (|diff| %5.2f <= %5.2f)%s  %s'
                  % (100 * pc, 100 * pr, 100 * abs(pc - pr), 100 * bound,
                     '' if st not in bad else ' OUT', st))
        if len(rows) > 8:
            print('    ... %d more stacks, each under %.2f%% of its kernel\'s samples'
                  % (len(rows) - 8, 100 * rows[8][0]))
        for st in bad:
            if all(st != row[1] for row in rows[:8]):
                row = next(x for x in rows if x[1] == st)
                print('    %6.2f%% / %6.2f%%  (|diff| %5.2f > %5.2f) OUT  %s'
                      % (100 * row[2], 100 * row[3], 100 * abs(row[2] - row[3]),
                         100 * row[4], st))
        for name, d in (('C', cn.get(s, {})), ('Rust', rn.get(s, {}))):
            for st, n in sorted(d.items(), key=lambda x: -x[1])[:3]:
                print('    by name, %-4s %5d: %s' % (name, n, st))
        if bad:
            failed += 1
            print('    DIFFERENT: %d stacks whose shares differ beyond the bound' % len(bad))
        else:
            passed += 1
            print('    the same distribution: %d stacks, every share within its bound'
                  % len(rows))
    if not passed and not failed:
        failed = 1
        print('no "# ASTACK" lines in either log')
    print('differential: %d sessions the same, %d different' % (passed, failed))
    if a.results:
        with open(a.results, 'w') as f:
            f.write('%d %d differential\n' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
