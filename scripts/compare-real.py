#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Real programs: the kernel's table walk against perf's DWARF unwinder.

perf_real.sh (in the guest) profiles Debian's own programs, built without
frame pointers and stripped, with two cpu-clock events at 4 kHz in one
perf session: "walk", `--call-graph fp,defer` (the user stack walked by
the kernel's deferred unwinder, by the objects' .eh_frame tables), and
"oracle", `call-graph=dwarf` (perf's libdw unwinder, in user space, from a
copy of the stack).  It prints every distinct user stack of each session
between "#### BEGIN real PROG both gz.b64" / "#### END real PROG both"
markers (gzip, base64), each frame as object + file offset (perf script's
dsoff), the walk's samples joined with the deferred record of their
cookie by tid and cookie (perf script's own merge misses the samples that
come after their record: counted and printed).  This script reads the
same objects (the guest's copies, --root: the initramfs tree), checks
that they are the files the guest ran (md5), and compares.

The two events sample at different instants, so whole stacks cannot be
matched sample by sample (and recursion makes too many distinct chains
to cover them all).  The comparison is step by step: a step is one link
of a stack, (callee function -> return address in its caller), where the
callee is the function (the FDE of .eh_frame; for code without one, the
pc) holding the sampled pc (the leaf) or the call before a return
address (return address - 1), and the return address is object + offset.
Every step the table walk took must be among the steps the DWARF unwinder
took for that callee.

Frame convention, checked on every run (and printed): perf's fp,defer
frames are return addresses, as the kernel recorded them; perf's DWARF
frames after the first are return address - 1 (tools/perf/util/
unwind-libdw.c: `if (!isactivation) --pc`; seen here: libc's
__libc_start_call_main+0x79 for a `call *%rax` that ends at +0x7a), so
they are moved up by one.  After that, every caller frame of both must
end a call instruction (decoded from the object's code: `call rel32` or
`call r/m64` with any ModRM form); the share that does is printed, and an
oracle where it does not hold (the convention changed) fails.

Per program, from the samples of the program's own comm:
  - samples, samples with more than one user frame (at least MIN_MULTI
    for each unwinder, or the program fails: too few to say anything);
  - steps agreeing: the share of the table walk's steps (weighted by
    samples; by walk and by distinct step printed too) found among the
    oracle's steps of the same callee (at least AGREE);
  - complete stacks: the share of samples whose last frame is the entry
    function of the program or of the dynamic loader (_start), for each;
    compared per leaf function (the oracle's share at each leaf weighted
    as the walk's samples are), within COMPLETE_POINTS points;
  - caller lost (must be 0): samples whose walk skipped a frame the oracle
    has (a step F -> r where the oracle goes F -> r' in G ... -> r, unless
    G tail-jumps to F), or ended at a function that is not an entry point
    where the oracle has its caller, with the CFA rule at the pc where it
    ended;
  - every disagreeing step, with its objects, offsets, function names and
    cause: "caller lost", "not a return address" (no call instruction ends
    there) or "return address in no mapping" (a wrong walk: fails), or
    the oracle's sampling not covering it ("callee never sampled by the
    oracle", "caller not seen by the oracle", "tail call not seen by the
    oracle"), with what the code says: a direct call to the callee, a call
    through the PLT, a direct call to another function, an indirect call.
Also printed: the runs of each unwinder alone (bytes of perf.data per
sample, perf report's time per sample) and the kernel's table-walk
counters.

Writes "passed failed NAME" (programs; --name, real-programs) to --results.
"""
import argparse
import base64
import bisect
import collections
import gzip
import hashlib
import os
import re
import subprocess
import sys

MIN_MULTI = 200
AGREE = 0.99
# Steps the oracle can judge (it sampled their callee): at least this
# share of the table walk's, or the comparison says too little.
COVERED = 0.90
COMPLETE_POINTS = 1.0
# Registers the kernel's table walk knows at the interrupted frame (from
# pt_regs) and through table steps: a CFA based on another one (libc's
# ____longjmp_chk: CFA = rdi+0, its return address in rdx) needs the
# interrupted frame's other registers, which the walk does not take.
TRACKED = ('rsp', 'rbp', 'rbx')
KTIME_MSG = re.compile(r'\[\s*\d+\.\d+\][^\n]*')
BEGIN = re.compile(r'^#### BEGIN real (\S+) (\S+) gz\.b64')
END = re.compile(r'^#### END real (\S+) (\S+)')
REAL = re.compile(r'# REAL (\S+) (\S+): (.*)$')
MD5 = re.compile(r'# REAL md5 ([0-9a-f]{32})\s+(\S+)')
B64 = re.compile(r'[^A-Za-z0-9+/=]')
STATS = re.compile(r'^# table walk: (.*)$')


# ---------------------------------------------------------------- objects

def run(*cmd, empty_ok=False):
    # (readelf exits 1 on some notes it prints about valid objects: the
    # output is what counts.)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not r.stdout and not empty_ok:
        raise RuntimeError("%s: no output (%s)" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def read_syms(file):
    """[(value, size, name)] of the defined function symbols."""
    syms = []
    for l in run('readelf', '-W', '--dyn-syms', '--syms', file).splitlines():
        t = l.split()
        if len(t) >= 8 and t[3] in ('FUNC', 'IFUNC') and t[6] != 'UND':
            syms.append((int(t[1], 16), int(t[2], 0), t[7].split('@')[0]))
    return syms


class Elf:
    """An object as the comparison needs it: its loadable segments (file
    offset <-> address), FDE ranges, function symbols, entry point and
    code bytes, read with readelf from the file the guest ran."""

    def __init__(self, path, data, loads, fdes, syms, entry, is_entry, plt,
                 stripped=False, text=(), file=None):
        self.path = path
        self.file = file
        self.stripped = stripped
        self.text = text            # [(offset, size)] of executable segments
        self.data = data
        self.loads = loads          # [(offset, vaddr, filesz)]
        self.fdes = sorted(fdes)    # [(start, end)] addresses
        self.starts = [s for s, _ in self.fdes]
        self.syms = sorted(syms)    # [(value, size, name)]
        self.symstarts = [s[0] for s in self.syms]
        self.entry = entry
        self.is_entry = is_entry    # executable or dynamic loader
        self.plt = plt              # [(start, end, name)] of .plt* sections

    @classmethod
    def read(cls, path, file):
        with open(file, 'rb') as f:
            data = f.read()
        loads, entry, interp, plt, fdes, syms, text = [], 0, False, [], [], [], []
        stripped = True
        for l in run('readelf', '-lhW', file).splitlines():
            t = l.split()
            if l.strip().startswith('Entry point address:'):
                entry = int(t[-1], 16)
            elif t and t[0] == 'LOAD':
                loads.append((int(t[1], 16), int(t[2], 16), int(t[4], 16)))
                if 'E' in ''.join(t[6:-1]):
                    text.append((int(t[1], 16), int(t[4], 16)))
            elif t and t[0] == 'INTERP':
                interp = True
        for l in run('readelf', '-SW', file).splitlines():
            if ' .symtab ' in l:
                stripped = False
            m = re.match(r'\s*\[\s*\d+\]\s+(\.plt\S*)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)', l)
            if m:
                a = int(m.group(2), 16)
                plt.append((a, a + int(m.group(3), 16), m.group(1)))
        sec = None
        for l in run('readelf', '-W', '-wN', '--debug-dump=frames', file).splitlines():
            if l.startswith('Contents of the '):
                sec = l.split()[3]
            m = re.search(r' FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)', l)
            if m and sec == '.eh_frame':
                fdes.append((int(m.group(1), 16), int(m.group(2), 16)))
        syms = read_syms(file)
        # Names only (never the comparison): the local functions' symbols
        # of a detached debug file, where this machine has one (libc6-dbg).
        m = re.search(r'Build ID: ([0-9a-f]{2})([0-9a-f]+)', run('readelf', '-nW', file, empty_ok=True))
        dbg = m and '/usr/lib/debug/.build-id/%s/%s.debug' % (m.group(1), m.group(2))
        if dbg and os.path.isfile(dbg):
            syms += read_syms(dbg)
        base = os.path.basename(path)
        return cls(path, data, loads, fdes, sorted(set(syms)), entry,
                   interp or base.startswith('ld-linux'), plt, stripped, text, file)

    def fp_prologues(self):
        """How many `push %rbp; mov %rsp,%rbp` the code holds (a function
        built with frame pointers starts so)."""
        return sum(self.data.count(b'\x55\x48\x89\xe5', o, o + n) for o, n in self.text)

    def vaddr(self, off):
        for o, v, n in self.loads:
            if o <= off < o + n:
                return off - o + v
        return None

    def offset(self, va):
        for o, v, n in self.loads:
            if v <= va < v + n:
                return va - v + o
        return None

    def fde(self, va):
        i = bisect.bisect_right(self.starts, va) - 1
        if i >= 0 and va < self.fdes[i][1]:
            return self.fdes[i]
        return None

    def symbol(self, va):
        """(name, offset) of the function symbol holding va, or None."""
        i = bisect.bisect_right(self.symstarts, va) - 1
        while i >= 0 and self.symstarts[i] > va - 0x100000:
            v, size, name = self.syms[i]
            if v <= va < v + max(size, 1):
                return name, va - v
            i -= 1
        return None

    def cfa_rule(self, va):
        """The CFA rule of .eh_frame at va, as readelf prints it (rsp+8,
        rbx+32, exp...), or None."""
        if not hasattr(self, 'rows'):
            self.rows, fde = [], None
            for l in run('readelf', '-W', '-wN', '--debug-dump=frames-interp', self.file).splitlines():
                m = re.search(r' FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)', l)
                if m:
                    fde = (int(m.group(1), 16), int(m.group(2), 16))
                    continue
                t = l.split()
                if fde and len(t) >= 2 and re.fullmatch(r'[0-9a-f]{8,16}', t[0]):
                    self.rows.append((int(t[0], 16), fde[1], t[1]))
            self.rows.sort()
        i = bisect.bisect_right(self.rows, (va, float('inf'), '')) - 1
        if i >= 0 and va < self.rows[i][1]:
            return self.rows[i][2]
        return None

    def jumps_to(self, start, end, target):
        """Does the code in [start, end) hold a direct jmp (rel32 or rel8) or
        conditional jump to target?  (A tail call: its frame is replaced by
        the target's.)"""
        lo, hi = self.offset(start), self.offset(end - 1)
        if lo is None or hi is None:
            return False
        d = self.data
        for q in range(lo, hi + 1):
            b = d[q]
            if b == 0xe9 and q + 5 <= len(d):
                rel, n = int.from_bytes(d[q + 1:q + 5], 'little', signed=True), 5
            elif b == 0xeb and q + 2 <= len(d):
                rel, n = int.from_bytes(d[q + 1:q + 2], 'little', signed=True), 2
            elif b == 0x0f and q + 6 <= len(d) and 0x80 <= d[q + 1] <= 0x8f:
                rel, n = int.from_bytes(d[q + 2:q + 6], 'little', signed=True), 6
            else:
                continue
            va = self.vaddr(q)
            if va is not None and va + n + rel == target:
                return True
        return False

    def in_plt(self, va):
        return va is not None and any(s <= va < e for s, e, _ in self.plt)

    def plt_entry(self, va):
        """The start of the PLT entry holding va (.plt and .plt.sec entries
        are 16 bytes, .plt.got's 8, each section aligned to them), or
        None outside the PLT."""
        for s, e, name in self.plt:
            if s <= va < e:
                size = 8 if name == '.plt.got' else 16
                return s + (va - s) // size * size
        return None

    def call_before(self, off):
        """The call instruction that ends at file offset off: ('direct',
        target address) for call rel32, ('indirect', None) for call r/m64,
        or None when no call instruction ends there."""
        d = self.data
        if off < 2 or off > len(d):
            return None
        if off >= 5 and d[off - 5] == 0xe8:
            rel = int.from_bytes(d[off - 4:off], 'little', signed=True)
            va = self.vaddr(off - 1)
            return ('direct', None if va is None else va + 1 + rel)
        # call r/m64: ff /2, ModRM [SIB] [disp8|disp32]
        for p in range(off - 2, max(off - 8, 0) - 1, -1):
            if d[p] != 0xff:
                continue
            modrm = d[p + 1]
            if (modrm >> 3) & 7 != 2:
                continue
            mod, rm = modrm >> 6, modrm & 7
            n = 2
            if mod != 3 and rm == 4:
                n += 1
                if mod == 0 and d[p + 2] & 7 == 5:
                    n += 4
            if mod == 0 and rm == 5:
                n += 4
            elif mod == 1:
                n += 1
            elif mod == 2:
                n += 4
            if p + n == off:
                return ('indirect', None)
        return None


class Objects:
    """The objects of a log, read once each from ROOT + their path."""

    def __init__(self, root):
        self.root = root
        self.cache = {}

    def get(self, path):
        if path not in self.cache:
            f = self.root + path if path.startswith('/') else None
            self.cache[path] = Elf.read(path, f) if f and os.path.isfile(f) else None
        return self.cache[path]

    def md5(self, path):
        o = self.get(path)
        return hashlib.md5(o.data).hexdigest() if o else None


# ---------------------------------------------------------------- log

def parse_log(text):
    """{(prog, mode): {'stacks': [Stack], 'kernel': [...], 'info': {...}}}
    and {path: md5} from a guest log."""
    runs = {}
    md5 = {}
    lines = text.replace('\r', '').split('\n')
    i = 0
    while i < len(lines):
        l = lines[i]
        m = BEGIN.match(l)
        if m:
            key = (m.group(1), m.group(2))
            body = []
            i += 1
            while i < len(lines) and not END.match(lines[i]):
                body.append(lines[i])
                i += 1
            # Kernel messages may land inside a line of the base64 text:
            # drop each from its time stamp to the end of its line.
            b64 = B64.sub('', KTIME_MSG.sub('', '\n'.join(body)))
            raw = gzip.decompress(base64.b64decode(b64)).decode()
            r = runs.setdefault(key, {'info': {}})
            st, ke = parse_stacks(raw)
            r.setdefault('stacks', []).extend(st)
            r.setdefault('kernel', []).extend(ke)
            r['sessions'] = r.get('sessions', 0) + 1
        else:
            m = REAL.search(l)
            if m and not l.startswith('# REAL md5'):
                info = dict(kv.split('=', 1) for kv in m.group(3).split() if '=' in kv)
                r = runs.setdefault((m.group(1), m.group(2)), {'info': {}})
                # Several sessions of one program: figures add up.
                for k, v in info.items():
                    if k not in r['info'] or m.group(2) != 'both':
                        r['info'][k] = v
                        continue
                    try:
                        if '.' in v or '.' in r['info'][k]:
                            r['info'][k] = '%.2f' % (float(r['info'][k]) + float(v))
                        else:
                            r['info'][k] = str(int(r['info'][k]) + int(v))
                    except ValueError:
                        r['info'][k] = v
            m = MD5.search(l)
            if m:
                md5[m.group(2)] = m.group(1)
            m = STATS.search(l)
            if m:
                runs['stats'] = m.group(1).strip()
        i += 1
    return runs, md5


Stack = collections.namedtuple('Stack', 'kind comm n nk walks frames')


def parse_stacks(raw):
    """The stacks of one run ('S' lines: kind, comm, samples, samples in
    the kernel, walks, frames as (object path, file offset)) and the
    kernel functions of the samples without a usable user stack ('K'
    lines: kind, samples, functions)."""
    objs, stacks, kern = {}, [], []
    for l in raw.split('\n'):
        t = l.split()
        if not t:
            continue
        if t[0] == 'O':
            objs[t[1]] = t[2]
        elif t[0] == 'S':
            frames = []
            for f in t[6:]:
                oid, _, off = f.partition('+')
                frames.append((objs.get(oid, '?') if oid != '?' else '?', int(off, 16)))
            stacks.append(Stack(t[1], t[2], int(t[3]), int(t[4]), int(t[5]), frames))
        elif t[0] == 'K':
            kern.append((t[1], int(t[2]), t[3] if len(t) > 3 else '(none)'))
    return stacks, kern


class Frames:
    """Names and functions of frames (object path, file offset)."""

    def __init__(self, objects):
        self.objects = objects

    def callee(self, frame, leaf):
        """The function holding a leaf pc, or the call before a return
        address: (path, FDE start) or a stand-in key."""
        path, off = frame
        o = self.objects.get(path)
        if o is None:
            return (path, None)
        pc = off if leaf else off - 1
        va = o.vaddr(pc)
        f = o.fde(va) if va is not None else None
        if f is None:
            return (path, 'nofde', pc)
        # One FDE describes a whole .plt, but each entry is a stub of its
        # own, jumped to by the callers of one function: keyed as one,
        # libc's realloc@plt (called by re_node_set_add_intersect) and its
        # memcpy stub (called by _int_realloc, under realloc, under
        # re_node_set_add_intersect) made a right step look like a lost
        # caller.  A PLT pc is its entry's (16 bytes; .plt.got's 8).
        plt = o.plt_entry(va)
        if plt is not None:
            return (path, plt)
        return (path, f[0])

    def is_entry(self, key):
        """Is this the entry function (_start) of the program or of the
        dynamic loader?  (ld.so's _start has no FDE: then the code from the
        entry point to the next FDE.)"""
        o = self.objects.get(key[0])
        if o is None or not o.is_entry or key[1] is None:
            return False
        f = o.fde(o.entry)
        if len(key) == 2:
            return f is not None and f[0] == key[1]
        va = o.vaddr(key[2])
        if f is not None or va is None:
            return False
        i = bisect.bisect_right(o.starts, o.entry)
        end = o.starts[i] if i < len(o.starts) else o.entry + 64
        return o.entry <= va < end

    def call_site(self, frame):
        o = self.objects.get(frame[0])
        if o is None:
            return None
        return o.call_before(frame[1])

    def tail_calls(self, chain):
        """chain: callee keys [F, G1, ..., Gk], each called by the next in
        the oracle.  True if every Gi holds a direct jump to the start of
        the one before it (all in one object): then F can return straight
        to Gk's caller."""
        for f, g in zip(chain, chain[1:]):
            if len(f) != 2 or len(g) != 2 or f[0] != g[0] or f[1] is None:
                return False
            o = self.objects.get(g[0])
            rng = o.fde(g[1]) if o else None
            if rng is None or not o.jumps_to(rng[0], rng[1], f[1]):
                return False
        return True

    def frame_pc(self, frame):
        """A pc as function+offset (object + file offset)."""
        path, off = frame
        o = self.objects.get(path)
        base = os.path.basename(path)
        va = o.vaddr(off) if o else None
        s = o.symbol(va) if va is not None else None
        return '%s+%#x%s' % (base, off, ' (%s+%#x)' % s if s else '')

    def cfa_rule(self, frame):
        o = self.objects.get(frame[0])
        va = o.vaddr(frame[1]) if o else None
        r = o.cfa_rule(va) if va is not None else None
        return ('CFA = %s' % r) if r else 'none (no FDE)'

    def name(self, key):
        path = key[0]
        base = os.path.basename(path)
        if len(key) == 3:
            o = self.objects.get(path)
            sym = o.symbol(o.vaddr(key[2])) if o and o.vaddr(key[2]) is not None else None
            return '%s:(no FDE at +%#x%s)' % (base, key[2], ', %s+%#x' % sym if sym else '')
        if key[1] is None:
            return base
        o = self.objects.get(path)
        if o.in_plt(key[1]):
            return '%s:plt@%#x' % (base, key[1])
        s = o.symbol(key[1])
        if s and s[1] == 0:
            return '%s:%s' % (base, s[0])
        if s:
            return '%s:%s+%#x' % (base, s[0], s[1])
        return '%s:fn@%#x' % (base, key[1])

    def frame(self, frame):
        path, off = frame
        o = self.objects.get(path)
        base = os.path.basename(path)
        if o is None:
            return '%s+%#x' % (base, off)
        va = o.vaddr(off)
        where = ''
        if va is not None:
            f = o.fde(va - 1)
            if f:
                where = ' in ' + self.name((path, f[0]))
        return '%s+%#x%s' % (base, off, where)


Sample = collections.namedtuple('Sample', 'n nk walks frames')


def user_stacks(stacks, comm, kind, shift):
    """The program's samples of one kind with a user stack, frames leaf
    first, callers moved up by shift (1 for perf's DWARF frames, which are
    return address - 1) so that every caller frame is a return address."""
    out = []
    for s in stacks:
        if s.comm != comm or s.kind != kind or not s.frames:
            continue
        fr = [s.frames[0]] + [(p, o + shift) for p, o in s.frames[1:]]
        out.append(Sample(s.n, s.nk, s.walks, fr))
    return out


def steps_of(frames, fr):
    """The callee keys of a stack and its steps [(callee, return address)]."""
    keys = [fr.callee(f, i == 0) for i, f in enumerate(frames)]
    return keys, [(keys[i], frames[i + 1]) for i in range(len(frames) - 1)]


def call_sites(samples, fr):
    """(caller frames ending a call instruction, caller frames checked)."""
    good = total = 0
    for s in samples:
        for f in s.frames[1:]:
            if fr.objects.get(f[0]) is None:
                continue
            total += s.n
            if fr.call_site(f):
                good += s.n
    return good, total


def completeness(samples, fr):
    """{leaf callee: [complete samples, samples]} and the callees the
    incomplete stacks end at, with their samples."""
    by_leaf = collections.defaultdict(lambda: [0, 0])
    ends = collections.Counter()
    for s in samples:
        keys = steps_of(s.frames, fr)[0]
        c = by_leaf[keys[0]]
        c[1] += s.n
        if fr.is_entry(keys[-1]):
            c[0] += s.n
        else:
            ends[keys[-1]] += s.n
    return by_leaf, ends


def lost_path(oracle, fr, callee, ra, depth=4):
    """Callees the oracle passes through from callee to ra (a chain of at
    least one skipped function), or None."""
    todo = [(callee, [])]
    seen = {callee}
    for _ in range(depth):
        nxt = []
        for k, path in todo:
            for r in oracle.get(k, ()):
                g = fr.callee(r, False)
                if g in seen:
                    continue
                seen.add(g)
                if ra in oracle.get(g, ()):
                    return path + [g]
                nxt.append((g, path + [g]))
        todo = nxt
    return None


WRONG = ('not a return address', 'return address in no mapping')


def classify(fr, oracle, callee, ra):
    """Why a table-walk step is not among the oracle's: (cause, detail)."""
    # A chain the oracle saw from the callee up to a caller of ra shows a
    # lost frame only where the call before ra cannot have called the
    # callee itself: not after an indirect call, which may (an
    # interpreter's function pointers, whose recursion gives the oracle
    # such chains by chance: python3.11's dealloc slot, 2026-11-28).
    cs = fr.call_site(ra)
    lost = None if cs is not None and cs[0] == 'indirect' else lost_path(oracle, fr, callee, ra)
    if lost:
        skipped = ' <- '.join(fr.name(k) for k in lost)
        if fr.tail_calls([callee] + lost):
            return ('tail call not seen by the oracle',
                    'the oracle saw %s called by %s, which also tail-jumps to it (its frame '
                    'is then gone: the step is right)' % (fr.name(callee), skipped))
        return 'caller lost', 'skipped ' + skipped
    if ra[0] == '?':
        return 'return address in no mapping', '%#x' % ra[1]
    o = fr.objects.get(ra[0])
    if o is not None and cs is None:
        return 'not a return address', 'no call instruction ends at %s' % fr.frame(ra)
    if cs is None:
        code = 'code not available'
    elif cs[0] == 'indirect':
        code = 'after an indirect call'
    else:
        t = cs[1]
        f = o.fde(t) if t is not None else None
        if o.in_plt(t):
            code = 'after a call through the PLT'
        elif f and len(callee) == 2 and callee[0] == ra[0] and f[0] == callee[1]:
            code = 'after a direct call to the callee'
        else:
            code = ('after a direct call to %s, not the callee (a tail call from it, or a wrong step)'
                    % (fr.name((ra[0], f[0])) if f else '%#x' % t))
    if callee not in oracle:
        return 'callee never sampled by the oracle', code
    return 'caller not seen by the oracle', code


def share(a, b):
    return 100.0 * a / b if b else 0.0


def compare_program(prog, runs, fr, out):
    """Print the figures of one program; True if within the targets."""
    def p(*a):
        print(*a, file=out)
    ok = True
    b = runs.get((prog, 'both'))
    if not b or 'stacks' not in b:
        p('  MISSING: the session of both unwinders')
        return False
    for mode in ('defer', 'dwarf'):
        info = runs.get((prog, mode), {}).get('info')
        if not info:
            p('  MISSING: the %s run alone' % mode)
            ok = False
            continue
        p('  %-5s alone: %s samples, perf.data %s bytes, %s bytes/sample, perf record %s s, '
          'perf report %s s (%s ms/sample)%s'
          % (mode, info.get('samples', '?'), info.get('data_bytes', '?'),
             info.get('bytes_per_sample', '?'), info.get('record_s', '?'), info.get('report_s', '?'),
             info.get('report_ms_per_sample', '?'),
             ', %s deferred records' % info['deferred'] if mode == 'defer' else ''))
        if info.get('lost', '0') not in ('0', '0.0'):
            p('        %s samples lost (ring buffer)' % info['lost'])
    info = b['info']
    ds = user_stacks(b['stacks'], prog, 'D', 0)
    # perf's libdw frames after the first are return address - 1.
    ws = user_stacks(b['stacks'], prog, 'W', 1)
    other = collections.Counter()
    for x in b['stacks']:
        if x.comm == prog and x.kind not in ('D', 'W'):
            other[x.kind] += x.n
    p('  both in one session (%d): perf.data %s bytes, perf record %s s, perf script %s s; '
      '%s records lost'
      % (b.get('sessions', 0), info.get('data_bytes', '?'), info.get('record_s', '?'),
         info.get('script_s', '?'), info.get('lost', '?')))
    for mode, s in (('walk', ds), ('oracle', ws)):
        n = sum(x.n for x in s)
        multi = sum(x.n for x in s if len(x.frames) > 1)
        kern = sum(x.nk for x in s)
        p('  %-8s %6d samples with a user stack (%.1f%% taken in the kernel), %d with more than '
          'one frame, %s without a user stack'
          % (mode, n, share(kern, n), multi, info.get('%s_without_user_stack' % mode, '?')))
        if mode == 'walk':
            walks = sum(x.walks for x in s)
            p('           %d deferred records (walks) for them; %s samples came after their record '
              '(perf script\'s own merge leaves those unjoined; joined here by tid and cookie); '
              '%d without a record, %d unwound in place (not deferred: exiting)'
              % (walks, info.get('after_their_record', '?'), other['N'], other['I']))
        if multi < MIN_MULTI:
            p('    FAIL: fewer than %d samples with more than one user frame' % MIN_MULTI)
            ok = False
    kinds = {'E': 'walk, no user stack', 'F': 'oracle, no user stack', 'L': 'walk, after their record',
             'I': 'walk, in place', 'N': 'walk, without a record'}
    ks = collections.Counter()
    for kind, c, syms in b.get('kernel', []):
        ks[(kind, syms)] += c
    for (kind, syms), c in sorted(ks.items(), key=lambda x: -x[1])[:6]:
        p('             %5d %s, kernel: %s' % (c, kinds.get(kind, kind), syms))
    if other['N'] or other['I']:
        p('    (samples without a record or unwound in place are not the table walk\'s: left out)')
    paths = sorted(set(f[0] for x in ds + ws for f in x.frames))
    for path in paths:
        o = fr.objects.get(path)
        if o is None:
            p('  object %s: not a file here (frames keyed by the object alone)' % path)
        else:
            p('  object %s: %d FDEs, %d frame-pointer prologues (push %%rbp; mov %%rsp,%%rbp), %s'
              % (path, len(o.fdes), o.fp_prologues(), 'stripped' if o.stripped else 'with .symtab'))
    # Frame convention: caller frames end a call instruction.
    for mode, s in (('fp,defer', ds), ('dwarf', ws)):
        g, t = call_sites(s, fr)
        p('  %-8s caller frames ending a call instruction: %d of %d (%.2f%%)' % (mode, g, t, share(g, t)))
        if mode == 'dwarf' and t and g < 0.99 * t:
            raw = call_sites(user_stacks(b['stacks'], prog, 'W', 0), fr)
            p('    FAIL: perf\'s DWARF frames are not return address - 1 here '
              '(unshifted: %d of %d end a call)' % raw)
            ok = False
    # The oracle's steps, and the table walk's against them.
    oracle = collections.defaultdict(set)
    for x in ws:
        for k, r in steps_of(x.frames, fr)[1]:
            oracle[k].add(r)
    total = agree = wtotal = wagree = 0
    bad = collections.Counter()
    distinct = set()
    for x in ds:
        for k, r in steps_of(x.frames, fr)[1]:
            total += x.n
            wtotal += x.walks
            distinct.add((k, r))
            if r in oracle.get(k, ()):
                agree += x.n
                wagree += x.walks
            else:
                bad[(k, r)] += x.n
    classes = dict(((k, r), classify(fr, oracle, k, r)) for k, r in bad)
    dagree = sum(1 for st in distinct if st not in bad)
    # Steps whose callee the oracle never sampled (it lost records, or
    # sampled the program elsewhere) are the oracle's silence, not its
    # answer: left out of the agreement, counted as not covered.
    unseen = sum(c for st, c in bad.items() if classes[st][0] == 'callee never sampled by the oracle')
    judged = total - unseen
    p('  steps of the table walk found among the oracle\'s: %d of %d (%.3f%%), of the %d whose '
      'callee the oracle sampled %.3f%% (target >= %.0f%%); covered %.2f%% (target >= %.0f%%); '
      'by walk %d of %d (%.3f%%), distinct steps %d of %d'
      % (agree, total, share(agree, total), judged, share(agree, judged), 100 * AGREE,
         share(judged, total), 100 * COVERED, wagree, wtotal, share(wagree, wtotal),
         dagree, len(distinct)))
    if share(agree, judged) < 100 * AGREE:
        p('    FAIL: agreement below the target')
        ok = False
    if share(judged, total) < 100 * COVERED:
        p('    FAIL: the oracle sampled too few of the table walk\'s callees to judge it')
        ok = False
    walk = collections.defaultdict(set)
    for x in ds:
        for k, r in steps_of(x.frames, fr)[1]:
            walk[k].add(r)
    ot = oa = 0
    for x in ws:
        for k, r in steps_of(x.frames, fr)[1]:
            ot += x.n
            oa += x.n if r in walk.get(k, ()) else 0
    p('  (the other way: the oracle\'s steps found among the table walk\'s: %d of %d, %.3f%%)'
      % (oa, ot, share(oa, ot)))
    # Complete stacks: raw, and with the oracle's share per leaf function
    # weighted as the table walk's samples are (the two runs sample the
    # program differently: the walk's own cost is charged to the task).
    cd, ed = completeness(ds, fr)
    cw, ew = completeness(ws, fr)
    nd, nw = sum(v[1] for v in cd.values()), sum(v[1] for v in cw.values())
    pd, pw = share(sum(v[0] for v in cd.values()), nd), share(sum(v[0] for v in cw.values()), nw)
    both = [k for k in cd if cw.get(k, [0, 0])[1]]
    nb = sum(cd[k][1] for k in both)
    sd = share(sum(cd[k][0] for k in both), nb)
    sw = share(sum(cd[k][1] * cw[k][0] / cw[k][1] for k in both), nb)
    p('  complete stacks (down to _start): fp,defer %.2f%% of %d, dwarf %.2f%% of %d; per leaf '
      'function, over the %d fp,defer samples (%.1f%%) at leaves the oracle sampled too: '
      'fp,defer %.2f%%, dwarf %.2f%%: %.2f points apart (target <= %.1f)'
      % (pd, nd, pw, nw, nb, share(nb, nd), sd, sw, abs(sd - sw), COMPLETE_POINTS))
    if sd < sw - COMPLETE_POINTS:
        p('    FAIL: the table walk\'s stacks are complete less often than the oracle\'s')
        ok = False
    elif sw < sd - COMPLETE_POINTS:
        # Not the walk's failure: every step it took past where the
        # oracle stopped is checked above against the oracle's own steps
        # of other samples (perf copies a bounded stack per sample: a
        # deep or large frame ends the oracle's unwind, not the walk's).
        p('    (the oracle\'s stacks are complete less often than the table walk\'s, which is '
          'not a failure of the walk: see where the oracle\'s end below)')
    for mode, ends in (('fp,defer', ed), ('dwarf', ew)):
        top = ', '.join('%s %d' % (fr.name(k), c) for k, c in ends.most_common(5))
        p('    %-8s incomplete stacks end at: %s' % (mode, top or '-'))
    # Callers lost.
    lost_samples = 0
    for x in ds:
        if any(classes.get(st, ('',))[0] == 'caller lost' for st in steps_of(x.frames, fr)[1]):
            lost_samples += x.n
    ended = collections.Counter(dict((k, c) for k, c in ed.items() if oracle.get(k)))
    # Where in those functions the walk stopped: the pc of the last frame
    # (its return address - 1, or the leaf's pc).  A walk that stops at
    # the interrupted frame (its only frame) where the CFA is based on a
    # register it does not track is the documented limit (TRACKED):
    # counted apart, by the CFA rule the object's own tables give there.
    ended_pcs = collections.defaultdict(collections.Counter)
    limit = collections.Counter()
    for x in ds:
        last = x.frames[-1]
        k = fr.callee(last, len(x.frames) == 1)
        if k not in ended:
            continue
        pc = (last[0], last[1] - (0 if len(x.frames) == 1 else 1))
        ended_pcs[k][pc] += x.n
        rule = fr.cfa_rule(pc)
        m = re.match(r'CFA = ([a-z0-9]+)[+-]', rule)
        if len(x.frames) == 1 and m and m.group(1) not in TRACKED:
            limit[(pc, rule)] += x.n
            ended[k] -= x.n
    ended = +ended
    p('  direct caller lost where the oracle has it: %d samples skipping a frame, %d ending '
      'before _start at a function the oracle saw called (target 0); %d at the interrupted '
      'frame where the CFA is based on a register the walk does not track (a limit)'
      % (lost_samples, sum(ended.values()), sum(limit.values())))
    for (pc, rule), n in limit.most_common():
        p('    limit: %d at %s, its only frame: %s there (needs the interrupted frame\'s '
          'other registers)' % (n, fr.frame_pc(pc), rule))
    for k, c in ended.most_common(10):
        p('    %6d ending at %s (oracle callers: %s)'
          % (c, fr.name(k), ', '.join(fr.frame(r) for r in sorted(oracle[k])[:3])))
        for pc, n in ended_pcs[k].most_common(3):
            p('           %d at %s: CFA rule there %s' % (n, fr.frame_pc(pc), fr.cfa_rule(pc)))
    if lost_samples or ended:
        p('    FAIL: the table walk lost callers the oracle found')
        ok = False
    if bad:
        p('  disagreeing steps (callee -> return address: samples, cause):')
        by = collections.Counter()
        for st, c in bad.items():
            by[classes[st][0]] += c
        for cause, c in by.most_common():
            p('    %-36s %6d samples' % (cause, c))
        for (k, r), c in sorted(bad.items(), key=lambda x: (-x[1], str(x[0]))):
            cause, why = classes[(k, r)]
            p('    %5d  %s -> %s: %s, %s' % (c, fr.name(k), fr.frame(r), cause, why))
            if cause in WRONG:
                ok = False
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('log')
    ap.add_argument('--root', required=True,
                    help='the guest root the objects were copied into (the initramfs tree)')
    ap.add_argument('--program', action='append', default=[],
                    help='a program that must be in the log and pass')
    ap.add_argument('--results')
    ap.add_argument('--name', default='real-programs',
                    help='the result\'s name in --results')
    a = ap.parse_args()
    with open(a.log, 'rb') as f:
        text = f.read().decode('utf-8', 'replace')
    runs, md5 = parse_log(text)
    objects = Objects(a.root)
    fr = Frames(objects)
    passed = failed = 0
    for path, m in sorted(md5.items()):
        mine = objects.md5(path)
        if mine != m:
            print('FAIL: %s: the guest ran md5 %s, %s%s has %s' % (path, m, a.root, path, mine))
            failed += 1
    stats = runs.pop('stats', None)
    progs = sorted(set(p for p, _ in runs) | set(a.program), key=lambda x: (x not in a.program, x))
    if not progs:
        print('no "#### BEGIN real" runs in %s' % a.log)
        failed += 1
    for prog in progs:
        print('%s:' % prog)
        if compare_program(prog, runs, fr, sys.stdout):
            print('  %s: the table walk agrees with perf\'s DWARF unwinder' % prog)
            passed += 1
        else:
            print('  %s: DIFFERENT' % prog)
            failed += 1
    if stats:
        t = stats.split()
        c = dict(zip(t[::2], t[1::2]))
        print('table walk counters of the guest (debugfs unwind_user/stats): %s; refusals: %s'
              % (', '.join('%s %s' % (k, c[k]) for k in ('walks', 'table_frames', 'fp_frames',
                                                          'end_of_stack') if k in c),
                 ', '.join('%s %s' % (k, v) for k, v in c.items()
                           if k.startswith('refused_') and v != '0') or 'none'))
    print('real programs: %d passed, %d failed' % (passed, failed))
    if a.results:
        with open(a.results, 'w') as f:
            f.write('%d %d %s\n' % (passed, failed, a.name))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
