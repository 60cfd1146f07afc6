#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Differential check: the same workload, recorded by the real perf tool on
the upstream C kernel and on the Rust kernel, must give the same merged
user stacks, in the same proportions, wherever the samples were taken.

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

What the unwinder decides, and what it does not.  Where a timer sample
lands -- in the kernel or in user space, in which user function -- is the
workload's timing, and the two kernels change it on purpose: their
deferred paths cost different amounts of time per kernel entry (upstream's
perf glue writes a record entry by entry, ours in one copy), and a
cheaper path leaves fewer timer interrupts inside the kernel.  Measured in
CI: the kernel share of perf-task samples 77% on C, 67% on Rust.  So the
"where" of a sample, its K/U mark and sampled function, is printed but
its share is not compared.  Given the where, the chain of callers is the
unwinder's work alone, and that is compared.

The rule, per session:
- both kernels have at least MIN_SAMPLES samples (fewer cannot show a
  distribution; that fails the check, it does not pass it);
- C's stacks are first cut at the first return address at or above
  USER_LIMIT (TASK_SIZE_MAX): upstream records such values (garbage read
  from the stack of code without frame pointers), ours ends the walk there
  by design (src/logic/walk.rs); the number of samples cut is printed.
  A Rust stack holding such an address fails the check;
- for every where that both kernels sampled at least MIN_GROUP times, the
  distribution of caller chains among its samples agrees: every chain's
  share within SYSTEMATIC + SIGMAS standard errors of the difference of
  two binomial shares (pooled share p: sqrt(p (1 - p) (1/n_C + 1/n_Rust)));
  SIGMAS is 4, so that with a few dozen chains a chance failure is rarer
  than one in a thousand runs, SYSTEMATIC (2 points) allows for what is
  not chance but not the unwinder either (which start-up or exit path a
  sample happened to catch);
- the wheres so compared hold at least COVER of each kernel's samples, so
  the check cannot pass by comparing a corner of the run;
- every where with at least PRESENT of one kernel's samples was sampled on
  the other kernel too (a first frame the other kernel never reports).
Writes "passed failed differential" to --results.
"""
import argparse
import math
import re
import sys

ALINE = re.compile(r'^# ASTACK (\S+): (\d+): (.*\S)\s*$')
NLINE = re.compile(r'^# STACK (\S+): (\d+): (.*\S)\s*$')
MIN_SAMPLES = 200
MIN_GROUP = 50
COVER = 0.75
PRESENT = 0.02
SYSTEMATIC = 0.02
SIGMAS = 4.0
# TASK_SIZE_MAX of x86-64 with 4-level page tables: the first address that
# is not a user address.
USER_LIMIT = 0x7ffffffff000


def stacks(path, line):
    out = {}
    with open(path, 'rb') as f:
        for raw in f.read().decode('utf-8', 'replace').replace('\r', '').split('\n'):
            m = line.match(raw)
            if m:
                d = out.setdefault(m.group(1), {})
                d[m.group(3)] = d.get(m.group(3), 0) + int(m.group(2))
    return out


def non_user(addr):
    try:
        return int(addr, 16) >= USER_LIMIT
    except ValueError:
        return False


def split(st):
    """(where, chain): the K/U mark with the sampled function, and the
    return addresses of its callers."""
    t = st.split()
    return ' '.join(t[:2]), t[2:]


def normalise(cs):
    """C's stacks cut at the first non-user return address; returns the
    cut stacks and how many samples were cut."""
    out, cut = {}, 0
    for st, n in cs.items():
        where, chain = split(st)
        for i, a in enumerate(chain):
            if non_user(a):
                chain = chain[:i]
                cut += n
                break
        key = ' '.join([where] + chain)
        out[key] = out.get(key, 0) + n
    return out, cut


def by_where(cs):
    g = {}
    for st, n in cs.items():
        where, chain = split(st)
        d = g.setdefault(where, {})
        key = ' '.join(chain) or '(no callers)'
        d[key] = d.get(key, 0) + n
    return g


def compare(cs, rs):
    """Chains of one where: the list of (chain, share C, share Rust, bound,
    out of bound) rows, largest first."""
    nc, nr = sum(cs.values()), sum(rs.values())
    rows = []
    for st in set(cs) | set(rs):
        pc, pr = cs.get(st, 0) / nc, rs.get(st, 0) / nr
        p = (cs.get(st, 0) + rs.get(st, 0)) / (nc + nr)
        bound = SYSTEMATIC + SIGMAS * math.sqrt(p * (1 - p) * (1 / nc + 1 / nr))
        rows.append((max(pc, pr), st, pc, pr, bound, abs(pc - pr) > bound))
    rows.sort(reverse=True)
    return rows


def session(s, cs, rs):
    """Compare one session; print why; True if the same."""
    nc, nr = sum(cs.values()), sum(rs.values())
    print('%-10s C %d samples in %d stacks, Rust %d in %d' % (s, nc, len(cs), nr, len(rs)))
    if nc < MIN_SAMPLES or nr < MIN_SAMPLES:
        print('    DIFFERENT: too few samples to compare distributions (at least %d each)'
              % MIN_SAMPLES)
        return False
    ok = True
    bad_rust = sum(n for st, n in rs.items() if any(non_user(a) for a in split(st)[1]))
    if bad_rust:
        print('    DIFFERENT: %d Rust samples hold a return address at or above %#x'
              % (bad_rust, USER_LIMIT))
        ok = False
    cs, cut = normalise(cs)
    print('    %d C samples cut at a non-user return address (upstream records it, '
          'ours ends the walk)' % cut)
    gc, gr = by_where(cs), by_where(rs)
    wc = {w: sum(d.values()) for w, d in gc.items()}
    wr = {w: sum(d.values()) for w, d in gr.items()}
    wheres = sorted(set(wc) | set(wr), key=lambda w: -max(wc.get(w, 0) / nc, wr.get(w, 0) / nr))
    print('    where the samples were taken (timing, not compared): C / Rust')
    for w in wheres[:6]:
        print('      %6.2f%% / %6.2f%%  %s' % (100 * wc.get(w, 0) / nc, 100 * wr.get(w, 0) / nr, w))
    if len(wheres) > 6:
        print('      ... %d more' % (len(wheres) - 6))
    for w in wheres:
        for mine, other, name in ((wc, wr, 'Rust'), (wr, wc, 'C')):
            share = mine.get(w, 0) / (nc if mine is wc else nr)
            if share >= PRESENT and not other.get(w, 0):
                print('    DIFFERENT: %s never sampled at %s (%.2f%% of the other kernel\'s)'
                      % (name, w, 100 * share))
                ok = False
    covered_c = covered_r = 0
    small = []
    for w in wheres:
        if wc.get(w, 0) < MIN_GROUP or wr.get(w, 0) < MIN_GROUP:
            small.append(w)
            continue
        covered_c += wc[w]
        covered_r += wr[w]
        rows = compare(gc[w], gr[w])
        bad = [r for r in rows if r[5]]
        print('    at %s: C %d, Rust %d samples, %d chains%s'
              % (w, wc[w], wr[w], len(rows), ', %d out of bound' % len(bad) if bad else ''))
        shown = rows[:4] + [r for r in rows[4:] if r[5]]
        for _, st, pc, pr, bound, out in shown:
            print('      %6.2f%% / %6.2f%%  (|diff| %5.2f %s %5.2f)%s  %s'
                  % (100 * pc, 100 * pr, 100 * abs(pc - pr), '>' if out else '<=',
                     100 * bound, ' OUT' if out else '', st))
        if bad:
            ok = False
    print('    compared: %.1f%% of C\'s samples, %.1f%% of Rust\'s; %d wheres with fewer '
          'than %d samples on a kernel not compared'
          % (100 * covered_c / nc, 100 * covered_r / nr, len(small), MIN_GROUP))
    if covered_c < COVER * nc or covered_r < COVER * nr:
        print('    DIFFERENT: less than %d%% of a kernel\'s samples could be compared'
              % (100 * COVER))
        ok = False
    print('    the same stacks' if ok else '    DIFFERENT')
    return ok


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
        if session(s, c.get(s, {}), r.get(s, {})):
            passed += 1
        else:
            failed += 1
        for name, d in (('C', cn.get(s, {})), ('Rust', rn.get(s, {}))):
            for st, n in sorted(d.items(), key=lambda x: -x[1])[:2]:
                print('    by name, %-4s %5d: %s' % (name, n, st))
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
