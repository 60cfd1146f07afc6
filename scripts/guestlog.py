#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check a guest's serial log.

The log holds the kernel's messages (with PRINTK_TIME stamps), the KUnit
KTAP output of the suites built into the kernel, and the user-space
programs /init ran, each between "==== BEGIN name" and "==== END name
rc=N".  The run passes only if

  - the guest reached "==== GUEST DONE" (no hang, no crash, no timeout);
  - no kernel line reports a WARNING, BUG, Oops, panic, lockdep, KASAN,
    UBSAN, RCU stall, hung task, unknown NMI, sleep in atomic context or a
    Call Trace;
  - KUnit ran (kunit.py parse agrees) and every required suite passed;
  - every required section is present, exited 0, printed a TAP plan, and
    every planned test reported "ok" (a SKIP counts as a failure).

--xfail SECTION:N:TOKEN names a test that must report "not ok" because
of an upstream bug the test exposes on the reference kernel, whose
signature the test recognises and prints as a line "# upstream bug:
TOKEN ..." in its section.  It counts as passed ("xfail") when it fails
and the section printed that line (the section's non-zero exit is then
expected too); a failure without the line is a plain failure (the test
failed for another reason: zero samples, say, would also fail it), and a
pass counts as failed: the known bug did not show.

--skip SECTION:N names a test that may report "ok N # SKIP": a check the
kernel cannot support (deferred_stress's kmalloc-4k count on the SLUB_TINY
test kernels, which have no slab statistics).  Its SKIP counts as passed
and is printed ("skip"); a "not ok" still fails, and every other SKIP
still counts as a failure.

It prints a summary and ends with the plain line "N passed, N failed".
"""
import argparse
import os
import re
import subprocess
import sys

KTIME = re.compile(r'^\[\s*\d+\.\d+\]\s?')
KERNEL_BAD = re.compile(
    r'WARNING:|BUG:|Oops|Kernel panic|general protection fault|'
    r'Call Trace:|KASAN|UBSAN|KFENCE|possible recursive locking|'
    r'circular locking|inconsistent lock state|rcu_\w+ detected stall|'
    r'INFO: task .* blocked|kernel BUG|unreferenced object|'
    r'NMI received for unknown reason|Dazed and confused|'
    r'suspicious RCU usage|sleeping function called from invalid context')
# The messages a failed test printed before its result, printed with it
# (CI shows the summary, not the log): the first DIAG_HEAD and the last
# DIAG_LINES of them.
DIAG_HEAD = 10
DIAG_LINES = 30
# The exit status of a test that failed while its rings dropped records
# (DC_EXIT_LOST, dc_util.h): /init runs it again, up to 3 attempts.
INCONCLUSIVE = 75
TAP_RESULT = re.compile(r'^(not ok|ok) (\d+)\b ?-? ?(.*)$')
TAP_PLAN = re.compile(r'^1\.\.(\d+)')

DEFAULT_SECTIONS = {
    'test': ['guest'],
    'demo': ['guest', 'demo'],
    'bench': ['guest', 'deferred_bench', 'deferred_bench_32', 'perf_bench'],
    'probe': [],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('log')
    ap.add_argument('--job', default='test')
    ap.add_argument('--kunit-tool')
    ap.add_argument('--timed-out', action='store_true')
    ap.add_argument('--results', help='write "passed failed log" here')
    ap.add_argument('--kunit-suite', action='append', default=[],
                    help='a KUnit suite that must have run and passed')
    ap.add_argument('--xfail', action='append', default=[],
                    metavar='SECTION:N:TOKEN',
                    help='a test that must fail, printing "# upstream bug: TOKEN"')
    ap.add_argument('--skip', action='append', default=[],
                    metavar='SECTION:N', help='a test that may be skipped')
    ap.add_argument('--require-line', action='append', default=[],
                    metavar='TEXT',
                    help='a text that some line of the log must contain '
                    '(what a run under other QEMU options must have seen)')
    ap.add_argument('sections', nargs='*',
                    help='sections that must be present and pass')
    a = ap.parse_intermixed_args()

    with open(a.log, 'rb') as f:
        lines = f.read().decode('utf-8', 'replace').replace('\r', '').split('\n')

    failures = []
    passed = failed = 0
    if a.timed_out:
        failures.append('guest timed out')
    if not any(l.startswith('==== GUEST DONE') for l in lines):
        failures.append('guest did not reach ==== GUEST DONE')

    for l in lines:
        if KTIME.match(l) and KERNEL_BAD.search(KTIME.sub('', l)):
            failures.append('kernel: ' + l.strip())
    for text in a.require_line:
        if any(text in l for l in lines):
            passed += 1
        else:
            failures.append('no line of the log contains %r' % text)
            failed += 1

    # KUnit: the kernel part of the log, before /init started.
    try:
        up = next(i for i, l in enumerate(lines) if l.startswith('==== GUEST UP'))
    except StopIteration:
        up = len(lines)
    kern = '\n'.join(lines[:up]) + '\n'
    if a.kunit_tool and a.job not in ('probe', 'bench'):
        kpath = os.path.abspath(a.log) + '.kunit'
        with open(kpath, 'w') as f:
            f.write(kern)
        r = subprocess.run([sys.executable, a.kunit_tool, 'parse', kpath],
                           capture_output=True, text=True)
        out = r.stdout + r.stderr
        with open(kpath + '.parsed', 'w') as f:
            f.write(out)
        m = re.search(r'Ran (\d+) tests?: (.*)', out)
        summary = m.group(0).strip() if m else 'no KUnit summary'
        print('KUnit: ' + summary)
        if m:
            counts = dict((k.strip(), int(v)) for k, v in
                          re.findall(r'(\w+): (\d+)', m.group(2)))
            passed += counts.get('passed', 0)
            failed += counts.get('failed', 0) + counts.get('crashed', 0)
        if r.returncode != 0 or not m:
            failures.append('KUnit: kunit.py parse failed (%s), see %s.parsed'
                            % (summary, kpath))
        for suite in a.kunit_suite:
            if not re.search(r'^\[\s*\d+\.\d+\]\s?ok \d+ %s$' % re.escape(suite),
                             kern, re.M):
                failures.append('KUnit: suite %s did not pass' % suite)
                failed += 1

    # Sections.
    sections = {}
    cur = None
    for l in lines:
        if KTIME.match(l):
            continue        # kernel messages interleave with user output
        if l.startswith('==== BEGIN '):
            cur = l[len('==== BEGIN '):].strip()
            # A test run again after an inconclusive attempt: the last
            # attempt is judged, the earlier ones are kept to be printed.
            prev = sections.get(cur)
            earlier = (prev['earlier'] + [prev]
                       if prev and prev['rc'] == INCONCLUSIVE else [])
            sections[cur] = {'results': [], 'plan': None, 'rc': None, 'out': [],
                             'secs': None, 'diag': {}, 'since': [],
                             'earlier': earlier}
            continue
        if cur is None:
            continue
        s = sections[cur]
        m = re.match(r'^==== END (\S+) rc=(\d+)(?: secs=(\d+))?', l)
        if m:
            s['rc'] = int(m.group(2))
            s['secs'] = m.group(3)
            cur = None
            continue
        s['out'].append(l)
        if l.startswith('# '):
            s['since'].append(l)
        m = TAP_PLAN.match(l)
        if m and s['plan'] is None:
            s['plan'] = int(m.group(1))
        m = TAP_RESULT.match(l)
        if m:
            # The test's own messages, printed before its result: what a
            # failure prints with it.
            s['diag'][int(m.group(2))] = s['since']
            s['since'] = []
            s['results'].append((m.group(1) == 'ok' and '# SKIP' not in m.group(3),
                                 int(m.group(2)), m.group(3),
                                 m.group(1) == 'ok' and '# SKIP' in m.group(3)))

    required = a.sections or DEFAULT_SECTIONS.get(a.job, [])
    for name in required:
        if name not in sections:
            failures.append('section %s missing' % name)
            failed += 1
    xfail = {}
    tokens = {}
    for x in a.xfail:
        sec, num, token = x.rsplit(':', 2)
        xfail.setdefault(sec, set()).add(int(num))
        tokens[(sec, int(num))] = token
    for name in xfail:
        if name not in sections:
            failures.append('section %s (with expected failures) missing' % name)
            failed += 1
    may_skip = {}
    for x in a.skip:
        sec, _, num = x.rpartition(':')
        may_skip.setdefault(sec, set()).add(int(num))
    for name, s in sections.items():
        # An allowed SKIP counts as passed (and is printed).
        skipped = [r for r in s['results'] if r[3] and r[1] in may_skip.get(name, set())]
        s['results'] = [(r[0] or r in skipped, r[1], r[2]) for r in s['results']]
        # An expected failure only with its upstream bug's signature.
        signed = set(n for n in xfail.get(name, set())
                     if any(l.startswith('# upstream bug: %s' % tokens[(name, n)])
                            for l in s['out']))
        unsigned = [r for r in s['results']
                    if r[1] in xfail.get(name, set()) - signed and not r[0]]
        want_fail = signed | set(r[1] for r in s['results']
                                 if r[1] in xfail.get(name, set()) and r[0])
        xfailed = [r for r in s['results'] if r[1] in want_fail and not r[0]]
        xpassed = [r for r in s['results'] if r[1] in want_fail and r[0]]
        # An expected failure counts as passed, an unexpected pass as failed.
        s['results'] = [(r[0] != (r[1] in want_fail), r[1], r[2])
                        for r in s['results']]
        ok = sum(1 for r in s['results'] if r[0])
        bad = len(s['results']) - ok
        passed += ok
        failed += bad
        problems = []
        if s['rc'] is None:
            problems.append('did not finish')
        elif s['rc'] != 0 and xfailed and bad == 0:
            pass    # the expected failures' exit (75 too: they also failed)
        elif s['rc'] == INCONCLUSIVE:
            problems.append('inconclusive in %d attempts: records dropped (exit status %d)'
                            % (len(s['earlier']) + 1, INCONCLUSIVE))
        elif s['rc'] != 0:
            problems.append('exit status %d' % s['rc'])
        if s['plan'] is None and name != 'demo':
            problems.append('no TAP plan')
        elif s['plan'] is not None and len(s['results']) != s['plan']:
            problems.append('%d results for a plan of %d'
                            % (len(s['results']), s['plan']))
            failed += max(0, s['plan'] - len(s['results']))
        if bad:
            problems.append('%d not ok' % bad)
        again = ('; %d inconclusive attempt%s before it'
                 % (len(s['earlier']), 's' if len(s['earlier']) > 1 else '')
                 if s['earlier'] else '')
        print('%-20s %s%s' % (name, 'FAIL' if problems else 'ok',
                              (' (' + ', '.join(problems) + ')') if problems else
                              ' (%d tests%s%s)' % (ok, ', %s s' % s['secs']
                                                     if s['secs'] is not None else '',
                                                     again)))
        # What each inconclusive attempt failed and dropped: not counted,
        # printed, so that a failure the drops did not cause is seen.
        for i, e in enumerate(s['earlier']):
            print('    attempt %d of %s inconclusive (%s s):'
                  % (i + 1, name, e['secs']))
            for r in e['results']:
                if not r[0] and not r[3]:
                    print('      not ok %d %s%s' % (r[1], r[2][:400],
                                                 ' (expected to fail here)'
                                                 if r[1] in want_fail else ''))
            for l in e['out']:
                if l.startswith('# inconclusive:'):
                    print('      ' + l[:400])
        for r in skipped:
            print('    skip   %d %s' % (r[1], r[2]))
        for r in xfailed:
            print('    xfail  %d %s' % (r[1], r[2]))
        for r in unsigned:
            print('    not ok %d %s (expected to fail here, but without "# upstream bug: %s")'
                  % (r[1], r[2], tokens[(name, r[1])]))
        for r in xpassed:
            print('    XPASS  %d %s (expected to fail here)' % (r[1], r[2]))
        for r in s['results']:
            if not r[0] and r[1] not in want_fail:
                print('    not ok %d %s' % (r[1], r[2]))
                diag = s['diag'].get(r[1], [])
                if len(diag) > DIAG_HEAD + DIAG_LINES:
                    diag = (diag[:DIAG_HEAD] +
                            ['[%d lines]' % (len(diag) - DIAG_HEAD - DIAG_LINES)] +
                            diag[-DIAG_LINES:])
                for d in diag:
                    print('      ' + d[:400])
        if problems:
            failures.append('section %s: %s' % (name, ', '.join(problems)))

    for f in failures[:40]:
        print('FAIL: ' + f)
    if failures and failed == 0:
        failed = 1
    print('log: %s' % os.path.abspath(a.log))
    print('%d passed, %d failed' % (passed, failed))
    if a.results:
        with open(a.results, 'w') as f:
            f.write('%d %d %s\n' % (passed, failed, os.path.basename(a.log)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
