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
            elif kind == 'cancel':
                t = kv['threads']
                size = 1000 if t >= 1000 else 100 if t >= 100 else 10
                out['cancel, about %d threads' % size] = (kv['ns'], 'ns')
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--kernel-version', default='')
    a = ap.parse_args()

    runs = {}   # (kernel, mode) -> [metrics dict]
    for log in sorted(glob.glob(os.path.join(a.dir, '*-*-*.log'))):
        kernel, mode, _ = os.path.basename(log)[:-4].split('-', 2)
        runs.setdefault((kernel, mode), []).append(metrics_of(log))
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
    # not by the implementation's instructions (table only).
    shown = [r for r in rows if 'ratio' in r and 'per walk' not in r['metric']
             and not r['metric'].startswith('cancel')]
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
