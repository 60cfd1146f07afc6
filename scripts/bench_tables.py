#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The benchmark tables of the README and docs/benchmarks.md, generated
from the bench.json of one `make bench` run (scripts/bench.py writes it).

    bench_tables.py --print [--json FILE] [NAME...]
    bench_tables.py --update [--json FILE] [FILE...]
    bench_tables.py --check [--json FILE] [FILE...]
    bench_tables.py --publish DIR

A table lives in a Markdown file between two marker lines:

    <!-- bench:BEGIN NAME -->
    ...generated, do not edit...
    <!-- bench:END NAME -->

--print prints the named tables (all without a name).  --update rewrites
every marked region of the files (default: README.md and
docs/benchmarks.md) from FILE (default: docs/bench.json).  --check
rewrites nothing: it fails, printing a diff, if a region differs from
what the JSON generates, if the CSV beside the JSON (docs/bench.csv) is
not the JSON's, or if a file lacks one of the tables it must hold, has
none at all, or an unknown or unclosed one; a missing JSON fails too.
--publish DIR copies a run's bench.json, bench.csv and charts from DIR
(build/bench) into docs/ and then updates the default files; it copies
nothing if a table cannot be generated from the run (a partial run).

Every figure is the median with the min and max over all repetitions,
"172 [171-173]": a run's boots for most, every cancel for cancel.  Each
table is stamped with the run's date, commit and kernel version.
"""
import argparse
import csv
import difflib
import io
import json
import os
import re
import shutil
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(TOP, 'docs')
DEFAULT_JSON = os.path.join(DOCS, 'bench.json')
DEFAULT_FILES = ('README.md', 'docs/benchmarks.md')
# The files' paths (from the top) and the tables each must hold.
EXPECTED = {
    'README.md': ('micro-summary', 'e2e-summary', 'e2e-deep-summary', 'real-summary'),
    'docs/benchmarks.md': ('micro', 'e2e-slowdown', 'e2e-bytes', 'e2e-deep', 'e2e-deep-ratios',
                           'real', 'real-tables', 'memory', 'cancel'),
}
# What --publish copies from a run's directory into docs/ (the charts
# only if matplotlib made them).
PUBLISHED = ('bench.json', 'bench.csv')
CHARTS = ('bench.svg', 'bench-e2e.svg')
CSV_COLUMNS = ['metric', 'unit', 'c_median', 'c_min', 'c_max', 'rust_median', 'rust_min',
               'rust_max', 'ratio', 'c_tcg', 'rust_tcg']

BEGIN = re.compile(r'^<!-- bench:BEGIN ([A-Za-z0-9_-]+) -->$')
END = re.compile(r'^<!-- bench:END ([A-Za-z0-9_-]+) -->$')
# A line that starts like a marker but is not one (a mention inside a
# sentence is not a marker).
ANY_MARKER = re.compile(r'^\s*<!--\s*bench:')


class TableError(Exception):
    """A table cannot be generated (a figure is missing) or a file's
    markers are wrong."""


def csv_text(data):
    """bench.csv of a bench.json: every row, the micro-benchmarks, memory
    and cancel first, then end to end, then the real programs, then the
    frameless deep program (where the run has it)."""
    out = io.StringIO(newline='')
    w = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction='ignore', lineterminator='\r\n')
    w.writeheader()
    for r in data['rows'] + data['end_to_end'] + data['real_programs'] + \
            data.get('e2e_deep', []):
        w.writerow(r)
    return out.getvalue()


# ---- numbers ----

def num(v):
    """About three significant figures, thousands separated."""
    a = abs(v)
    if a >= 100:
        return '{:,.0f}'.format(v)
    if a >= 10:
        return '%.1f' % v
    return '%.2f' % v


def fixed(digits):
    return lambda v: '{:,.{}f}'.format(v, digits)


def span(lo, hi, f):
    """[lo-hi], or [lo to hi] when a bound is negative (a '-' would read as
    a minus sign)."""
    a, b = f(lo), f(hi)
    return '[%s to %s]' % (a, b) if lo < 0 or hi < 0 else '[%s-%s]' % (a, b)


def time_ns(v):
    """A time given in ns, in ns, us or ms."""
    a = abs(v)
    if a >= 1e6:
        return num(v / 1e6) + ' ms'
    if a >= 1e3:
        return num(v / 1e3) + ' us'
    return num(v) + ' ns'


class Data:
    """bench.json, its rows by metric name."""

    def __init__(self, data):
        self.meta = data['meta']
        self.by = {}
        for section in ('rows', 'end_to_end', 'real_programs', 'e2e_deep'):
            for r in data.get(section, []):
                self.by[r['metric']] = r
        self.deep = bool(data.get('e2e_deep'))
        self.e2e = {}
        for r in data.get('end_to_end', []):
            self.e2e[(r['case'].split(':')[0], r['name'])] = r

    def row(self, metric):
        r = self.by.get(metric)
        if r is None:
            raise TableError('no figure %r in the run' % metric)
        return r

    def e2e_row(self, case, name):
        r = self.e2e.get((case, name))
        if r is None:
            raise TableError('no end-to-end figure %r of case %s in the run' % (name, case))
        return r

    def fig(self, row, kernel, f=num, unit=''):
        """'median [min-max]' of one kernel's figure; '-' if it has none."""
        if row.get(kernel + '_median') is None:
            return '-'
        s = '%s %s' % (f(row[kernel + '_median']),
                       span(row[kernel + '_min'], row[kernel + '_max'], f))
        return s + (' ' + unit if unit else '')

    def tcg(self, row, kernel, f=num, unit=''):
        """The plain-TCG boot's figure: its median [min-max] where it had
        repetitions of its own (cancel), else its one value."""
        v = row.get(kernel + '_tcg')
        if v is None:
            return '-'
        s = f(v)
        if row.get(kernel + '_tcg_min') is not None:
            s += ' ' + span(row[kernel + '_tcg_min'], row[kernel + '_tcg_max'], f)
        return s + (' ' + unit if unit else '')

    def reps(self, row, kernel):
        return row.get(kernel + '_n') or 0

    def stamp(self, what):
        m = self.meta
        for k in ('date', 'commit', 'kernel'):
            if not m.get(k):
                raise TableError('bench.json: meta has no %s' % k)
        return ('_`make bench` of %s, commit %s, %s; %s._'
                % (m['date'], m['commit'], m['kernel'], what))


def table(header, rows):
    lines = ['| ' + ' | '.join(header) + ' |', '|' + ' --- |' * len(header)]
    lines += ['| ' + ' | '.join(r) + ' |' for r in rows]
    return '\n'.join(lines)


def boots(d):
    n = d.meta.get('icount repetitions')
    if not n:
        raise TableError('bench.json: meta has no icount repetitions')
    return n


# ---- the micro-benchmarks ----

def micro_rows():
    """(label, metric) of the per-operation table, one figure a row."""
    out = []
    for bits in ('64-bit', 'compat'):
        for n in (12, 68, 260, 504):
            out.append(('walk (`unwind_user()`), %s, %d frames, per frame' % (bits, n),
                        ['walk %s, %d frames: per frame' % (bits, n)]))
        out.append(('the same, 12 frames, whole walk', ['walk %s, 12 frames: per walk' % bits]))
    for bits in ('64-bit', 'compat'):
        for n in (13, 69, 261):
            out.append(('deferred walk by frame pointers, %s, %d frames, per frame' % (bits, n),
                        [FP % (bits, n)]))
        out.append(('the same, a process\'s first walk, 13 frames, per frame',
                    ['deferred walk %s, 13 frames (frame pointers, first walk): per frame'
                     % bits]))
    for bits in ('64-bit', 'compat'):
        for n in (15, 71, 263):
            out.append(('deferred walk by unwind tables, %s, %d frames, warm, per frame'
                        % (bits, n), [TABLES_WARM % (bits, n)]))
    for bits in ('64-bit', 'compat'):
        out.append(('the same, a process\'s first walk, %s, 15 frames, per frame' % bits,
                    [TABLES_FIRST % bits]))
        out.append(('the same, its objects\' rows compiled by another process, %s' % bits,
                    [TABLES_SHARED_FIRST % bits]))
        out.append(('the same, its second walk (the memo allocated), %s' % bits,
                    [TABLES_SECOND % bits]))
    for ctx, label in (('irq', 'hardirq'), ('nmi', 'NMI'), ('task', 'task')):
        out.append(('request from %s, first of the entry' % label, [REQ_FIRST % ctx]))
        out.append(('request from %s, repeat' % label, [REQ_REPEAT % ctx]))
    for n in (1, 4, 16):
        out.append(('task_work, %d tracer%s (walk of 13 frames by frame pointers + callbacks)'
                    % (n, 's' if n > 1 else ''), [TASK_WORK % (n, 's' if n > 1 else '')]))
    out.append(('return to user (reset, the shared C inline)', ['return to user: reset']))
    return out


FP = 'deferred walk %s, %d frames (frame pointers): per frame'
TABLES_WARM = 'deferred walk %s, %d frames (unwind tables): per frame'
TABLES_FIRST = 'deferred walk %s, 15 frames (unwind tables, first walk): per frame'
TABLES_SECOND = ('deferred walk %s, 15 frames (unwind tables, rows of another process,'
                 ' second walk): per frame')
TABLES_SHARED_FIRST = ('deferred walk %s, 15 frames (unwind tables, rows of another process,'
                       ' first walk): per frame')
REQ_FIRST = 'request from %s: first of the entry'
REQ_REPEAT = 'request from %s: repeat'
TASK_WORK = 'task_work, %d tracer%s (walk + callbacks)'
# The README's: a few figures a row, "a / b".
MICRO_SUMMARY = [
    ('walk (`unwind_user()`), 64-bit, per frame: 12 / 504 frames',
     ['walk 64-bit, %d frames: per frame' % n for n in (12, 504)]),
    ('deferred walk by frame pointers, 64-bit, per frame: 13 / 261 frames',
     [FP % ('64-bit', n) for n in (13, 261)]),
    ('the same, compat', [FP % ('compat', n) for n in (13, 261)]),
    ('deferred walk by unwind tables, warm, 64-bit, per frame: 15 / 263 frames',
     [TABLES_WARM % ('64-bit', n) for n in (15, 263)]),
    ('the same, compat', [TABLES_WARM % ('compat', n) for n in (15, 263)]),
    ('a process\'s first walk by unwind tables, per frame, 15 frames: 64-bit / compat',
     [TABLES_FIRST % b for b in ('64-bit', 'compat')]),
    ('the same, its objects\' rows compiled by another process',
     [TABLES_SHARED_FIRST % b for b in ('64-bit', 'compat')]),
    ('request from hardirq: first of the entry / repeat', [REQ_FIRST % 'irq', REQ_REPEAT % 'irq']),
    ('request from NMI: first / repeat', [REQ_FIRST % 'nmi', REQ_REPEAT % 'nmi']),
    ('request from task: first / repeat', [REQ_FIRST % 'task', REQ_REPEAT % 'task']),
    ('task_work, 1 / 16 tracers (walk of 13 frames by frame pointers + callbacks)',
     [TASK_WORK % (1, ''), TASK_WORK % (16, 's')]),
]


def micro(d, full):
    rows = []
    for label, metrics in micro_rows() if full else MICRO_SUMMARY:
        rs = [d.row(m) for m in metrics]
        for m, r in zip(metrics, rs):
            if r.get('rust_median') is None:
                raise TableError('no Rust figure for %r' % m)
        ratios = ['%.2f' % r['ratio'] if r.get('ratio') is not None else '-' for r in rs]
        c = [d.fig(r, 'c') for r in rs]
        rows.append([label, '-' if set(c) == {'-'} else ' / '.join(c),
                     ' / '.join(d.fig(r, 'rust') for r in rs),
                     '-' if set(ratios) == {'-'} else ' / '.join(ratios)])
    return (d.stamp('guest instructions (`-icount`), median [min-max] over %d boots of each'
                    ' kernel; tables: Rust only' % boots(d)) + '\n\n' +
            table(['operation', 'C', 'Rust', 'Rust/C (medians)'], rows))


# ---- end to end ----

E2E_CASES = ('sys1', 'sys3', 'sys10', 'sys100', 'cpu1k', 'cpu4k', 'cpu10k')
E2E_SUMMARY_CASES = ('sys1', 'sys10', 'sys100', 'cpu4k')
E2E_WHAT = ('median [min-max] over %d boots of each kernel; `fp,defer` is upstream C on the'
            ' C kernel, this project\'s Rust on the Rust kernel')


def e2e_summary(d):
    rows = []
    for case in E2E_SUMMARY_CASES:
        g = lambda name: d.e2e_row(case, name)
        rows.append([case,
                     d.fig(g('slowdown per sample, fp'), 'c'),
                     d.fig(g('slowdown per sample, fp,defer'), 'c'),
                     d.fig(g('slowdown per sample, fp,defer'), 'rust'),
                     d.fig(g('bytes per sample, fp'), 'c'),
                     d.fig(g('bytes per sample, fp,defer'), 'c'),
                     d.fig(g('bytes per sample, fp,defer'), 'rust')])
    return (d.stamp(E2E_WHAT % boots(d)) + '\n\n' +
            table(['case', 'slowdown/sample, us: fp (C kernel)', 'fp,defer C', 'fp,defer Rust',
                   'bytes/sample: fp (C kernel)', 'fp,defer C', 'fp,defer Rust'], rows))


def e2e_slowdown(d):
    rows = []
    for case in E2E_CASES:
        g = lambda name: d.e2e_row(case, name)
        rows.append([case,
                     d.fig(g('slowdown per sample, fp'), 'c'),
                     d.fig(g('slowdown per sample, fp'), 'rust'),
                     d.fig(g('slowdown per sample, fp,defer'), 'c'),
                     d.fig(g('slowdown per sample, fp,defer'), 'rust'),
                     d.fig(g('fp,defer / fp slowdown per sample'), 'c'),
                     d.fig(g('fp,defer / fp slowdown per sample'), 'rust')])
    return (d.stamp(E2E_WHAT % boots(d) + '; slowdown per sample in guest us') + '\n\n' +
            table(['case', 'fp, C kernel', 'fp, Rust kernel', 'fp,defer C', 'fp,defer Rust',
                   'fp,defer / fp: C', 'fp,defer / fp: Rust'], rows))


def e2e_bytes(d):
    rows = []
    for case in E2E_CASES:
        g = lambda name: d.e2e_row(case, name)
        rec = g('deferred records per kernel entry')
        rows.append([case,
                     d.fig(g('bytes per sample, fp'), 'c'),
                     d.fig(g('bytes per sample, fp,defer'), 'c'),
                     d.fig(g('bytes per sample, fp,defer'), 'rust'),
                     d.fig(g('bytes per sample, ideal'), 'c'),
                     d.fig(g('fp,defer bytes / ideal'), 'c', fixed(2)),
                     d.fig(g('fp,defer bytes / ideal'), 'rust', fixed(2)),
                     '%s / %s' % (d.fig(rec, 'c', fixed(2)), d.fig(rec, 'rust', fixed(2)))])
    return (d.stamp(E2E_WHAT % boots(d) + '; ring-buffer bytes per sample') + '\n\n' +
            table(['case', 'fp (C kernel)', 'fp,defer C', 'fp,defer Rust', 'ideal (C run)',
                   'fp,defer / ideal: C', 'Rust', 'deferred records per kernel entry: C / Rust'],
                  rows))


# ---- real programs ----

REAL_PROGRAMS = (('perl', 'perl (recursive sub + sort)'), ('gzip', 'gzip -9'),
                 ('bzip2', 'bzip2 -9'), ('grep', 'grep -E (back-references)'),
                 ('python3.11', 'python3.11 (recursion + sort key)'))
# perf_bench_real.sh's CAP_KB: the per-process cap of its mode cap.
REAL_CAP_KB = 16
REAL_MODES = (('c', 'fp', 'C, fp,defer (frame pointers)'),
              ('rust', 'off', 'Rust, fp,defer, tables off'),
              ('rust', 'on', 'Rust, fp,defer, tables on'),
              ('c', 'dwarf', 'C, dwarf'),
              ('rust', 'dwarf', 'Rust, dwarf'))
REAL_WHAT = ('median [min-max] over %d boots of each kernel; CPU time of the program, its'
             ' deferred walks included')


def real(d):
    rows = []
    for prog, label in REAL_PROGRAMS:
        for kernel, mode, how in REAL_MODES:
            g = lambda m: d.row('%s: %s' % (prog, m))
            rows.append([label, how,
                         d.fig(g('CPU %s / unprofiled' % mode), kernel, fixed(3)),
                         d.fig(g('us/sample %s' % mode), kernel, fixed(2)),
                         d.fig(g('bytes/sample %s' % mode), kernel)])
    return (d.stamp(REAL_WHAT % boots(d)) + '\n\n' +
            table(['program', 'kernel, call graph', 'CPU / unprofiled', 'us per sample',
                   'perf.data bytes per sample'], rows))


def real_tables(d):
    rows = []
    for prog, label in REAL_PROGRAMS:
        g = lambda m: d.row('%s: %s' % (prog, m))
        rows.append([label, d.fig(g('CPU on / off'), 'rust', fixed(3)),
                     d.fig(g('CPU again / off'), 'rust', fixed(3)),
                     d.fig(g('rows KiB (on)'), 'rust', fixed(0)),
                     d.fig(g('CPU cap / off'), 'rust', fixed(3)),
                     d.fig(g('evictions (cap)'), 'rust', fixed(0))])
    return (d.stamp(REAL_WHAT % boots(d)) + '\n\n' +
            table(['program', 'Rust: CPU, tables on (cold) / off',
                   'the same, rows compiled by an earlier run / off', 'compiled rows, KiB',
                   'CPU, rows capped at %d KiB / off' % REAL_CAP_KB,
                   'evictions, capped'], rows))


def real_summary(d):
    rows = []
    for prog, label in REAL_PROGRAMS:
        g = lambda m: d.row('%s: %s' % (prog, m))
        rows.append([label,
                     d.fig(g('CPU on / off'), 'rust', fixed(3)),
                     d.fig(g('CPU on / unprofiled'), 'rust', fixed(3)),
                     d.fig(g('us/sample on'), 'rust', fixed(2)),
                     d.fig(g('bytes/sample on'), 'rust'),
                     d.fig(g('bytes/sample dwarf'), 'rust'),
                     d.fig(g('rows KiB (on)'), 'rust', fixed(0))])
    return (d.stamp(REAL_WHAT % boots(d) + '; the Rust kernel') + '\n\n' +
            table(['program', 'CPU: tables on / off', 'on / unprofiled', 'us per sample, on',
                   'bytes per sample: on', 'dwarf', 'rows KiB'], rows))


# ---- the frameless deep program ----

# (kernel, mode, label) of the table's rows.
DEEP_MODES = (('c', 'none', 'C, unprofiled'),
              ('c', 'fp', 'C, fp,defer (frame pointers)'),
              ('c', 'dwarf', 'C, dwarf'),
              ('rust', 'none', 'Rust, unprofiled'),
              ('rust', 'off', 'Rust, fp,defer, tables off'),
              ('rust', 'on', 'Rust, fp,defer, tables on'),
              ('rust', 'dwarf', 'Rust, dwarf'))
DEEP_WHAT = ('median [min-max] over %d boots of each kernel; `deep_workload`, 150 frames'
             ' without frame pointers, `perf record -e cpu-clock -F 4000`; CPU time of the'
             ' workload, its deferred walks included')


def deep_missing(d):
    """The text of a deep table when the run has no such figures."""
    m = d.meta
    for k in ('date', 'commit', 'kernel'):
        if not m.get(k):
            raise TableError('bench.json: meta has no %s' % k)
    return ('_Not measured yet: the `make bench` run of %s (commit %s, %s) has no'
            ' `perf_bench_deep.sh` figures._' % (m['date'], m['commit'], m['kernel']))


def e2e_deep(d):
    if not d.deep:
        return deep_missing(d)
    g = lambda m: d.row('deep: ' + m)
    rows = []
    for kernel, mode, label in DEEP_MODES:
        if mode == 'none':
            rows.append([label, d.fig(g('unprofiled CPU ms'), kernel, unit='ms'),
                         '-', '-', '-', '-', '-'])
            continue
        rows.append([label,
                     d.fig(g('CPU %s / unprofiled' % mode), kernel, fixed(3)),
                     d.fig(g('us/sample %s' % mode), kernel, fixed(2)),
                     d.fig(g('bytes/sample %s' % mode), kernel),
                     d.fig(g('report ms/sample %s' % mode), kernel, fixed(3)),
                     d.fig(g('depth %s' % mode), kernel, fixed(0)),
                     d.fig(g('%% reaching main %s' % mode), kernel, fixed(1), '%')])
    return (d.stamp(DEEP_WHAT % boots(d)) + '\n\n' +
            table(['kernel, call graph', 'CPU / unprofiled (unprofiled: CPU time)',
                   'CPU us per sample', 'perf.data bytes per sample',
                   '`perf report` ms per sample', 'user frames (median)',
                   'stacks reaching `main`'], rows))


def e2e_deep_ratios(d):
    if not d.deep:
        return deep_missing(d)
    g = lambda m: d.row('deep: ' + m)
    f2 = fixed(2)
    rows = [['CPU per sample: tables on / off (target <= 1.5)', '-',
             d.fig(g('us/sample on / off'), 'rust', f2)]]
    for what, label in (('us/sample', 'CPU per sample'), ('bytes/sample', 'bytes per sample'),
                        ('report ms/sample', '`perf report` time per sample')):
        rows.append([label + ': dwarf / fp,defer',
                     d.fig(g('%s dwarf / fp' % what), 'c', f2),
                     d.fig(g('%s dwarf / on' % what), 'rust', f2)])
    return (d.stamp(DEEP_WHAT % boots(d) + '; ratios per boot, then their median') +
            '\n\n' + table(['ratio', 'C (fp,defer: frame pointers)',
                            'Rust (fp,defer: tables on)'], rows))


def e2e_deep_summary(d):
    if not d.deep:
        return deep_missing(d)
    g = lambda m: d.row('deep: ' + m)
    f2 = fixed(2)
    rows = []
    for what, label, f, ratios in (
            ('us/sample', 'CPU us per sample', f2, True),
            ('bytes/sample', 'perf.data bytes per sample', num, True),
            ('report ms/sample', '`perf report` ms per sample', fixed(3), True),
            ('depth', 'user frames (median)', fixed(0), False),
            ('% reaching main', 'stacks reaching `main`, %', fixed(1), False)):
        row = [label] + [d.fig(g('%s %s' % (what, m)), 'rust', f) for m in ('off', 'on', 'dwarf')]
        row += ([d.fig(g('%s on / off' % what), 'rust', f2),
                 d.fig(g('%s dwarf / on' % what), 'rust', f2)] if ratios else ['-', '-'])
        rows.append(row)
    return (d.stamp(DEEP_WHAT % boots(d) + '; the Rust kernel') + '\n\n' +
            table(['', 'fp,defer, tables off', 'tables on', 'dwarf',
                   'tables on / off (CPU target <= 1.5)', 'dwarf / tables on'], rows))


# ---- memory and cancel ----

MEMORY_ROWS = (
    ('Slab growth when 1,000 threads have their first deferred unwind',
     'memory: Slab growth, 1000 threads unwound'),
    ('the same, per task', 'memory: Slab per task after its first deferred unwind'),
    ('SUnreclaim growth, the same', 'memory: SUnreclaim growth, 1000 threads unwound'),
    ('Slab per thread started, before any unwind (the thread itself)',
     'memory: Slab per thread started, before any unwind'),
    ('Slab after the threads exit, over the baseline: round 1',
     'memory: Slab after exit - baseline, round 1'),
    ('the same, round 2', 'memory: Slab after exit - baseline, round 2'),
)


def memory(d):
    rows = []
    for label, metric in MEMORY_ROWS:
        r = d.row(metric)
        u = r.get('unit', '')
        rows.append([label, d.fig(r, 'c', unit=u), d.fig(r, 'rust', unit=u),
                     d.tcg(r, 'c', unit=u), d.tcg(r, 'rust', unit=u)])
    return (d.stamp('`deferred_bench`, second round of 1,000 threads unless said; median'
                    ' [min-max] over %d boots of each kernel; plain TCG: one boot' % boots(d))
            + '\n\n' + table(['', 'C', 'Rust', 'C, plain TCG', 'Rust, plain TCG'], rows))


CANCEL_SIZES = (10, 100, 1000, 10000)


def cancel(d):
    rs = [d.row('cancel, about %d threads' % n) for n in CANCEL_SIZES]
    n = {d.reps(r, k) for r in rs for k in ('c', 'rust')}
    if len(n) != 1 or not n.pop():
        raise TableError('cancel: not the same number of cancels at every thread count')
    reps = d.reps(rs[0], 'c')
    header = ['cancel against (extra threads)'] + ['{:,}'.format(s) for s in CANCEL_SIZES]
    cached = d.row('cancel, 1000 threads with a cache each')
    growth = d.row('cancel: growth per extra thread, 1,000 to 10,000')
    header += ['1,000 with a cache each', 'more per extra thread, 1,000 to 10,000']
    kinds = [('c', 'C, icount', d.fig), ('rust', 'Rust, icount', d.fig),
             ('c', 'C, plain TCG (1 boot)', d.tcg), ('rust', 'Rust, plain TCG (1 boot)', d.tcg)]
    rows = []
    for kernel, label, f in kinds:
        rows.append([label] + [f(r, kernel, time_ns) for r in rs] +
                    [f(cached, kernel, time_ns), f(growth, kernel, unit='ns')])
    what = ('median [min-max] of every cancel: %d on each kernel, %d a boot over %d boots'
            '; with a cache each: %d (one a memory round); more per thread: from each'
            ' boot\'s medians; plain TCG: one boot'
            % (reps, reps // boots(d), boots(d), d.reps(cached, 'c')))
    return d.stamp(what) + '\n\n' + table(header, rows)


TABLES = {
    'micro-summary': lambda d: micro(d, False),
    'micro': lambda d: micro(d, True),
    'e2e-summary': e2e_summary,
    'e2e-slowdown': e2e_slowdown,
    'e2e-bytes': e2e_bytes,
    'e2e-deep-summary': e2e_deep_summary,
    'e2e-deep': e2e_deep,
    'e2e-deep-ratios': e2e_deep_ratios,
    'real-summary': real_summary,
    'real': real,
    'real-tables': real_tables,
    'memory': memory,
    'cancel': cancel,
}


def render(data, name):
    """The Markdown of table NAME (no trailing newline)."""
    if name not in TABLES:
        raise TableError('unknown table %r' % name)
    return TABLES[name](Data(data))


def marked(name, body):
    return '<!-- bench:BEGIN %s -->\n%s\n<!-- bench:END %s -->\n' % (name, body, name)


def render_all(data, names=None):
    """The tables (every one without names), each between its markers,
    as they stand in the files."""
    return '\n'.join(marked(n, render(data, n)) for n in (names or TABLES))


# ---- the marked regions ----

def regions(text):
    """[(name, begin line, end line)] of text's marked regions (0-based
    line numbers of the markers)."""
    out = []
    open_ = None
    for i, line in enumerate(text.split('\n')):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_:
                raise TableError('line %d: BEGIN %s inside %s' % (i + 1, b.group(1), open_[0]))
            open_ = (b.group(1), i)
        elif e:
            if not open_ or open_[0] != e.group(1):
                raise TableError('line %d: END %s without its BEGIN' % (i + 1, e.group(1)))
            out.append((open_[0], open_[1], i))
            open_ = None
        elif ANY_MARKER.match(line):
            raise TableError('line %d: malformed marker: %s' % (i + 1, line.strip()))
    if open_:
        raise TableError('line %d: BEGIN %s never ends' % (open_[1] + 1, open_[0]))
    names = [r[0] for r in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise TableError('tables more than once: %s' % ', '.join(sorted(dup)))
    return out


def rewrite(text, data, expected=()):
    """text with every marked region generated anew from data; expected:
    the tables it must hold."""
    found = regions(text)
    if not found:
        raise TableError('no <!-- bench:BEGIN NAME --> marker')
    missing = [n for n in expected if n not in [r[0] for r in found]]
    if missing:
        raise TableError('missing tables: %s' % ', '.join(missing))
    lines = text.split('\n')
    for name, b, e in reversed(found):
        lines[b + 1:e] = render(data, name).split('\n')
    return '\n'.join(lines)


def expected_of(path):
    rel = os.path.relpath(os.path.abspath(path), TOP)
    return EXPECTED.get(rel, ())


def load(path):
    if not os.path.exists(path):
        raise TableError('%s: missing' % path)
    with open(path) as f:
        return json.load(f)


def check(json_path, files):
    """Problems, [] when every file is what json_path generates."""
    try:
        data = load(json_path)
    except TableError as e:
        return [str(e)]
    except ValueError as e:
        return ['%s: %s' % (json_path, e)]
    bad = []
    csv_path = json_path[:-len('.json')] + '.csv' if json_path.endswith('.json') else None
    if csv_path:
        if not os.path.exists(csv_path):
            bad.append('%s: missing (bench.py writes it beside the JSON)' % csv_path)
        else:
            with open(csv_path, newline='') as f:
                if f.read() != csv_text(data):
                    bad.append('%s: not the CSV of %s (copied from another run?)'
                               % (csv_path, json_path))
    for path in files:
        try:
            with open(path) as f:
                text = f.read()
            new = rewrite(text, data, expected_of(path))
        except (OSError, TableError) as e:
            bad.append('%s: %s' % (path, e))
            continue
        if new != text:
            diff = ''.join(difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), path, path + ' (generated)'))
            bad.append('%s: tables differ from %s:\n%s' % (path, json_path, diff))
    return bad


def update(json_path, files):
    data = load(json_path)
    new = {}
    for path in files:     # every file generated before any is written
        with open(path) as f:
            text = f.read()
        try:
            new[path] = (text, rewrite(text, data, expected_of(path)))
        except TableError as e:
            raise TableError('%s: %s' % (path, e))
    for path, (old, text) in new.items():
        if text != old:
            with open(path, 'w') as f:
                f.write(text)
            print('%s: tables updated' % path)
        else:
            print('%s: tables already up to date' % path)


def publish(run_dir, docs=DOCS, files=None):
    """Copy a run's JSON, CSV and charts into docs and update the files;
    nothing is copied unless every table of every file generates."""
    files = files or [os.path.join(TOP, f) for f in DEFAULT_FILES]
    data = load(os.path.join(run_dir, 'bench.json'))
    for name in TABLES:
        render(data, name)
    for path in files:
        with open(path) as f:
            rewrite(f.read(), data, expected_of(path))
    for name in PUBLISHED:
        shutil.copyfile(os.path.join(run_dir, name), os.path.join(docs, name))
        print('%s -> %s' % (os.path.join(run_dir, name), os.path.join(docs, name)))
    for name in CHARTS:
        src = os.path.join(run_dir, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(docs, name))
            print('%s -> %s' % (src, os.path.join(docs, name)))
        else:
            print('warning: %s: no chart (no matplotlib?); docs/%s is an earlier run\'s'
                  % (src, name), file=sys.stderr)
    update(os.path.join(docs, 'bench.json'), files)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--json', default=DEFAULT_JSON, help='bench.json (default: docs/bench.json)')
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--print', action='store_true', help='print tables (ARGS: their names)')
    g.add_argument('--update', action='store_true', help='rewrite the tables of ARGS (files)')
    g.add_argument('--check', action='store_true', help='fail if ARGS (files) are not current')
    g.add_argument('--publish', metavar='DIR', help="copy DIR's run into docs/ and update")
    ap.add_argument('args', nargs='*')
    a = ap.parse_args(argv)
    files = a.args or [os.path.join(TOP, f) for f in DEFAULT_FILES]
    try:
        if a.print:
            sys.stdout.write(render_all(load(a.json), a.args))
        elif a.update:
            update(a.json, files)
        elif a.check:
            bad = check(a.json, files)
            if bad:
                for b in bad:
                    print('bench_tables: ' + b)
                print('bench_tables: the tables are generated from %s, not edited by hand:'
                      ' `make bench-docs` after a `make bench` publishes a run,'
                      ' `scripts/bench_tables.py --update` regenerates them'
                      % os.path.relpath(a.json))
                return 1
            print('bench_tables: %s: tables current with %s' % (
                ', '.join(os.path.relpath(f) for f in files), os.path.relpath(a.json)))
        else:
            if a.args:
                ap.error('--publish DIR takes no other argument')
            publish(a.publish)
    except (TableError, OSError, ValueError) as e:
        print('bench_tables: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
