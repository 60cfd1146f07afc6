#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side tests of compare-stacks.py: it passes two logs of the same
distribution and fails a shifted share, a stack seen on one kernel only in
a share of samples, and too few samples to compare."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = 'K workload_leaf 40174d 401758 401763 40176e 40162f 401a94'
USER = 'U workload_leaf 40174d 401758 401763 40176e 40162f 401a94'
CUT = 'K workload_leaf 40174d 401758 401763 40176e 40162f'


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

    def test_shifted_share_fails(self):
        # The user-space share doubles on one kernel.
        self.assertEqual(self.run_on(log({FULL: 2000, USER: 500}),
                                     log({FULL: 1500, USER: 1000})), 1)

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
