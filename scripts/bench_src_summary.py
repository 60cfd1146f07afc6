#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""One line of figures from each bench log named (scripts/bench-src.sh):
the table walk at 15 frames a frame (warm, cold first, second, shared
first), 64-bit and compat, and sys1 / cpu4k us a sample (fp,defer)."""
import re
import sys

WALK = re.compile(r"BENCH ws=(8|4) depth=8 faultable tables=1 (shared=1 )?nr=(\d+) "
                  r"iters=(\d+) ns=(\d+) first_ns=(\d+) second_ns=(\d+)")
E2E = re.compile(r"BENCH_E2E case=(\w+) freq=\d+ mode=(\w+) ns=(\d+)")

for path in sys.argv[1:]:
    out, e2e = [], {}
    with open(path) as f:
        for line in f:
            if m := WALK.match(line):
                ws, shared, nr, iters, ns, first, second = m.groups()
                nr = int(nr)
                if shared:
                    out.append(f"w{ws} shared1st {int(first) / nr:.0f}")
                else:
                    out.append(f"w{ws} warm {int(ns) / int(iters) / nr:.1f} "
                               f"cold {int(first) / nr:.0f} 2nd {int(second) / nr:.0f}")
            elif m := E2E.match(line):
                s = re.search(r" samples=(\d+)", line)
                e2e[m.group(1), m.group(2)] = (int(m.group(3)), int(s.group(1)) if s else 0)
    for case in ("sys1", "cpu4k"):
        none, defer = e2e.get((case, "none")), e2e.get((case, "defer"))
        if none and defer and defer[1]:
            out.append(f"{case} {(defer[0] - none[0]) / defer[1] / 1000:.2f}us")
    if not out:
        sys.exit(f"{path}: no figures")
    print(path, " | ".join(out))
