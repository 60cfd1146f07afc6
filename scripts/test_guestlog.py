#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side tests of guestlog.py: it must fail on every kind of bad log."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GOOD = """\
[    0.000000] Linux version 7.3.4
[    1.000000] KTAP version 1
==== GUEST UP job=test variant=c
==== BEGIN guest
TAP version 13
1..1
ok 1 2 CPUs online
==== END guest rc=0
==== BEGIN t1
TAP version 13
1..2
ok 1 first
[    2.000000] some kernel chatter in between
ok 2 second
==== END t1 rc=0
==== GUEST DONE
"""


def run(text, *args):
    with tempfile.NamedTemporaryFile('w', suffix='.log', delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run([sys.executable, os.path.join(HERE, 'guestlog.py'),
                            f.name, 'guest', 't1'] + list(args),
                           capture_output=True, text=True)
        return r.returncode, r.stdout
    finally:
        os.unlink(f.name)


class GuestLog(unittest.TestCase):
    def test_good(self):
        rc, out = run(GOOD)
        self.assertEqual(rc, 0, out)
        self.assertIn('3 passed, 0 failed', out)

    def test_secs(self):
        # The guest's END marker carries the section's seconds (older
        # logs have none): printed with the section's result.
        rc, out = run(GOOD.replace('END t1 rc=0', 'END t1 rc=0 secs=42'))
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r't1\s+ok \(2 tests, 42 s\)')
        self.assertRegex(out, r'guest\s+ok \(1 tests\)')

    def bad(self, text, *args):
        rc, out = run(text, *args)
        self.assertNotEqual(rc, 0, out)
        self.assertNotIn(', 0 failed', out)
        return out

    def test_require_line(self):
        rc, out = run(GOOD, '--require-line=some kernel chatter')
        self.assertEqual(rc, 0, out)
        self.assertIn('4 passed, 0 failed', out)
        out = self.bad(GOOD, '--require-line=user addresses below 0xfff')
        self.assertIn('no line of the log contains', out)

    def test_not_ok(self):
        self.bad(GOOD.replace('ok 2 second', 'not ok 2 second'))

    def test_not_ok_prints_its_messages(self):
        # A failed test's own messages (since the result before it) are
        # printed with it, the first DIAG_HEAD and the last DIAG_LINES of
        # them; a passed test's are not.
        msgs = ''.join('# why %d\n' % i for i in range(44))
        text = GOOD.replace('ok 1 first', '# first says\nok 1 first')
        out = self.bad(text.replace('ok 2 second', msgs + 'not ok 2 second'))
        self.assertIn('not ok 2 second', out)
        self.assertIn('[4 lines]', out)
        for i in list(range(10)) + list(range(14, 44)):
            self.assertIn('# why %d\n' % i, out)
        for i in range(10, 14):
            self.assertNotIn('# why %d\n' % i, out)
        self.assertNotIn('first says', out)

    def test_skip(self):
        self.bad(GOOD.replace('ok 2 second', 'ok 2 second # SKIP no'))

    def test_missing_result(self):
        self.bad(GOOD.replace('ok 2 second\n', ''))

    def test_exit_status(self):
        self.bad(GOOD.replace('END t1 rc=0', 'END t1 rc=1'))

    INCONCLUSIVE_T1 = """\
==== BEGIN t1
TAP version 13
1..2
ok 1 first
# reader fell behind
not ok 2 no record lost (62639)
# inconclusive: 1 failed, and the rings dropped 62639 records: exit 75, run again (3 attempts in all)
==== END t1 rc=75 secs=7
"""

    def test_inconclusive_then_ok(self):
        # A test that failed while its rings dropped records ends 75 and
        # /init runs it again: the last attempt is judged, the earlier
        # one's failures are printed, not counted.
        text = GOOD.replace('==== BEGIN t1', self.INCONCLUSIVE_T1 + '==== BEGIN t1')
        rc, out = run(text)
        self.assertEqual(rc, 0, out)
        self.assertIn('3 passed, 0 failed', out)
        self.assertRegex(out, r't1\s+ok \(2 tests; 1 inconclusive attempt before it\)')
        self.assertIn('attempt 1 of t1 inconclusive (7 s)', out)
        self.assertIn('not ok 2 no record lost (62639)', out)
        self.assertIn('# inconclusive: 1 failed', out)

    def test_inconclusive_last_fails(self):
        # Three inconclusive attempts: the section fails.
        body = GOOD.split('==== BEGIN t1')[0]
        text = body + self.INCONCLUSIVE_T1 * 3 + '==== GUEST DONE\n'
        out = self.bad(text)
        self.assertIn('inconclusive in 3 attempts: records dropped (exit status 75)', out)
        self.assertIn('attempt 2 of t1 inconclusive', out)

    def test_inconclusive_then_real_failure(self):
        # The attempt after an inconclusive one fails on its own: a failure.
        text = GOOD.replace('==== BEGIN t1', self.INCONCLUSIVE_T1 + '==== BEGIN t1')
        out = self.bad(text.replace('ok 2 second', 'not ok 2 second').replace(
            'END t1 rc=0', 'END t1 rc=1'))
        self.assertIn('exit status 1', out)

    def test_inconclusive_expected_failure(self):
        # A test with an expected failure (an upstream bug's signature)
        # that also dropped records exits 75 at each attempt: the last
        # one passes as the expected failure, as with exit status 1.
        att = self.INCONCLUSIVE_T1.replace(
            'not ok 2 no record lost (62639)',
            '# upstream bug: tok shown\nnot ok 2 no record lost (62639)')
        body = GOOD.split('==== BEGIN t1')[0]
        rc, out = run(body + att * 3 + '==== GUEST DONE\n', '--xfail=t1:2:tok')
        self.assertEqual(rc, 0, out)
        self.assertIn('xfail  2', out)
        self.assertIn('(expected to fail here)', out)
        # Without the signature it is a plain failure.
        out = self.bad(body + self.INCONCLUSIVE_T1 * 3 + '==== GUEST DONE\n',
                       '--xfail=t1:2:tok')
        self.assertIn('inconclusive in 3 attempts', out)

    def test_missing_section(self):
        self.bad(GOOD, 't2')

    def test_no_done(self):
        self.bad(GOOD.replace('==== GUEST DONE\n', ''))

    def test_timeout(self):
        self.bad(GOOD, '--timed-out')

    def test_xfail(self):
        bad = GOOD.replace('ok 2 second', '# upstream bug: lost-it (3 samples, 0 records)\n'
                           'not ok 2 second').replace('END t1 rc=0', 'END t1 rc=1')
        rc, out = run(bad, '--xfail', 't1:2:lost-it')
        self.assertEqual(rc, 0, out)
        self.assertIn('xfail  2 second', out)
        self.assertIn('3 passed, 0 failed', out)
        # Another failure in the same section still fails it.
        rc, out = run(bad.replace('ok 1 first', 'not ok 1 first'),
                      '--xfail', 't1:2:lost-it')
        self.assertNotEqual(rc, 0, out)

    def test_xfail_needs_its_signature(self):
        # A failure without the upstream bug's line, or with another
        # bug's, is a plain failure.
        bad = GOOD.replace('ok 2 second', 'not ok 2 second').replace(
            'END t1 rc=0', 'END t1 rc=1')
        out = self.bad(bad, '--xfail', 't1:2:lost-it')
        self.assertIn('without "# upstream bug: lost-it"', out)
        other = bad.replace('not ok 2', '# upstream bug: other-bug\nnot ok 2')
        self.bad(other, '--xfail', 't1:2:lost-it')

    def test_skip(self):
        skipped = GOOD.replace('ok 2 second', 'ok 2 # SKIP no slab statistics')
        # A SKIP fails unless that test may be skipped.
        self.bad(skipped)
        self.bad(skipped, '--skip', 't1:1')
        rc, out = run(skipped, '--skip', 't1:2')
        self.assertEqual(rc, 0, out)
        self.assertIn('skip   2 # SKIP no slab statistics', out)
        self.assertIn('3 passed, 0 failed', out)
        # A failure of a test that may be skipped still fails.
        self.bad(GOOD.replace('ok 2 second', 'not ok 2 second'), '--skip', 't1:2')

    def test_xpass(self):
        rc, out = run(GOOD, '--xfail', 't1:2:lost-it')
        self.assertNotEqual(rc, 0, out)
        self.assertIn('XPASS', out)

    def test_xfail_section_missing(self):
        rc, out = run(GOOD, '--xfail', 'nosuch:1:lost-it')
        self.assertNotEqual(rc, 0, out)

    def test_kernel_reports(self):
        for line in ['WARNING: CPU: 1 PID: 80 at kernel/unwind/deferred.c:10 f+0x1/0x2',
                     'BUG: kernel NULL pointer dereference, address: 0000000000000000',
                     'Oops: general protection fault, probably for non-canonical address',
                     'Kernel panic - not syncing: Fatal exception',
                     'BUG: KASAN: slab-use-after-free in process_unwind_deferred',
                     'WARNING: possible circular locking dependency detected',
                     'UBSAN: shift-out-of-bounds in kernel/unwind/user.c:40:2',
                     'rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:',
                     'Uhhuh. NMI received for unknown reason 2d on CPU 1.',
                     'Dazed and confused, but trying to continue',
                     'BUG: sleeping function called from invalid context at kernel/unwind/x.c:1',
                     '=============================\n[    1.000000] WARNING: suspicious RCU usage',
                     'Call Trace:']:
            with self.subTest(line=line):
                out = self.bad(GOOD.replace('some kernel chatter in between', line))
                self.assertIn('kernel:', out)

    def test_user_text_is_not_kernel(self):
        # A test may print the word WARNING; only kernel lines are scanned.
        rc, out = run(GOOD.replace('ok 1 first', '# WARNING: user text\nok 1 first'))
        self.assertEqual(rc, 0, out)


if __name__ == '__main__':
    unittest.main()
