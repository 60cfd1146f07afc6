#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side tests of compare-stacks.py: it passes two logs of the same
stacks, also when the kernel/user split of the samples moves (timing) or
C records a non-user return address ours ends at; it fails truncated
chains, a Rust non-user address, a first frame one kernel never reports,
too little of the run compared, and too few samples."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = 'K workload_leaf 40174d 401758 401763 40176e 40162f 401a94'
USER = 'U workload_leaf 40174d 401758 401763 40176e 40162f 401a94'
CUT = 'K workload_leaf 40174d 401758 401763 40176e 40162f'
START = 'K _start'
GARBAGE = 'K _dl_get_origin 6f6c6b726f775f63'
GARBAGE_CUT = 'K _dl_get_origin'


def log(counts):
    return ''.join('# ASTACK perf-task: %d: %s\n' % (n, st) for st, n in counts.items())


class CompareStacks(unittest.TestCase):
    def run_on(self, c, rust):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, text in (('c', c), ('rust', rust)):
                p = os.path.join(d, name + '.log')
                with open(p, 'w') as f:
                    f.write(text)
                paths.append(p)
            r = subprocess.run([sys.executable, os.path.join(HERE, 'compare-stacks.py')] +
                               paths + ['--session', 'perf-task'], capture_output=True, text=True)
            return r.returncode

    def test_same_distribution_passes(self):
        self.assertEqual(self.run_on(log({FULL: 2000, USER: 500, CUT: 5}),
                                     log({FULL: 2600, USER: 620, CUT: 2})), 0)

    def test_timing_shift_passes(self):
        # Where samples land moves with the deferred path's cost (CI saw
        # the kernel share at 77% on C, 67% on Rust): not the unwinder's.
        self.assertEqual(self.run_on(log({FULL: 3100, USER: 750, START: 30}),
                                     log({FULL: 2900, USER: 920, START: 145})), 0)

    def test_non_user_address_cut_on_c(self):
        # Upstream records a garbage return address, ours ends there.
        self.assertEqual(self.run_on(log({FULL: 2000, USER: 500, GARBAGE: 60}),
                                     log({FULL: 2000, USER: 500, GARBAGE_CUT: 60})), 0)

    def test_non_user_address_on_rust_fails(self):
        self.assertEqual(self.run_on(log({FULL: 2000, USER: 500, GARBAGE: 60}),
                                     log({FULL: 2000, USER: 500, GARBAGE: 60})), 1)

    def test_first_frame_on_one_kernel_only_fails(self):
        # 3% of Rust's samples start at a function C never reports.
        self.assertEqual(self.run_on(log({FULL: 2000, USER: 500}),
                                     log({FULL: 2000, USER: 500, 'U elsewhere 401a94': 80})), 1)

    def test_too_little_compared_fails(self):
        # Most samples in wheres too small to compare: no conclusion.
        many = {'U f%d 401a94' % i: 20 for i in range(100)}
        self.assertEqual(self.run_on(log(dict(many, **{FULL: 300})),
                                     log(dict(many, **{FULL: 300}))), 1)

    def test_truncated_stacks_on_one_kernel_fail(self):
        # 10% of one kernel's stacks lose their outermost frame.
        self.assertEqual(self.run_on(log({FULL: 2000, USER: 500}),
                                     log({FULL: 1750, CUT: 250, USER: 500})), 1)

    def test_too_few_samples_fail(self):
        self.assertEqual(self.run_on(log({FULL: 150, USER: 40}),
                                     log({FULL: 150, USER: 40})), 1)

    def test_missing_session_fails(self):
        self.assertEqual(self.run_on(log({FULL: 2000}), ''), 1)


if __name__ == '__main__':
    unittest.main(verbosity=0)
