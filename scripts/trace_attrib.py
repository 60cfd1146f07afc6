#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The instructions of a trace (scripts/trace_call.py's JSON) by function
of VMLINUX, most first; with --fn NAME, that function's instructions
that ran, each with its count (its disassembly, objdump)."""
import argparse
import bisect
import collections
import json
import subprocess


def symbols(vmlinux):
    syms = []
    nm = subprocess.run(['nm', '-S', '-C', '--defined-only', vmlinux],
                        capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        p = line.split(' ', 3)
        if len(p) == 4 and p[2] in 'tTwW':
            syms.append((int(p[0], 16), int(p[1], 16), p[3]))
    syms.sort()
    return syms


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('vmlinux')
    ap.add_argument('trace')
    ap.add_argument('--fn', help='list this function\'s instructions that ran')
    ap.add_argument('--top', type=int, default=30)
    a = ap.parse_args()
    syms = symbols(a.vmlinux)
    starts = [s[0] for s in syms]
    with open(a.trace) as f:
        t = json.load(f)
    pcs = {int(k, 16): v for k, v in t['pcs'].items()}
    if a.fn:
        start, size, _ = next(s for s in syms if s[2] == a.fn)
        dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C',
                              '--start-address=%d' % start,
                              '--stop-address=%d' % (start + size), a.vmlinux],
                             capture_output=True, text=True, check=True).stdout
        for line in dis.splitlines():
            addr, _, insn = line.strip().partition(':')
            try:
                n = pcs.get(int(addr, 16), 0)
            except ValueError:
                continue
            if n:
                print('%6d %s %s' % (n, addr, insn.strip()[:100]))
        return
    by = collections.Counter()
    for pc, n in pcs.items():
        i = bisect.bisect_right(starts, pc) - 1
        by[syms[i][2] if i >= 0 else '?'] += n
    print('%s, call %d: %d instructions%s' % (t.get('fn', '?'), t.get('skip', -1) + 1,
                                              t['n'], ' (cut)' if t.get('cut') else ''))
    for name, n in by.most_common(a.top):
        print('%6d  %s' % (n, name[:160]))


if __name__ == '__main__':
    main()
