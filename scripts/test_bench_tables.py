#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side tests of bench_tables.py (the README's and docs' benchmark
tables, generated from one run's bench.json) and of bench.py's figures
behind them: every table generates from a complete run, a figure reads
"median [min-max]", each table carries the run's date, commit and kernel;
a missing figure or stamp fails; --update rewrites only the marked
regions; --check passes on generated files and fails, with a diff, on a
hand edit, and fails on a missing marker, table, JSON or CSV, on a CSV of
another run, and on unclosed or unknown markers; --publish copies nothing
from a partial run; bench.py counts every cancel (no best-of) and writes
the meta and the CSV bench_tables.py checks; the frameless deep
program's BENCH_DEEP lines become bench.json's e2e_deep (ratios per boot,
then median [min-max]) and its tables, which say "not measured yet" when
the run has no such section."""
import contextlib
import copy
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_tables as bt  # noqa: E402
import bench  # noqa: E402

SCRIPT = os.path.join(HERE, 'bench_tables.py')
META = {'date': '2026-01-02 03:04 UTC', 'commit': 'abc1234', 'kernel': 'linux-source-7.3 7.3.4-1',
        'icount repetitions': 5, 'timing': 'icount'}


def row(metric, c=None, rust=None, unit='ns', **extra):
    """A row of bench.json; c and rust: (median, min, max) or None."""
    r = {'metric': metric, 'unit': unit}
    for k, v in (('c', c), ('rust', rust)):
        if v is not None:
            r[k + '_median'], r[k + '_min'], r[k + '_max'] = v
            r[k + '_n'] = extra.pop(k + '_n', 5)
        r[k + '_tcg'] = None
    if c and rust and c[0]:
        r['ratio'] = rust[0] / c[0]
    r.update(extra)
    return r


def make_data():
    """A complete run: every figure a table needs, value 50 [49-51]
    unless set below."""
    rows, e2e, real = {}, [], []
    both = ((50.0, 49.0, 51.0), (55.0, 54.0, 56.0))
    for _, metrics in bt.micro_rows() + bt.MICRO_SUMMARY:
        for m in metrics:
            rust_only = 'unwind tables' in m
            rows[m] = row(m, None if rust_only else both[0], both[1])
    rows[bt.TABLES_WARM % ('64-bit', 15)] = row(bt.TABLES_WARM % ('64-bit', 15), None,
                                                (172.0, 171.0, 173.0))
    for _, m in bt.MEMORY_ROWS:
        rows[m] = row(m, (4071.4, 4071.4, 4071.4), (4071.4, 4063.2, 4080.0), 'B',
                      c_tcg=4096.0, rust_tcg=4096.0)
    for n in bt.CANCEL_SIZES:
        m = 'cancel, about %d threads' % n
        rows[m] = row(m, (45678.0, 10866.0, 19972434.0), (7995229.0, 4238954.0, 15995481.0),
                      c_n=25, rust_n=25, c_tcg=127299.0, c_tcg_min=106909.0,
                      c_tcg_max=428289.0, rust_tcg=8e6, rust_tcg_min=4e6, rust_tcg_max=9e6)
    m = 'cancel, 1000 threads with a cache each'
    rows[m] = row(m, (22e3, 21e3, 1.8e6), (5.7e6, 4.2e6, 6.8e6), c_n=10, rust_n=10,
                  c_tcg=1e6, rust_tcg=8e6)
    m = 'cancel: growth per extra thread, 1,000 to 10,000'
    rows[m] = row(m, (8.16, 7.4, 9.11), (0.003, -0.109, 0.617), c_tcg=872.0, rust_tcg=1356.0)
    names = {'slowdown per sample, fp', 'slowdown per sample, fp,defer',
             'fp,defer / fp slowdown per sample', 'bytes per sample, fp',
             'bytes per sample, fp,defer', 'bytes per sample, ideal', 'fp,defer bytes / ideal',
             'deferred records per kernel entry'}
    for case in bt.E2E_CASES:
        label = '%s: a case' % case
        for name in sorted(names):
            r = row('end to end, %s: %s' % (label, name), both[0], both[1], 'us')
            r.update({'section': 'end to end', 'case': label, 'name': name})
            e2e.append(r)
    for prog, _ in bt.REAL_PROGRAMS:
        for mode in ('fp', 'off', 'on', 'dwarf'):
            for what in ('CPU %s / unprofiled', 'us/sample %s', 'bytes/sample %s'):
                m = '%s: %s' % (prog, what % mode)
                real.append(row(m, (1.014, 1.0, 1.02) if mode in ('fp', 'dwarf') else None,
                                (1.026, 1.025, 1.03) if mode != 'fp' else None, 'ratio'))
        for m in ('CPU on / off', 'CPU again / off', 'rows KiB (on)', 'CPU cap / off',
                  'evictions (cap)'):
            real.append(row('%s: %s' % (prog, m), None, (1.026, 1.025, 1.03), 'ratio'))
    return {'meta': dict(META), 'rows': list(rows.values()), 'end_to_end': e2e,
            'real_programs': real, 'e2e_deep': deep_rows()}


DEEP_NAMES = ['unprofiled CPU ms'] + [
    what % mode
    for mode in ('fp', 'off', 'on', 'dwarf')
    for what in ('CPU %s / unprofiled', 'us/sample %s', 'bytes/sample %s',
                 'report ms/sample %s', 'depth %s', '%% reaching main %s')] + [
    '%s %s' % (what, pair)
    for what in ('us/sample', 'bytes/sample', 'report ms/sample')
    for pair in ('on / off', 'dwarf / on', 'dwarf / fp')]


def deep_rows():
    """bench.json's e2e_deep of a complete run: C 2.0 [1.5-2.5], Rust
    3.0 [2.5-3.5] for every figure."""
    out = []
    for n in DEEP_NAMES:
        r = row('deep: ' + n, (2.0, 1.5, 2.5), (3.0, 2.5, 3.5), 'x')
        r.update({'section': 'e2e deep', 'name': n})
        out.append(r)
    return out


def read(path):
    with open(path) as f:
        return f.read()


def quietly(fn, *args):
    """fn(*args) with its printing kept out of the test's output."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return fn(*args)


def doc(*names):
    """A Markdown file holding the named tables, empty, between prose."""
    out = '# Title\n\nProse before.\n\n'
    for n in names:
        out += '<!-- bench:BEGIN %s -->\nstale\n<!-- bench:END %s -->\n\nProse after %s.\n\n' % (
            n, n, n)
    return out


class Generation(unittest.TestCase):
    def test_every_table_generates(self):
        data = make_data()
        for name in bt.TABLES:
            md = bt.render(data, name)
            self.assertIn('2026-01-02 03:04 UTC', md, name)
            self.assertIn('commit abc1234', md, name)
            self.assertIn('linux-source-7.3 7.3.4-1', md, name)
            # A stamp line, a blank line, then the table.
            lines = md.split('\n')
            self.assertTrue(lines[0].startswith('_') and lines[0].endswith('_'), name)
            self.assertEqual(lines[1], '')
            self.assertTrue(all(l.startswith('| ') for l in lines[2:]), name)

    def test_median_min_max(self):
        md = bt.render(make_data(), 'micro')
        line = next(l for l in md.split('\n') if '64-bit, 15 frames, warm' in l)
        self.assertEqual(line, '| deferred walk by unwind tables, 64-bit, 15 frames, warm, '
                               'per frame | - | 172 [171-173] | - |')
        line = next(l for l in md.split('\n') if 'request from NMI, repeat' in l)
        self.assertIn('| 50.0 [49.0-51.0] | 55.0 [54.0-56.0] | 1.10 |', line)

    def test_summary_rows_join_figures(self):
        md = bt.render(make_data(), 'micro-summary')
        line = next(l for l in md.split('\n') if 'request from hardirq' in l)
        self.assertIn('50.0 [49.0-51.0] / 50.0 [49.0-51.0]', line)
        self.assertIn('| 1.10 / 1.10 |', line)
        line = next(l for l in md.split('\n') if 'first walk by unwind tables' in l)
        self.assertIn('| - |', line)     # C has no tables: one '-', not '- / -'

    def test_cancel_every_repetition_with_units(self):
        md = bt.render(make_data(), 'cancel')
        self.assertIn('25 on each kernel, 5 a boot over 5 boots', md)
        c = next(l for l in md.split('\n') if l.startswith('| C, icount'))
        self.assertIn('45.7 us [10.9 us-20.0 ms]', c)
        self.assertIn('8.16 [7.40-9.11] ns', c)
        rust = next(l for l in md.split('\n') if l.startswith('| Rust, icount'))
        # A negative bound: "to", not a dash that reads as a minus.
        self.assertIn('0.00 [-0.11 to 0.62] ns', rust)
        tcg = next(l for l in md.split('\n') if l.startswith('| C, plain TCG'))
        self.assertIn('127 us [107 us-428 us]', tcg)

    def test_memory_units_and_tcg(self):
        md = bt.render(make_data(), 'memory')
        self.assertIn('| 4,071 [4,071-4,071] B | 4,071 [4,063-4,080] B | 4,096 B | 4,096 B |', md)

    def test_missing_figure_fails(self):
        data = make_data()
        data['rows'] = [r for r in data['rows'] if r['metric'] != 'request from nmi: repeat']
        with self.assertRaisesRegex(bt.TableError, 'request from nmi: repeat'):
            bt.render(data, 'micro')

    def test_missing_stamp_fails(self):
        for key in ('date', 'commit', 'kernel'):
            data = make_data()
            del data['meta'][key]
            with self.assertRaisesRegex(bt.TableError, key):
                bt.render(data, 'e2e-bytes')

    def test_rewrite_only_regions(self):
        data = make_data()
        text = doc('memory', 'cancel')
        new = bt.rewrite(text, data)
        self.assertNotIn('stale', new)
        self.assertIn(bt.render(data, 'memory'), new)
        # Outside the regions, nothing changes.
        strip = lambda t: [l for l in t.split('\n') if not l.startswith(('|', '_', 'stale'))
                           and l]
        self.assertEqual(strip(text), strip(new))
        self.assertEqual(bt.rewrite(new, data), new)

    def test_marker_errors(self):
        data = make_data()
        for text, msg in (
                ('no markers\n', 'no <!-- bench:BEGIN'),
                ('<!-- bench:BEGIN memory -->\nx\n', 'never ends'),
                ('<!-- bench:END memory -->\n', 'without its BEGIN'),
                ('<!-- bench:BEGIN memory -->\n<!-- bench:END cancel -->\n', 'without its BEGIN'),
                ('<!-- bench:BEGIN memory -->\n<!-- bench:BEGIN cancel -->\n', 'inside'),
                (doc('memory', 'memory'), 'more than once'),
                (doc('nosuch'), 'unknown table'),
                ('<!-- bench:BEGIN memory-->\n', 'malformed')):
            with self.assertRaisesRegex(bt.TableError, msg):
                bt.rewrite(text, data)
        with self.assertRaisesRegex(bt.TableError, 'missing tables: cancel'):
            bt.rewrite(doc('memory'), data, expected=('memory', 'cancel'))

    def test_marker_mentioned_in_prose_is_not_a_marker(self):
        text = doc('memory') + 'Between `<!-- bench:BEGIN name -->` markers.\n'
        bt.rewrite(text, make_data())

    def test_deep_tables(self):
        data = make_data()
        md = bt.render(data, 'e2e-deep')
        line = next(l for l in md.split('\n') if l.startswith('| Rust, fp,defer, tables on'))
        self.assertEqual(line, '| Rust, fp,defer, tables on | 3.000 [2.500-3.500] | 3.00 [2.50-3.50]'
                               ' | 3.00 [2.50-3.50] | 3.000 [2.500-3.500] | 3 [2-4]'
                               ' | 3.0 [2.5-3.5] % |')
        md = bt.render(data, 'e2e-deep-ratios')
        self.assertIn('| CPU per sample: tables on / off (target <= 1.5) | - | 3.00 [2.50-3.50] |',
                      md)
        self.assertIn('| bytes per sample: dwarf / fp,defer | 2.00 [1.50-2.50] | 3.00 [2.50-3.50] |',
                      md)
        md = bt.render(data, 'e2e-deep-summary')
        self.assertIn('| user frames (median) | 3 [2-4] | 3 [2-4] | 3 [2-4] | - | - |', md)

    def test_deep_not_measured_yet(self):
        # A run without perf_bench_deep.sh (docs/bench.json before it, or
        # BENCH_DEEP=0): the tables say so, stamped with the run; a run
        # that has the section but lacks a figure fails.
        data = make_data()
        del data['e2e_deep']
        for name in ('e2e-deep', 'e2e-deep-ratios', 'e2e-deep-summary'):
            md = bt.render(data, name)
            self.assertEqual(md, '_Not measured yet: the `make bench` run of 2026-01-02 03:04 UTC'
                                 ' (commit abc1234, linux-source-7.3 7.3.4-1) has no'
                                 ' `perf_bench_deep.sh` figures._')
        self.assertNotIn('deep:', bt.csv_text(data))
        data = make_data()
        data['e2e_deep'] = [r for r in data['e2e_deep'] if r['name'] != 'depth dwarf']
        for name in ('e2e-deep', 'e2e-deep-summary'):
            with self.assertRaisesRegex(bt.TableError, 'depth dwarf'):
                bt.render(data, name)
        self.assertIn('deep: us/sample on / off', bt.csv_text(data))

    def test_repository_files_expect_their_tables(self):
        self.assertEqual(set(bt.EXPECTED), set(bt.DEFAULT_FILES))
        for tables in bt.EXPECTED.values():
            self.assertTrue(set(tables) <= set(bt.TABLES))
        # Every table is in some file.
        self.assertEqual(set(bt.TABLES), {t for ts in bt.EXPECTED.values() for t in ts})


class Cli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.json = os.path.join(self.dir, 'bench.json')
        self.csv = os.path.join(self.dir, 'bench.csv')
        self.md = os.path.join(self.dir, 'page.md')
        self.data = make_data()
        self.write_run(self.data, self.dir)
        with open(self.md, 'w') as f:
            f.write(doc('micro-summary', 'e2e-bytes', 'cancel'))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write_run(self, data, d):
        with open(os.path.join(d, 'bench.json'), 'w') as f:
            json.dump(data, f)
        with open(os.path.join(d, 'bench.csv'), 'w', newline='') as f:
            f.write(bt.csv_text(data))

    def run_script(self, *args, json_path=None):
        r = subprocess.run([sys.executable, SCRIPT, '--json', json_path or self.json] +
                           list(args), capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def test_update_then_check(self):
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 1, out)      # "stale" regions
        rc, out = self.run_script('--update', self.md)
        self.assertEqual(rc, 0, out)
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 0, out)
        self.assertIn('tables current', out)
        rc, out = self.run_script('--update', self.md)
        self.assertIn('already up to date', out)

    def test_check_catches_a_hand_edit(self):
        self.run_script('--update', self.md)
        with open(self.md) as f:
            text = f.read()
        self.assertIn('172 [171-173]', text)
        with open(self.md, 'w') as f:
            f.write(text.replace('172 [171-173]', '170 [171-173]'))
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 1, out)
        self.assertIn('tables differ', out)
        self.assertIn('-| deferred walk by unwind tables, warm, 64-bit', out)
        self.assertIn('170 [171-173]', out)
        self.assertIn('+| deferred walk by unwind tables, warm, 64-bit', out)
        self.assertIn('--update', out)
        # --check changed nothing.
        with open(self.md) as f:
            self.assertIn('170 [171-173]', f.read())

    def test_check_catches_a_new_run_not_regenerated(self):
        self.run_script('--update', self.md)
        data = copy.deepcopy(self.data)
        data['meta']['commit'] = 'def5678'
        self.write_run(data, self.dir)
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 1, out)
        self.assertIn('+_`make bench` of 2026-01-02 03:04 UTC, commit def5678', out)

    def test_check_fails_closed(self):
        self.run_script('--update', self.md)
        # A file without markers.
        bare = os.path.join(self.dir, 'bare.md')
        with open(bare, 'w') as f:
            f.write('# nothing generated here\n')
        rc, out = self.run_script('--check', self.md, bare)
        self.assertEqual(rc, 1, out)
        self.assertIn('no <!-- bench:BEGIN', out)
        # A marker removed.
        with open(self.md) as f:
            text = f.read()
        with open(self.md, 'w') as f:
            f.write(text.replace('<!-- bench:END cancel -->\n', ''))
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 1, out)
        self.assertIn('never ends', out)
        # No JSON.
        rc, out = self.run_script('--check', self.md,
                                  json_path=os.path.join(self.dir, 'none.json'))
        self.assertEqual(rc, 1, out)
        self.assertIn('missing', out)
        # No file.
        rc, out = self.run_script('--check', os.path.join(self.dir, 'none.md'))
        self.assertEqual(rc, 1, out)

    def test_check_csv_of_the_same_run(self):
        self.run_script('--update', self.md)
        os.unlink(self.csv)
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 1, out)
        self.assertIn('bench.csv: missing', out)
        data = copy.deepcopy(self.data)
        data['rows'][0]['c_median'] = 1.0
        with open(self.csv, 'w', newline='') as f:
            f.write(bt.csv_text(data))
        rc, out = self.run_script('--check', self.md)
        self.assertEqual(rc, 1, out)
        self.assertIn('not the CSV of', out)

    def test_update_writes_nothing_on_error(self):
        other = os.path.join(self.dir, 'other.md')
        with open(other, 'w') as f:
            f.write(doc('nosuch'))
        before = read(self.md)
        rc, out = self.run_script('--update', self.md, other)
        self.assertEqual(rc, 1, out)
        self.assertIn('unknown table', out)
        self.assertEqual(read(self.md), before)

    def test_print(self):
        rc, out = self.run_script('--print', 'memory')
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.startswith('<!-- bench:BEGIN memory -->\n_`make bench`'))
        self.assertTrue(out.endswith('<!-- bench:END memory -->\n'))

    def test_publish(self):
        run, docs = os.path.join(self.dir, 'run'), os.path.join(self.dir, 'docs')
        os.mkdir(run)
        os.mkdir(docs)
        page = os.path.join(self.dir, 'page.md')
        # A partial run (no real programs): nothing copied, nothing rewritten.
        partial = copy.deepcopy(self.data)
        partial['real_programs'] = []
        self.write_run(partial, run)
        with open(page, 'w') as f:
            f.write(doc('real', 'cancel'))
        with self.assertRaises(bt.TableError):
            quietly(bt.publish, run, docs, [page])
        self.assertEqual(os.listdir(docs), [])
        self.assertIn('stale', read(page))
        # A complete one.
        self.write_run(self.data, run)
        with open(os.path.join(run, 'bench.svg'), 'w') as f:
            f.write('<svg/>')
        quietly(bt.publish, run, docs, [page])
        self.assertEqual(sorted(os.listdir(docs)), ['bench.csv', 'bench.json', 'bench.svg'])
        self.assertEqual(bt.check(os.path.join(docs, 'bench.json'), [page]), [])


CANCEL_LOG = '''\
BENCH ws=8 depth=8 walk nr=12 iters=200 ns=%(walk)d
BENCH ws=8 depth=0 cancel cached=1000 threads=1034 ns=%(cached1)d
BENCH ws=8 depth=0 cancel cached=1000 threads=1034 ns=%(cached2)d
BENCH ws=8 depth=0 cancel threads=1034 ns=%(a)d
BENCH ws=8 depth=0 cancel threads=1034 ns=%(b)d
BENCH ws=8 depth=0 cancel threads=1034 ns=%(c)d
BENCH ws=8 depth=0 cancel threads=10034 ns=%(d)d
BENCH ws=8 depth=0 cancel threads=10034 ns=%(e)d
BENCH ws=8 depth=0 cancel threads=10034 ns=%(f)d
'''


class BenchPy(unittest.TestCase):
    """bench.py: every cancel counted; meta and CSV as bench_tables.py reads them."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        logs = {'c-icount-1': dict(walk=120000, cached1=20000, cached2=9000000, a=20000,
                                   b=16000000, c=30000, d=100000, e=110000, f=150000),
                'c-icount-2': dict(walk=120000, cached1=22000, cached2=21000, a=25000,
                                   b=26000, c=27000, d=101000, e=102000, f=103000),
                'rust-icount-1': dict(walk=150000, cached1=4e6, cached2=5e6, a=8e6, b=8e6,
                                      c=4e6, d=8e6, e=16e6, f=8e6),
                'rust-icount-2': dict(walk=150000, cached1=4e6, cached2=5e6, a=8e6, b=8e6,
                                      c=8e6, d=8e6, e=8e6, f=8e6)}
        for name, v in logs.items():
            p = os.path.join(self.dir, name + '.log')
            with open(p, 'w') as f:
                f.write(CANCEL_LOG % {k: int(x) for k, x in v.items()})
            os.utime(p, (1767323040, 1767323040))     # 2026-01-02 03:04 UTC

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_every_cancel_counted(self):
        runs = {('c', 'icount'): [bench.memory_and_scale_of(os.path.join(self.dir, f))
                                  for f in ('c-icount-1.log', 'c-icount-2.log')]}
        rows = {r['metric']: r for r in quietly(bench.memory_and_scale, runs)}
        r = rows['cancel, about 1000 threads']
        # All six, not each boot's best: the 16 ms one is the max.
        self.assertEqual((r['c_n'], r['c_min'], r['c_max']), (6, 20000, 16000000))
        self.assertEqual(r['c_median'], 26500)
        r = rows['cancel, 1000 threads with a cache each']
        self.assertEqual((r['c_n'], r['c_min'], r['c_max']), (4, 20000, 9000000))
        # Growth per thread between each boot's medians, then over boots.
        r = rows['cancel: growth per extra thread, 1,000 to 10,000']
        self.assertAlmostEqual(r['c_min'], (102000 - 26000) / 9000)
        self.assertAlmostEqual(r['c_max'], (110000 - 30000) / 9000)
        self.assertFalse(any('spread' in m for m in rows))

    def test_run_writes_meta_and_csv(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, 'bench.py'), self.dir,
                            '--kernel-version', 'linux-source-7.3 7.3.4-1', '--commit',
                            'abc1234'], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.dir, 'bench.json')) as f:
            data = json.load(f)
        self.assertEqual(data['meta']['date'], '2026-01-02 03:04 UTC')
        self.assertEqual(data['meta']['commit'], 'abc1234')
        self.assertEqual(data['meta']['kernel'], 'linux-source-7.3 7.3.4-1')
        with open(os.path.join(self.dir, 'bench.csv'), newline='') as f:
            self.assertEqual(f.read(), bt.csv_text(data))
        # A partial run: no Markdown tables, said so, not a failure.
        self.assertIn('no Markdown tables', r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, 'bench-tables.md')))
        rows = {x['metric']: x for x in data['rows']}
        self.assertEqual(rows['cancel, about 10000 threads']['rust_max'], 16e6)
        # No BENCH_DEEP line: no e2e_deep.
        self.assertNotIn('e2e_deep', data)


# perf_bench_deep.sh's lines of one boot (C: fp and dwarf; Rust: off,
# on, dwarf), cpu_us of the on run and the report of dwarf given.
DEEP_LOG = """\
==== BEGIN perf_bench_deep
# work: deep_workload 4000 (about 400 ms unprofiled), 4000 Hz
BENCH_DEEP mode=none freq=- rounds=4000 cpu_us=400000 samples=- deferred=- lost=- bytes=- \
report_us=- report_cpu_us=- stacks=- depth=- main=-
ok 1 none
BENCH_DEEP mode=%(fp)s freq=4000 rounds=4000 cpu_us=406000 samples=1600 deferred=1600 lost=0 \
bytes=200000 report_us=320000 report_cpu_us=300000 stacks=1598 depth=1 main=0
%(on)s
BENCH_DEEP mode=dwarf freq=4000 rounds=4000 cpu_us=420000 samples=1600 deferred=0 lost=0 \
bytes=13600000 report_us=%(dwarf_report)d report_cpu_us=2000000 stacks=1596 depth=78.5 main=0
BENCH_DEEP mode=on freq=4000 rounds=4000 cpu_us=4300[0m cut by a console message
==== END perf_bench_deep rc=0
""".replace('\\\n', '')
DEEP_ON = ('BENCH_DEEP mode=on freq=4000 rounds=4000 cpu_us=%d samples=1600 deferred=1600'
           ' lost=0 bytes=2160000 report_us=800000 report_cpu_us=780000 stacks=1596'
           ' depth=156 main=1580')


class BenchPyDeep(unittest.TestCase):
    """bench.py on synthetic logs of perf_bench_deep.sh: the figures per
    mode and the ratios per boot, then median [min-max] over boots."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for kernel in ('c', 'rust'):
            for rep, (on_cpu, dwarf_report) in enumerate(((430000, 2400000),
                                                          (436000, 3200000),
                                                          (424000, 2000000)), 1):
                p = os.path.join(self.dir, '%s-icount-%d.log' % (kernel, rep))
                with open(p, 'w') as f:
                    f.write(CANCEL_LOG % dict(walk=120000, cached1=1, cached2=1, a=1, b=1,
                                              c=1, d=1, e=1, f=1))
                    f.write(DEEP_LOG % {
                        'fp': 'fp' if kernel == 'c' else 'off',
                        'on': DEEP_ON % on_cpu if kernel == 'rust' else '',
                        'dwarf_report': dwarf_report})
                os.utime(p, (1767323040, 1767323040))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_lines_parsed(self):
        runs = quietly(bench.deep_runs_of, os.path.join(self.dir, 'rust-icount-1.log'))
        self.assertEqual(sorted(runs), ['dwarf', 'none', 'off', 'on'])
        self.assertIsNone(runs['none']['samples'])
        self.assertEqual(runs['on']['cpu_us'], 430000)     # the cut line dropped
        self.assertEqual(runs['dwarf']['depth'], 78.5)

    def test_figures_and_ratios(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, 'bench.py'), self.dir,
                            '--kernel-version', 'k', '--commit', 'abc1234'],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('cut line dropped', r.stderr)
        self.assertIn('CPU per sample <= 1.5: 5.00 (missed)', r.stdout)
        with open(os.path.join(self.dir, 'bench.json')) as f:
            data = json.load(f)
        rows = {x['name']: x for x in data['e2e_deep']}
        # Rust: (430000 - 400000) / 1600 = 18.75 us a sample with the
        # tables, (406000 - 400000) / 1600 = 3.75 without: 5.0; the other
        # boots 4.0 and 6.0 (the median of per-boot ratios).
        on_off = rows['us/sample on / off']
        self.assertEqual((on_off['rust_median'], on_off['rust_min'], on_off['rust_max']),
                         (5.0, 4.0, 6.0))
        self.assertEqual(on_off['rust_n'], 3)
        self.assertNotIn('c_median', on_off)
        self.assertEqual(rows['bytes/sample on']['rust_median'], 1350)
        self.assertEqual(rows['bytes/sample dwarf / on']['rust_median'], 8500 / 1350)
        self.assertEqual(rows['bytes/sample dwarf / fp']['c_median'], 8500 / 125)
        self.assertAlmostEqual(rows['report ms/sample dwarf / on']['rust_max'], 4.0)
        self.assertAlmostEqual(rows['report ms/sample dwarf']['c_median'], 1.5)
        self.assertEqual(rows['depth on']['rust_median'], 156)
        self.assertAlmostEqual(rows['% reaching main on']['rust_median'], 100 * 1580 / 1596)
        self.assertEqual(rows['% reaching main dwarf']['c_median'], 0)
        self.assertEqual(rows['unprofiled CPU ms']['c_median'], 400)
        self.assertEqual(rows['us/sample on / off']['unit'], 'ratio')
        # In the CSV, after the other sections.
        with open(os.path.join(self.dir, 'bench.csv'), newline='') as f:
            text = f.read()
        self.assertEqual(text, bt.csv_text(data))
        self.assertTrue(text.rstrip().split('\r\n')[-1].startswith('deep: '))
        # The tables.
        data['meta']['icount repetitions'] = 3
        md = bt.render(data, 'e2e-deep-ratios')
        self.assertIn('| CPU per sample: tables on / off (target <= 1.5) | - |'
                      ' 5.00 [4.00-6.00] |', md)


if __name__ == '__main__':
    unittest.main()
