#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the serial logs of `make bench` into a table, CSV, JSON and a chart.

    bench.py DIR [--kernel-version TEXT] [--commit REV] [--date TEXT]

DIR holds <kernel>-<mode>-<rep>.log (kernel c|rust, mode icount|tcg), each
with "BENCH ws=W depth=D <result line>" lines from deferred_bench.  For
every metric and kernel the icount repetitions give the median, min and
max; the ratio is Rust's median over C's (below 1: Rust costs less).  The
plain-TCG figures (wall time, noisy) are shown beside them.

The end-to-end section comes from "BENCH_E2E case=C freq=F mode=M ..."
lines (perf_bench.sh: the perf tool profiling a deep-stack workload
unprofiled, with classic fp and with fp,defer callchains): per case, the
slowdown per sample, ring-buffer bytes per sample against the ideal,
deferred records per kernel entry, computed per boot, then medians.

The real programs' section comes from "BENCH_REAL prog=P mode=M ..."
lines (perf_bench_real.sh: Debian perl, gzip, bzip2, grep and
python3.11, no frame pointers, unprofiled, under perf record -F 4000 --call-graph fp,defer
with the unwind tables off and on, and with dwarf): per program and
kernel, the program's CPU time (its task_work's deferred walks included)
over its unprofiled time, tables on over off, the cost per sample, the
bytes per sample and the compiled rows' bytes; ratios per boot, then
median [min-max].

The frameless deep program's section comes from "BENCH_DEEP mode=M ..."
lines (perf_bench_deep.sh: deep_workload, 150 frames without frame
pointers, unprofiled, under perf record -F 4000 --call-graph fp,defer
with the tables off and on (C kernel: fp, frame pointers) and with
dwarf): per mode and kernel, CPU time over unprofiled, CPU, perf.data
bytes and perf report time per sample, the median user stack depth and
the share of stacks reaching main; ratios (tables on / off; dwarf /
fp,defer) per boot, then median [min-max].  bench.json's "e2e_deep";
absent when no log has the section.

bench.json's meta names the run: its date (the newest log's time unless
--date), the commit its kernels were built from (--commit, which
bench.sh takes before building them; else git's HEAD now) and the kernel
source version.  The Markdown tables of the README and docs/benchmarks.md
are generated from it by bench_tables.py: DIR/bench-tables.md here, the
README and docs by `make bench-docs` (bench_tables.py --publish DIR).
The charts need matplotlib (Debian's python3-matplotlib); without it
they are skipped, with a warning.
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_tables  # noqa: E402  (the tables and the CSV, shared)

LINE = re.compile(r'BENCH ws=(\d+) depth=(\d+) (\w+) (.*)$')


def spread(row, kernel, vals):
    """Put median, min, max and count of `vals` in `row` under `kernel`."""
    row[kernel + '_median'] = statistics.median(vals)
    row[kernel + '_min'] = min(vals)
    row[kernel + '_max'] = max(vals)
    row[kernel + '_n'] = len(vals)


def metrics_of(log):
    """{metric name: (value, unit)} of one log."""
    out = {}
    with open(log, errors='replace') as f:
        for raw in f:
            m = LINE.search(raw)
            if not m:
                continue
            ws, depth, kind, rest = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
            kv = dict(re.findall(r'(\w+)=(\d+)', rest))
            kv = {k: int(v) for k, v in kv.items()}
            # A console message can cut a line (the serial port is
            # shared): such a line is dropped, with a warning.
            need = {'walk': ('iters', 'nr', 'ns'), 'faultable': ('iters', 'nr', 'ns'),
                    'task': ('iters', 'tracers', 'first', 'repeat', 'dispatch', 'reset'),
                    'irq': ('iters', 'tracers', 'first', 'repeat'),
                    'nmi': ('iters', 'tracers', 'first', 'repeat')}.get(kind, ())
            if any(k not in kv for k in need) or '[' in rest:
                print('warning: %s: cut line dropped: %s' % (log, raw.strip()), file=sys.stderr)
                continue
            bits = '64-bit' if ws == 8 else 'compat'
            if kind == 'walk':
                iters, nr = kv['iters'], kv['nr']
                if not iters or not nr:
                    continue
                out['walk %s, %d frames: per frame' % (bits, nr)] = (kv['ns'] / iters / nr, 'ns')
                out['walk %s, %d frames: per walk' % (bits, nr)] = (kv['ns'] / iters, 'ns')
            elif kind == 'faultable':
                iters, nr = kv['iters'], kv['nr']
                if not iters or not nr:
                    continue
                how = {None: 'frame pointers', 0: 'frame pointers',
                       1: 'unwind tables'}[kv.get('tables')]
                # A new process whose objects' rows another one compiled.
                if kv.get('shared'):
                    how += ', rows of another process'
                out['deferred walk %s, %d frames (%s): per frame' % (bits, nr, how)] = \
                    (kv['ns'] / iters / nr, 'ns')
                # The first walk of a depth apart (for the tables: the one
                # that compiles the rows its frames need, when the
                # process's earlier walks had not).
                if 'first_ns' in kv:
                    out['deferred walk %s, %d frames (%s, first walk): per frame'
                        % (bits, nr, how)] = (kv['first_ns'] / nr, 'ns')
                # The second (the table walk allocates its memo there).
                if kv.get('second_ns'):
                    out['deferred walk %s, %d frames (%s, second walk): per frame'
                        % (bits, nr, how)] = (kv['second_ns'] / nr, 'ns')
            elif kind in ('task', 'irq', 'nmi'):
                iters, n = kv['iters'], kv['tracers']
                if kv.get('bad'):
                    print('warning: %s: %s reported bad=%d' % (log, kind, kv['bad']),
                          file=sys.stderr)
                if n == 1:
                    out['request from %s: first of the entry' % kind] = (kv['first'] / iters, 'ns')
                    out['request from %s: repeat' % kind] = (kv['repeat'] / iters, 'ns')
                if kind == 'task':
                    out['task_work, %d tracer%s (walk + callbacks)' % (n, 's' if n > 1 else '')] = \
                        (kv['dispatch'] / iters, 'ns')
                    if n == 1:
                        out['return to user: reset'] = (kv['reset'] / iters, 'ns')
            # cancel and memory: memory_and_scale_of() below.
    return out


# Extra threads of the cancel runs: nr_threads also counts the kernel's
# own threads and the benchmark's main thread.
CANCEL_SIZES = (10, 100, 1000, 10000)


def memory_and_scale_of(log):
    """{metric: (value, unit)}: memory (item 5) and cancel (item 6) of one log.

    memory: kernel memory per task that used deferred unwinding: the Slab
    growth when N live threads each had their first deferred unwind, over
    N (the cache; the task_struct fields are there whether used or not).
    cancel: every cancel of the run at each thread count, a list (grace
    periods vary with where in a tick a cancel starts: the median and
    range over all of them are reported, not the best); the growth per
    extra thread from 100 to 1,000 and from 1,000 to 10,000 threads
    between this run's medians, and what is left at 0 threads on the
    second line: the grace periods and fixed work.
    """
    out = {}
    cancels = {}    # size -> [(threads, ns)]
    cached = {}     # threads with a cache -> [ns]
    with open(log, errors='replace') as f:
        for raw in f:
            m = LINE.search(raw)
            if not m or int(m.group(1)) != 8:
                continue
            kind = m.group(3)
            kv = {k: int(v) for k, v in re.findall(r'(\w+)=(\d+)', m.group(4))}
            if kind == 'memory':
                n, done = kv['threads'], kv['unwound']
                if not n or done != n or 'slab_kb2' not in kv:
                    print('warning: %s: memory: %d of %d threads unwound' % (log, done, n),
                          file=sys.stderr)
                    continue
                # Every round's residue; the growth of the last round.
                out['memory: Slab after exit - baseline, round %d' % kv.get('round', 1)] = \
                    (kv['slab_kb3'] - kv['slab_kb0'], 'kB')
                grow = kv['slab_kb2'] - kv['slab_kb1']
                out['memory: Slab per task after its first deferred unwind'] = \
                    (grow * 1024 / n, 'B')
                out['memory: Slab growth, %d threads unwound' % n] = (grow, 'kB')
                out['memory: SUnreclaim growth, %d threads unwound' % n] = \
                    (kv['sunreclaim_kb2'] - kv['sunreclaim_kb1'], 'kB')
                if 'kmalloc4k2' in kv:
                    out['memory: kmalloc-4k objects, %d threads unwound' % n] = \
                        (kv['kmalloc4k2'] - kv['kmalloc4k1'], 'objects')
                out['memory: Slab per thread started, before any unwind'] = \
                    ((kv['slab_kb1'] - kv['slab_kb0']) * 1024 / n, 'B')
            elif kind == 'cancel':
                t = kv['threads']
                if 'cached' in kv:
                    # One per memory round.
                    cached.setdefault(kv['cached'], []).append(kv['ns'])
                    continue
                size = max([s for s in CANCEL_SIZES if t >= s] or [CANCEL_SIZES[0]])
                cancels.setdefault(size, []).append((t, kv['ns']))
    for n, v in sorted(cached.items()):
        out['cancel, %d threads with a cache each' % n] = (v, 'ns')
    med = {}
    for size, v in sorted(cancels.items()):
        out['cancel, about %d threads' % size] = ([ns for _, ns in v], 'ns')
        med[size] = (statistics.median(t for t, _ in v), statistics.median(ns for _, ns in v))
    for lo, hi in ((100, 1000), (1000, 10000)):
        if lo in med and hi in med:
            (t1, ns1), (t2, ns2) = med[lo], med[hi]
            per = (ns2 - ns1) / (t2 - t1)
            out['cancel: growth per extra thread, %s to %s' % (f'{lo:,}', f'{hi:,}')] = \
                (per, 'ns')
            if hi == 10000:
                out['cancel: fixed part (that line at 0 threads)'] = (ns1 - per * t1, 'ns')
    return out


def scale_note(rows):
    """What the cancel figures show, kernel by kernel: work per thread, or
    grace periods.  Medians over every cancel; the growth per thread (the
    median of the runs' own) is taken as resolved when both intervals (100
    to 1,000 and 1,000 to 10,000 threads) show a positive one and they
    agree within a factor of 2."""
    by = {r['metric']: r for r in rows}
    med = [by.get('cancel, about %d threads' % n) for n in (100, 1000, 10000)]
    shown = [r for r in (by.get('cancel, about %d threads' % n) for n in CANCEL_SIZES) if r]
    s1 = by.get('cancel: growth per extra thread, 100 to 1,000')
    s2 = by.get('cancel: growth per extra thread, 1,000 to 10,000')
    fixed = by.get('cancel: fixed part (that line at 0 threads)')
    if not all(med) or not (s1 and s2 and fixed):
        print('cancel against 100, 1,000 and 10,000 threads: absent')
        return
    for kernel, label in (('c', 'C'), ('rust', 'Rust')):
        k = kernel + '_median'
        if not all(k in r for r in med + [s1, s2, fixed]):
            continue
        a, b = s1[k], s2[k]
        at = '%s us at %s threads' % (
            ' / '.join('%.0f' % (r[k] / 1000) for r in shown if k in r),
            ' / '.join(r['metric'].split()[2] for r in shown if k in r))
        if a > 0 and b > 0 and max(a, b) / min(a, b) <= 2:
            share = 100 * (med[2][k] - fixed[k]) / med[2][k]
            print('%s: cancel takes (median) %s: %.1f and %.1f ns'
                  ' more per thread (100 to 1,000, 1,000 to 10,000), on top of a fixed'
                  ' %.0f us (grace period); at 10,000 threads the walk over them is %.0f%%'
                  ' of it' % (label, at, a, b, fixed[k] / 1000, share))
        else:
            print('%s: cancel takes (median) %s: the growth per'
                  ' thread (%.1f, then %.1f ns) is not consistent, the cost is its grace'
                  ' periods; the walk over the threads is smaller than their variation'
                  % (label, at, a, b))


def memory_and_scale(runs):
    """Print the memory and scale table; its rows for the CSV and JSON."""
    names = []
    for kernel in ('c', 'rust'):
        for ms in runs.get((kernel, 'icount'), []):
            for k in ms:
                if k not in names:
                    names.append(k)
    # Memory first, then cancel by thread count, the line through them,
    # and cancel against threads with caches.
    def group(name):
        return (0.5 if 'after exit' in name else 0 if name.startswith('memory') else
                1 if name.startswith('cancel, about') else
                3 if name.startswith('cancel:') else 4)
    names.sort(key=group)

    def values(kernel, mode, name):
        """Every repetition's value: one a run, or a run's list (cancel)."""
        out = []
        for ms in runs.get((kernel, mode), []):
            if name in ms:
                v = ms[name][0]
                out += v if isinstance(v, list) else [v]
        return out

    rows = []
    for name in names:
        row = {'metric': name}
        for kernel in ('c', 'rust'):
            vals = values(kernel, 'icount', name)
            if vals:
                row['unit'] = next(ms[name][1] for ms in runs[(kernel, 'icount')]
                                   if name in ms)
                spread(row, kernel, vals)
            tcg = values(kernel, 'tcg', name)
            row[kernel + '_tcg'] = statistics.median(tcg) if tcg else None
            if len(tcg) > 1:
                # The plain-TCG boot's repetitions (cancel): their range.
                row[kernel + '_tcg_min'] = min(tcg)
                row[kernel + '_tcg_max'] = max(tcg)
                row[kernel + '_tcg_n'] = len(tcg)
        if row.get('c_median') and row.get('rust_median') is not None and \
                not name.startswith('cancel:') and 'after exit' not in name:
            row['ratio'] = row['rust_median'] / row['c_median']
        rows.append(row)
    if not rows:
        print('\nMemory and scale: no figures in the logs (absent)')
        return rows

    def fmt(v):
        return '-' if v is None else ('%.0f' % v if abs(v) >= 100 else '%.1f' % v)

    print('\nMemory (item 5) and cancel against many threads (item 6), icount runs')
    hdr = '%-56s %-7s %22s %22s %7s %10s %10s' % ('metric', 'unit', 'C median [min-max]',
                                                    'Rust median [min-max]', 'Rust/C',
                                                    'C tcg', 'Rust tcg')
    print(hdr)
    print('-' * len(hdr))
    for r in rows:
        c = '%s [%s-%s]' % (fmt(r.get('c_median')), fmt(r.get('c_min')), fmt(r.get('c_max')))
        rs = '%s [%s-%s]' % (fmt(r.get('rust_median')), fmt(r.get('rust_min')),
                             fmt(r.get('rust_max')))
        ratio = '%.2f' % r['ratio'] if 'ratio' in r else '-'
        print('%-56s %-7s %22s %22s %7s %10s %10s' % (r['metric'], r.get('unit', '-'), c, rs,
                                                     ratio, fmt(r.get('c_tcg')),
                                                     fmt(r.get('rust_tcg'))))
    scale_note(rows)
    return rows



# ---- end to end (perf_bench.sh) ----

E2E_LINE = re.compile(r'BENCH_E2E (.*)$')
# Targets of the benchmark issue, printed beside the figures (not judged
# by make bench): (case, metric, bound).
E2E_TARGETS = [
    ('sys3', 'fp,defer bytes / ideal', 1.10),
    ('sys10', 'fp,defer bytes / ideal', 1.10),
    ('sys10', 'fp,defer bytes / fp bytes', 0.20),
    ('sys1', 'fp,defer / fp slowdown per sample', 1.00),
    ('sys3', 'fp,defer / fp slowdown per sample', 1.00),
    ('sys10', 'fp,defer / fp slowdown per sample', 1.00),
    ('sys100', 'fp,defer / fp slowdown per sample', 1.00),
]


def e2e_runs_of(log):
    """{case: {mode: {field: int or None ('-': not measurable)}}}."""
    out = {}
    with open(log, errors='replace') as f:
        for raw in f:
            m = E2E_LINE.search(raw)
            if not m:
                continue
            kv = dict(re.findall(r'(\w+)=(\S+)', m.group(1)))
            fields = {k: (None if v == '-' else int(v)) for k, v in kv.items()
                      if k not in ('case', 'mode')}
            out.setdefault(kv['case'], {})[kv['mode']] = fields
    return out


def e2e_case_label(case, freq):
    khz = '%g kHz' % (freq / 1000)
    m = re.match(r'sys(\d+)$', case)
    if m:
        return '%s: syscall-bound, ~%s samples/entry, %s' % (case, m.group(1), khz)
    return '%s: CPU-bound, %s' % (case, khz)


def e2e_metrics_of(log):
    """{(case label, metric): (value, unit)} of one log's end-to-end runs."""
    out = {}
    for case, modes in e2e_runs_of(log).items():
        none, fp, d = modes.get('none'), modes.get('fp'), modes.get('defer')
        if not none or not fp or not d:
            continue
        label = e2e_case_label(case, fp['freq'])

        def put(metric, value, unit):
            if value is not None:
                out[(label, metric)] = (value, unit)

        def div(a, b):
            return a / b if a is not None and b else None

        base = none['ns']
        put('unprofiled run', base / 1e6, 'ms')
        slow = {}
        for mode, r in (('fp', fp), ('fp,defer', d)):
            slow[mode] = div(r['ns'] - base, r['samples'])
            put('slowdown per sample, ' + mode, div(slow[mode], 1000), 'us')
            put('slowdown, ' + mode, div(100.0 * (r['ns'] - base), base), '%')
        put('fp,defer / fp slowdown per sample', div(slow['fp,defer'], slow['fp']), 'x')
        fp_b = div(fp['sample_bytes'], fp['samples'])
        d_b = div(d['sample_bytes'] + (d['deferred_bytes'] or 0), d['samples'])
        ideal_b = div(d['ideal_bytes'], d['samples'])
        put('bytes per sample, fp', fp_b, 'B')
        put('bytes per sample, fp,defer', d_b, 'B')
        put('bytes per sample, ideal', ideal_b, 'B')
        put('fp,defer bytes / ideal', div(d_b, ideal_b), 'x')
        put('fp,defer bytes / fp bytes', div(d_b, fp_b), 'x')
        put('perf.data bytes per sample, fp', div(fp['data_bytes'], fp['samples_all']), 'B')
        put('perf.data bytes per sample, fp,defer',
            div(d['data_bytes'], d['samples_all']), 'B')
        put('samples per kernel entry (fp,defer)', div(d['samples'], d['entries']), '')
        put('deferred records per kernel entry', div(d['deferred'], d['entries']), '')
        put('user stack depth, fp', fp['depth'], 'frames')
        put('user stack depth, fp,defer', d['depth'], 'frames')
    return out


def e2e_rows(runs):
    """Rows like main()'s, from {(kernel, mode): [e2e_metrics_of(log)]}."""
    keys = []
    for ms in runs.get(('c', 'icount'), []) + runs.get(('rust', 'icount'), []):
        for k in ms:
            if k not in keys:
                keys.append(k)
    rows = []
    for key in keys:
        label, metric = key
        row = {'section': 'end to end', 'case': label,
               'metric': 'end to end, %s: %s' % (label, metric), 'name': metric}
        for kernel in ('c', 'rust'):
            vals = [ms[key][0] for ms in runs.get((kernel, 'icount'), []) if key in ms]
            units = [ms[key][1] for ms in runs.get((kernel, 'icount'), []) if key in ms]
            if vals:
                row['unit'] = units[0]
                spread(row, kernel, vals)
            tcg = [ms[key][0] for ms in runs.get((kernel, 'tcg'), []) if key in ms]
            row[kernel + '_tcg'] = statistics.median(tcg) if tcg else None
        if row.get('c_median') and row.get('rust_median') is not None:
            row['ratio'] = row['rust_median'] / row['c_median']
        rows.append(row)
    return rows


def e2e_print(rows):
    """The end-to-end table, one block per case, a summary, the targets."""
    if not rows:
        print('\nEnd to end: no BENCH_E2E figures in the logs')
        return

    def fmt(v):
        if v is None:
            return '-'
        a = abs(v)
        if a >= 100 or v == int(v):
            return '%.0f' % v
        return '%.1f' % v if a >= 10 else '%.2f' % v

    print('\nEnd to end: perf record -e cpu-clock on a 150-frame user stack, unprofiled vs '
          '--call-graph fp vs fp,defer\n(fp,defer is upstream C on the C kernel, this '
          "project's Rust on the Rust kernel; slowdown: profiled minus unprofiled time\n"
          'of the same work, guest ns; bytes: ring-buffer records of the samples and of '
          'their deferred callchains;\nkernel entries are the distinct cookies: classic fp '
          'has none, so per-entry figures are fp,defer only)')
    hdr = '  %-38s %6s %22s %22s %7s %9s %9s' % ('metric', 'unit', 'C median [min-max]',
                                                'Rust median [min-max]', 'Rust/C',
                                                'C tcg', 'Rust tcg')
    case = None
    for r in rows:
        if r['case'] != case:
            case = r['case']
            print('\n' + case)
            print(hdr)
        c = '%s [%s-%s]' % (fmt(r.get('c_median')), fmt(r.get('c_min')), fmt(r.get('c_max')))
        rs = '%s [%s-%s]' % (fmt(r.get('rust_median')), fmt(r.get('rust_min')),
                             fmt(r.get('rust_max')))
        ratio = '%.2f' % r['ratio'] if 'ratio' in r else '-'
        print('  %-38s %6s %22s %22s %7s %9s %9s' % (r['name'], r.get('unit', ''), c, rs, ratio,
                                                   fmt(r.get('c_tcg')), fmt(r.get('rust_tcg'))))

    def med(case, name, kernel):
        r = next((r for r in rows if r['case'] == case and r['name'] == name), None)
        return r.get(kernel + '_median') if r else None

    print('\nSummary (medians, icount)')
    print('  %-8s | %-33s | %-29s | %-11s | %s' % (
        '', 'slowdown per sample (us)', 'bytes per sample', 'defer/ideal',
        'records/entry'))
    print('  %-8s | %7s %7s %8s %8s | %5s %7s %7s %7s | %5s %5s | %5s %5s' % (
        'case', 'fp C', 'fp Rust', 'defer C', 'defer Rs', 'fp', 'defer C', 'def. Rs', 'ideal C',
        'C', 'Rust', 'C', 'Rust'))
    for case in dict.fromkeys(r['case'] for r in rows):
        f = lambda name, k: fmt(med(case, name, k))
        print('  %-8s | %7s %7s %8s %8s | %5s %7s %7s %7s | %5s %5s | %5s %5s' % (
            case.split(':')[0],
            f('slowdown per sample, fp', 'c'), f('slowdown per sample, fp', 'rust'),
            f('slowdown per sample, fp,defer', 'c'), f('slowdown per sample, fp,defer', 'rust'),
            f('bytes per sample, fp', 'c'), f('bytes per sample, fp,defer', 'c'),
            f('bytes per sample, fp,defer', 'rust'), f('bytes per sample, ideal', 'c'),
            f('fp,defer bytes / ideal', 'c'), f('fp,defer bytes / ideal', 'rust'),
            f('deferred records per kernel entry', 'c'),
            f('deferred records per kernel entry', 'rust')))

    print('\nTargets (benchmark issue; medians, icount; printed, not judged):')
    for case, metric, bound in E2E_TARGETS:
        r = next((r for r in rows if r['case'].startswith(case + ':') and r['name'] == metric),
                 None)
        if r is None:
            print('  %-7s %-36s <= %.2f: not measured' % (case, metric, bound))
            continue
        parts = []
        for kernel, name in (('c', 'C'), ('rust', 'Rust')):
            v = r.get(kernel + '_median')
            if v is None:
                parts.append('%s -' % name)
            else:
                parts.append('%s %.2f (%s)' % (name, v, 'met' if v <= bound else 'missed'))
        print('  %-7s %-36s <= %.2f: %s' % (case, metric, bound, ', '.join(parts)))


def e2e_chart(rows, out_dir, meta):
    """bench-e2e.{svg,png}: bytes and slowdown per sample, per case."""
    if not rows:
        return
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r['case'] for r in rows))

    def med(case, name, kernel):
        r = next((r for r in rows if r['case'] == case and r['name'] == name), None)
        v = r.get(kernel + '_median') if r else None
        return float('nan') if v is None else v

    panels = [
        ('ring-buffer bytes per sample (log scale)', True, [
            ('fp (C kernel)', 'bytes per sample, fp', 'c', 'tab:gray'),
            ('fp,defer C', 'bytes per sample, fp,defer', 'c', 'tab:blue'),
            ('fp,defer Rust', 'bytes per sample, fp,defer', 'rust', 'tab:orange'),
            ('ideal (C run)', 'bytes per sample, ideal', 'c', 'tab:green')]),
        ('slowdown per sample (us of guest time)', False, [
            ('fp, C kernel', 'slowdown per sample, fp', 'c', 'tab:gray'),
            ('fp, Rust kernel', 'slowdown per sample, fp', 'rust', 'silver'),
            ('fp,defer C', 'slowdown per sample, fp,defer', 'c', 'tab:blue'),
            ('fp,defer Rust', 'slowdown per sample, fp,defer', 'rust', 'tab:orange')]),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    width = 0.8 / 4
    for ax, (title, log, series) in zip(axes, panels):
        for i, (label, name, kernel, color) in enumerate(series):
            ax.bar([x + (i - 1.5) * width for x in range(len(cases))],
                   [med(c, name, kernel) for c in cases], width, label=label, color=color)
        ax.set_xticks(list(range(len(cases))))
        ax.set_xticklabels([c.split(':')[0] for c in cases])
        if log:
            ax.set_yscale('log')
            ticks = [100, 200, 500, 1000, 2000]
            ax.set_yticks(ticks)
            ax.set_yticklabels([str(t) for t in ticks])
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.08), ncol=4)
    fig.suptitle('End to end, perf record -e cpu-clock, 150-frame stack: sysN = syscall-bound, '
                 '~N samples per kernel entry at 4 kHz; cpuNk = CPU-bound at N kHz\n'
                 '%s, commit %s, %s, medians of %d icount runs'
                 % (meta['kernel'], meta['commit'] or '?', meta['date'],
                    meta['icount repetitions']),
                 fontsize=9)
    fig.tight_layout()
    for ext in ('svg', 'png'):
        fig.savefig(os.path.join(out_dir, 'bench-e2e.' + ext))


REAL_LINE = re.compile(r'BENCH_REAL (.*)$')


def real_runs_of(log):
    """{(prog, mode): {field: value}} of one boot's BENCH_REAL lines."""
    out = {}
    if not os.path.exists(log):
        return out
    with open(log, errors='replace') as f:
        for line in f:
            m = REAL_LINE.search(line)
            if not m:
                continue
            kv = dict(x.split('=', 1) for x in m.group(1).split() if '=' in x)
            vals = {k: (None if v == '-' else float(v)) for k, v in kv.items()
                    if k not in ('prog', 'mode')}
            out[(kv.get('prog'), kv.get('mode'))] = vals
    return out


def real_metrics_of(log):
    """{(prog, metric): value} of one boot: ratios within the boot."""
    runs = real_runs_of(log)
    out = {}
    progs = sorted({p for p, _ in runs})
    for p in progs:
        none = runs.get((p, 'none'), {}).get('cpu_us')
        for m in ('off', 'on', 'again', 'cap', 'fp', 'dwarf'):
            r = runs.get((p, m))
            if not r or not none or r.get('cpu_us') is None:
                continue
            out[(p, 'CPU %s / unprofiled' % m)] = r['cpu_us'] / none
            if r.get('samples'):
                out[(p, 'us/sample %s' % m)] = (r['cpu_us'] - none) / r['samples']
                if r.get('bytes') is not None:
                    out[(p, 'bytes/sample %s' % m)] = r['bytes'] / r['samples']
            if m in ('on', 'again', 'cap') and r.get('rows_bytes') is not None:
                out[(p, 'rows KiB (%s)' % m)] = r['rows_bytes'] / 1024
            if m == 'cap' and r.get('evictions') is not None:
                out[(p, 'evictions (cap)')] = r['evictions']
        off = runs.get((p, 'off'))
        for m in ('on', 'again', 'cap'):
            r = runs.get((p, m))
            if r and off and off.get('cpu_us') and r.get('cpu_us') is not None:
                out[(p, 'CPU %s / off' % m)] = r['cpu_us'] / off['cpu_us']
    return out


def real_rows(real):
    """Rows (program, metric, kernel medians [min-max]) of every boot."""
    rows = []
    keys = []
    for (kernel, mode), boots in sorted(real.items()):
        if mode != 'icount':
            continue
        for b in boots:
            for k in b:
                if k not in keys:
                    keys.append(k)
    for prog, metric in keys:
        row = {'metric': '%s: %s' % (prog, metric), 'unit': 'ratio'}
        for kernel in ('c', 'rust'):
            vals = [b[(prog, metric)] for b in real.get((kernel, 'icount'), [])
                    if (prog, metric) in b]
            if vals:
                spread(row, kernel, vals)
        rows.append(row)
    return rows


def real_print(rows):
    if not rows:
        print('\nReal programs: no BENCH_REAL figures in the logs')
        return

    def fmt(r, k):
        if r.get(k + '_median') is None:
            return '-'
        f = '%.3f' if r['unit'] == 'ratio' and r[k + '_median'] < 10 else '%.1f'
        return (f + ' [' + f + '-' + f + ']') % (r[k + '_median'], r[k + '_min'], r[k + '_max'])

    print('\nReal programs (Debian, no frame pointers), perf record -F 4000 -e cpu-clock;'
          ' CPU time of the program, deferred walks included (icount: instructions)')
    hdr = '%-40s %26s %26s' % ('program: metric', 'C median [min-max]', 'Rust median [min-max]')
    print(hdr)
    print('-' * len(hdr))
    for r in rows:
        print('%-40s %26s %26s' % (r['metric'], fmt(r, 'c'), fmt(r, 'rust')))


DEEP_LINE = re.compile(r'BENCH_DEEP (.*)$')
# The profiled modes of perf_bench_deep.sh: fp,defer with the tables off
# and on (Rust kernel), fp,defer on a kernel without tables (C: frame
# pointers), dwarf; the mode dwarf is compared with on the kernel's own
# fp,defer (tables on for Rust).
DEEP_MODES = ('off', 'on', 'fp', 'dwarf')


def deep_runs_of(log):
    """{mode: {field: float or None}} of one boot's BENCH_DEEP lines."""
    out = {}
    if not os.path.exists(log):
        return out
    with open(log, errors='replace') as f:
        for line in f:
            m = DEEP_LINE.search(line)
            if not m:
                continue
            kv = dict(x.split('=', 1) for x in m.group(1).split() if '=' in x)
            try:
                vals = {k: (None if v == '-' else float(v)) for k, v in kv.items()
                        if k != 'mode'}
            except ValueError:
                print('warning: %s: cut line dropped: %s' % (log, line.strip()),
                      file=sys.stderr)
                continue
            out[kv.get('mode')] = vals
    return out


def deep_metrics_of(log):
    """{metric: value} of one boot's frameless deep runs: figures per mode
    and ratios within the boot."""
    runs = deep_runs_of(log)
    out = {}
    none = runs.get('none', {}).get('cpu_us')
    if not none:
        return out
    out['unprofiled CPU ms'] = none / 1000
    per = {}
    for m in DEEP_MODES:
        r = runs.get(m)
        if not r or r.get('cpu_us') is None or not r.get('samples'):
            continue
        s = r['samples']
        p = per[m] = {'us': (r['cpu_us'] - none) / s}
        out['CPU %s / unprofiled' % m] = r['cpu_us'] / none
        out['us/sample %s' % m] = p['us']
        out['samples %s' % m] = s
        if r.get('bytes') is not None:
            p['bytes'] = out['bytes/sample %s' % m] = r['bytes'] / s
        if r.get('report_us') is not None:
            out['report ms %s' % m] = r['report_us'] / 1000
            p['report'] = out['report ms/sample %s' % m] = r['report_us'] / 1000 / s
        if r.get('depth') is not None:
            out['depth %s' % m] = r['depth']
        if r.get('stacks'):
            out['%% reaching main %s' % m] = 100.0 * (r.get('main') or 0) / r['stacks']
        if m != 'dwarf' and r.get('deferred') is not None:
            out['deferred/sample %s' % m] = r['deferred'] / s

    def ratio(name, a, b, key):
        if a in per and b in per and per[b].get(key) and per[a].get(key) is not None:
            out[name] = per[a][key] / per[b][key]
    for key, what in (('us', 'us/sample'), ('bytes', 'bytes/sample'),
                      ('report', 'report ms/sample')):
        ratio('%s on / off' % what, 'on', 'off', key)
        for base in ('on', 'fp'):
            ratio('%s dwarf / %s' % (what, base), 'dwarf', base, key)
    return out


def deep_rows(deep):
    """Rows (metric, kernel medians [min-max]) of every icount boot."""
    keys = []
    for b in deep.get(('c', 'icount'), []) + deep.get(('rust', 'icount'), []):
        for k in b:
            if k not in keys:
                keys.append(k)
    rows = []
    for k in keys:
        unit = ('ratio' if ' / ' in k else 'us' if k.startswith('us/') else
                'B' if k.startswith('bytes') else 'ms' if ' ms' in k or 'ms/' in k else
                'frames' if k.startswith('depth') else '%' if k.startswith('%') else '')
        row = {'section': 'e2e deep', 'name': k, 'metric': 'deep: %s' % k, 'unit': unit}
        for kernel in ('c', 'rust'):
            vals = [b[k] for b in deep.get((kernel, 'icount'), []) if k in b]
            if vals:
                spread(row, kernel, vals)
        rows.append(row)
    return rows


def deep_print(rows):
    if not rows:
        print('\nFrameless deep program: no BENCH_DEEP figures in the logs')
        return

    def fmt(r, k):
        if r.get(k + '_median') is None:
            return '-'
        v = r[k + '_median']
        f = '%.3f' if abs(v) < 10 else '%.1f'
        return (f + ' [' + f + '-' + f + ']') % (v, r[k + '_min'], r[k + '_max'])

    print('\nFrameless deep program (deep_workload, 150 frames, no frame pointers),'
          ' perf record -F 4000 -e cpu-clock; CPU time of the workload (icount: instructions)')
    hdr = '%-40s %-6s %28s %28s' % ('metric', 'unit', 'C median [min-max]',
                                     'Rust median [min-max]')
    print(hdr)
    print('-' * len(hdr))
    for r in rows:
        print('%-40s %-6s %28s %28s' % (r['name'], r['unit'], fmt(r, 'c'), fmt(r, 'rust')))
    r = next((r for r in rows if r['name'] == 'us/sample on / off'), None)
    v = r.get('rust_median') if r else None
    print('Target (issue #19): fp,defer tables on / off, CPU per sample <= 1.5: %s' % (
        'not measured' if v is None else '%.2f (%s)' % (v, 'met' if v <= 1.5 else 'missed')))


def git_commit():
    """HEAD of this repository, '-dirty' if tracked files differ ('' if
    there is no git)."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(['git', '-C', top, 'rev-parse', '--short=7', 'HEAD'],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', top, 'diff', '--quiet', 'HEAD', '--'],
                               capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return ''
    return rev + ('-dirty' if dirty else '')


def run_date(logs):
    """The run's date: the time its last log was written, UTC."""
    t = max(os.path.getmtime(p) for p in logs)
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--kernel-version', default='')
    ap.add_argument('--commit', default=None,
                    help="the commit the kernels were built from (default: git's HEAD now)")
    ap.add_argument('--date', default=None,
                    help="the run's date (default: the newest log's time, UTC)")
    a = ap.parse_args()

    runs = {}   # (kernel, mode) -> [metrics dict]
    e2e = {}    # the same, end to end
    mem_runs = {}   # the same, memory and cancel
    real = {}   # the same, real programs
    deep = {}   # the same, the frameless deep program
    for log in sorted(glob.glob(os.path.join(a.dir, '*-*-*.log'))):
        kernel, mode, _ = os.path.basename(log)[:-4].split('-', 2)
        runs.setdefault((kernel, mode), []).append(metrics_of(log))
        e2e.setdefault((kernel, mode), []).append(e2e_metrics_of(log))
        mem_runs.setdefault((kernel, mode), []).append(memory_and_scale_of(log))
        real.setdefault((kernel, mode), []).append(real_metrics_of(log))
        deep.setdefault((kernel, mode), []).append(deep_metrics_of(log))
    if not runs.get(('c', 'icount')) or not runs.get(('rust', 'icount')):
        sys.exit('bench.py: no icount runs of both kernels in %s' % a.dir)

    names = []
    for ms in runs[('c', 'icount')] + runs[('rust', 'icount')]:
        for k in ms:
            if k not in names:
                names.append(k)

    rows = []
    for name in names:
        row = {'metric': name, 'unit': 'ns'}
        for kernel in ('c', 'rust'):
            vals = [ms[name][0] for ms in runs[(kernel, 'icount')] if name in ms]
            if vals:
                spread(row, kernel, vals)
            tcg = [ms[name][0] for ms in runs.get((kernel, 'tcg'), []) if name in ms]
            row[kernel + '_tcg'] = statistics.median(tcg) if tcg else None
        if row.get('c_median') and row.get('rust_median') is not None:
            row['ratio'] = row['rust_median'] / row['c_median']
        rows.append(row)

    logs = glob.glob(os.path.join(a.dir, '*-*-*.log'))
    meta = {
        'date': a.date or run_date(logs),
        'commit': git_commit() if a.commit is None else a.commit,
        'kernel': a.kernel_version,
        'icount repetitions': len(runs[('c', 'icount')]),
        'timing': 'QEMU -icount shift=0,sleep=off: guest ns count guest instructions',
    }

    def fmt(v):
        return '-' if v is None else ('%.0f' % v if v >= 100 else '%.1f' % v)

    print('Deferred unwinding micro-benchmarks, Rust vs upstream C (%s; commit %s; %s;'
          ' %d icount runs each)' % (meta['kernel'], meta['commit'] or '?', meta['date'],
                                     meta['icount repetitions']))
    hdr = '%-48s %20s %20s %7s %9s %9s' % ('metric (ns)', 'C median [min-max]',
                                             'Rust median [min-max]', 'Rust/C',
                                             'C tcg', 'Rust tcg')
    print(hdr)
    print('-' * len(hdr))
    for r in rows:
        c = '%s [%s-%s]' % (fmt(r.get('c_median')), fmt(r.get('c_min')), fmt(r.get('c_max')))
        rs = '%s [%s-%s]' % (fmt(r.get('rust_median')), fmt(r.get('rust_min')),
                             fmt(r.get('rust_max')))
        ratio = '%.2f' % r['ratio'] if 'ratio' in r else '-'
        print('%-48s %20s %20s %7s %9s %9s' % (r['metric'], c, rs, ratio,
                                               fmt(r.get('c_tcg')), fmt(r.get('rust_tcg'))))

    e2e_table = e2e_rows(e2e)
    e2e_print(e2e_table)
    real_table = real_rows(real)
    real_print(real_table)
    deep_table = deep_rows(deep)
    deep_print(deep_table)

    rows += memory_and_scale(mem_runs)

    data = {'meta': meta, 'rows': rows, 'end_to_end': e2e_table, 'real_programs': real_table}
    if deep_table:
        data['e2e_deep'] = deep_table
    with open(os.path.join(a.dir, 'bench.csv'), 'w', newline='') as f:
        f.write(bench_tables.csv_text(data))
    with open(os.path.join(a.dir, 'bench.json'), 'w') as f:
        json.dump(data, f, indent=1)
    # The README's and docs' tables of this run, for review before they
    # are published (make bench-docs); a partial run (BENCH_E2E=0...)
    # lacks some.
    try:
        md = bench_tables.render_all(data)
    except bench_tables.TableError as e:
        md = None
        print('\nwarning: no Markdown tables: %s' % e, file=sys.stderr)
    if md is not None:
        with open(os.path.join(a.dir, 'bench-tables.md'), 'w') as f:
            f.write(md)

    try:
        import matplotlib
    except ImportError:
        print('\nwarning: no matplotlib (python3-matplotlib): charts skipped', file=sys.stderr)
        print('\n%s/bench.{csv,json}%s' % (a.dir, ', bench-tables.md' if md else ''))
        return
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    # The chart: per-frame walk costs (per walk is the same ratio), the
    # request path and the task_work; cancel is bound by grace periods,
    # not by the implementation's instructions, and memory is not a time
    # (tables only).
    shown = [r for r in rows if 'ratio' in r and 'per walk' not in r['metric']
             and r.get('unit') == 'ns' and not r['metric'].startswith('cancel')]
    if shown:     # none in a run without the micro-benchmarks (BENCH_MICRO=0)
        fig, ax = plt.subplots(figsize=(9, 0.35 * len(shown) + 1.5))
        y = range(len(shown))
        ax.barh(list(y), [r['ratio'] for r in shown],
                xerr=[[r['ratio'] - r['rust_min'] / r['c_median'] for r in shown],
                      [r['rust_max'] / r['c_median'] - r['ratio'] for r in shown]],
                color=['tab:green' if r['ratio'] <= 1 else 'tab:red' for r in shown])
        ax.axvline(1.0, color='black', linewidth=1)
        ax.set_xscale('log')
        ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8, 16)
                 if min(r['ratio'] for r in shown) / 2 <= t <= max(r['ratio'] for r in shown) * 2]
        ax.set_xticks(ticks)
        ax.set_xticklabels(['%g' % t for t in ticks])
        ax.set_yticks(list(y))
        ax.set_yticklabels([r['metric'] for r in shown], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel('Rust / upstream C, median of %d icount runs (bars: Rust min-max)'
                      % meta['icount repetitions'])
        ax.set_title('Deferred user unwinding: Rust vs C\n%s, commit %s, %s'
                     % (meta['kernel'], meta['commit'] or '?', meta['date']), fontsize=9)
        fig.tight_layout()
        for ext in ('svg', 'png'):
            fig.savefig(os.path.join(a.dir, 'bench.' + ext))
    e2e_chart(e2e_table, a.dir, meta)
    print('\n%s/bench.{csv,json%s}%s%s' % (
        a.dir, ',svg,png' if shown else '', ', bench-e2e.{svg,png}' if e2e_table else '',
        ', bench-tables.md' if md else ''))


if __name__ == '__main__':
    main()
