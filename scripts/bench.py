#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the serial logs of `make bench` into a table, CSV, JSON and a chart.

    bench.py DIR [--kernel-version TEXT]

DIR holds <kernel>-<mode>-<rep>.log (kernel c|rust, mode icount|tcg), each
with "BENCH ws=W depth=D <result line>" lines from deferred_bench.  For
every metric and kernel the icount repetitions give the median, min and
max; the ratio is Rust's median over C's (below 1: Rust costs less).  The
plain-TCG figures (wall time, noisy) are shown beside them.
"""
import argparse
import csv
import datetime
import glob
import json
import os
import re
import statistics
import sys

LINE = re.compile(r'BENCH ws=(\d+) depth=(\d+) (\w+) (.*)$')


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
            bits = '64-bit' if ws == 8 else 'compat'
            if kind == 'walk':
                iters, nr = kv['iters'], kv['nr']
                if not iters or not nr:
                    continue
                out['walk %s, %d frames: per frame' % (bits, nr)] = (kv['ns'] / iters / nr, 'ns')
                out['walk %s, %d frames: per walk' % (bits, nr)] = (kv['ns'] / iters, 'ns')
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
    cancel: the best of the repetitions in the run at each thread count
    (grace periods vary with where in a tick a cancel starts) and their
    spread, the growth per extra thread from 100 to 1,000 and from 1,000
    to 10,000, and what is left at 0 threads on the second line: the grace
    periods and fixed work.
    """
    out = {}
    cancels = {}    # size -> [(threads, ns)]
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
                    # The best of the memory rounds.
                    name = 'cancel, %d threads with a cache each' % kv['cached']
                    out[name] = (min(kv['ns'], out.get(name, (kv['ns'],))[0]), 'ns')
                    continue
                size = max([s for s in CANCEL_SIZES if t >= s] or [CANCEL_SIZES[0]])
                cancels.setdefault(size, []).append((t, kv['ns']))
    best = {}
    for size, v in sorted(cancels.items()):
        best[size] = min(v, key=lambda x: x[1])
        out['cancel, about %d threads' % size] = (best[size][1], 'ns')
    for size, v in sorted(cancels.items()):
        out['cancel, about %d threads: spread of %d repetitions' % (size, len(v))] = \
            (max(x[1] for x in v) - best[size][1], 'ns')
    for lo, hi in ((100, 1000), (1000, 10000)):
        if lo in best and hi in best:
            (t1, ns1), (t2, ns2) = best[lo], best[hi]
            per = (ns2 - ns1) / (t2 - t1)
            out['cancel: growth per extra thread, %s to %s' % (f'{lo:,}', f'{hi:,}')] = \
                (per, 'ns')
            if hi == 10000:
                out['cancel: fixed part (that line at 0 threads)'] = (ns1 - per * t1, 'ns')
    return out


def scale_note(rows):
    """What the cancel figures show, kernel by kernel: work per thread, or
    grace periods.  The growth per thread is taken as resolved when both
    intervals (100 to 1,000 and 1,000 to 10,000 threads) show a positive
    one and they agree within a factor of 2."""
    by = {r['metric']: r for r in rows}
    best = [by.get('cancel, about %d threads' % n) for n in (100, 1000, 10000)]
    shown = [r for r in (by.get('cancel, about %d threads' % n) for n in CANCEL_SIZES) if r]
    s1 = by.get('cancel: growth per extra thread, 100 to 1,000')
    s2 = by.get('cancel: growth per extra thread, 1,000 to 10,000')
    fixed = by.get('cancel: fixed part (that line at 0 threads)')
    if not all(best) or not (s1 and s2 and fixed):
        print('cancel against 100, 1,000 and 10,000 threads: absent')
        return
    for kernel, label in (('c', 'C'), ('rust', 'Rust')):
        k = kernel + '_median'
        if not all(k in r for r in best + [s1, s2, fixed]):
            continue
        a, b = s1[k], s2[k]
        at = '%s us at %s threads' % (
            ' / '.join('%.0f' % (r[k] / 1000) for r in shown if k in r),
            ' / '.join(r['metric'].split()[2] for r in shown if k in r))
        if a > 0 and b > 0 and max(a, b) / min(a, b) <= 2:
            share = 100 * (best[2][k] - fixed[k]) / best[2][k]
            print('%s: cancel takes %s: %.1f and %.1f ns'
                  ' more per thread (100 to 1,000, 1,000 to 10,000), on top of a fixed'
                  ' %.0f us (grace period); at 10,000 threads the walk over them is %.0f%%'
                  ' of it' % (label, at, a, b, fixed[k] / 1000, share))
        else:
            print('%s: cancel takes %s: the growth per'
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
                1 if name.startswith('cancel, about') and 'spread' not in name else
                2 if 'spread' in name else 3 if name.startswith('cancel:') else 4)
    names.sort(key=group)
    rows = []
    for name in names:
        row = {'metric': name}
        for kernel in ('c', 'rust'):
            vals = [ms[name] for ms in runs.get((kernel, 'icount'), []) if name in ms]
            if vals:
                row['unit'] = vals[0][1]
                vals = [v[0] for v in vals]
                row[kernel + '_median'] = statistics.median(vals)
                row[kernel + '_min'] = min(vals)
                row[kernel + '_max'] = max(vals)
                row[kernel + '_n'] = len(vals)
            tcg = [ms[name][0] for ms in runs.get((kernel, 'tcg'), []) if name in ms]
            row[kernel + '_tcg'] = statistics.median(tcg) if tcg else None
        if row.get('c_median') and row.get('rust_median') is not None and \
                not name.startswith('cancel:') and 'after exit' not in name and \
                'spread' not in name:
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--kernel-version', default='')
    a = ap.parse_args()

    runs = {}   # (kernel, mode) -> [metrics dict]
    mem_runs = {}   # the same, memory and cancel
    for log in sorted(glob.glob(os.path.join(a.dir, '*-*-*.log'))):
        kernel, mode, _ = os.path.basename(log)[:-4].split('-', 2)
        runs.setdefault((kernel, mode), []).append(metrics_of(log))
        mem_runs.setdefault((kernel, mode), []).append(memory_and_scale_of(log))
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
                row[kernel + '_median'] = statistics.median(vals)
                row[kernel + '_min'] = min(vals)
                row[kernel + '_max'] = max(vals)
                row[kernel + '_n'] = len(vals)
            tcg = [ms[name][0] for ms in runs.get((kernel, 'tcg'), []) if name in ms]
            row[kernel + '_tcg'] = statistics.median(tcg) if tcg else None
        if row.get('c_median') and row.get('rust_median') is not None:
            row['ratio'] = row['rust_median'] / row['c_median']
        rows.append(row)

    meta = {
        'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
        'kernel': a.kernel_version,
        'icount repetitions': len(runs[('c', 'icount')]),
        'timing': 'QEMU -icount shift=0,sleep=off: guest ns count guest instructions',
    }

    def fmt(v):
        return '-' if v is None else ('%.0f' % v if v >= 100 else '%.1f' % v)

    print('Deferred unwinding micro-benchmarks, Rust vs upstream C (%s; %s; %d icount runs each)'
          % (meta['kernel'], meta['date'], meta['icount repetitions']))
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

    rows += memory_and_scale(mem_runs)

    cols = ['metric', 'unit', 'c_median', 'c_min', 'c_max', 'rust_median', 'rust_min',
            'rust_max', 'ratio', 'c_tcg', 'rust_tcg']
    with open(os.path.join(a.dir, 'bench.csv'), 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction='ignore')
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(a.dir, 'bench.json'), 'w') as f:
        json.dump({'meta': meta, 'rows': rows}, f, indent=1)

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    # The chart: per-frame walk costs (per walk is the same ratio), the
    # request path and the task_work; cancel is bound by grace periods,
    # not by the implementation's instructions, and memory is not a time
    # (tables only).
    shown = [r for r in rows if 'ratio' in r and 'per walk' not in r['metric']
             and r.get('unit') == 'ns' and not r['metric'].startswith('cancel')]
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
    ax.set_title('Deferred user unwinding: Rust vs C, %s, %s' % (meta['kernel'], meta['date']),
                 fontsize=9)
    fig.tight_layout()
    for ext in ('svg', 'png'):
        fig.savefig(os.path.join(a.dir, 'bench.' + ext))
    print('\n%s/bench.{csv,json,svg,png}' % a.dir)


if __name__ == '__main__':
    main()
