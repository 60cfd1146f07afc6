#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Worst-case kernel stack use of the Rust unwinder, from its object code.

Reads x86-64 ELF objects with `objdump -t` and `objdump -dr` (GNU
binutils): the unwinder's crate, kernel/unwind/rust/unwind_rust.o, and,
when it lies in a kernel build tree (the directory holding .config), the
objects linked with it that its code calls into (LINKED: shim.o, the
kernel crate rust/kernel.o, rust/core.o, the C helpers, and perf's
kernel/events/core.o, through which perf's deferred callback reaches its
output function); --no-linked reads only the objects named.

A function's own frame is what its instructions take from the stack: the
return address its caller pushed (8), 8 per push (frame pointer, callee-
saved registers, and arguments pushed for a call: all of them, whether or
not they are popped before the next call), every `sub $N,%rsp` (or
`add $-N,%rsp`, or `lea -N(%rsp),%rsp`) summed, and N - 8 for an
`and $-N,%rsp` realignment (an `add $N,%rsp` or `lea N(%rsp),%rsp`
releases).  Any other write to %rsp than the epilogue's (`mov %rbp,%rsp`,
`lea -N(%rbp),%rsp`) is a variable-size allocation: the depth is then
unknown and --check fails.  These sums are upper bounds.

The call graph: a `call` to a function (by relocation, or by address
where the assembler resolved a call within its section), and a jump to
another function (a tail call: its frame replaces the caller's).  A
callee in none of the objects is a kernel function, charged its return
address (8) plus --extern-cost (0): a path's figure is the unwinder's own
stack at the deepest point where it calls into the rest of the kernel,
whose own use from there on (copy_from_user's page fault, the allocator,
lockdep) is the same as from any caller.  Panics (core::panicking, the
kernel oopses) are followed like any call.  An indirect call is followed
to the targets INDIRECT (or --assume) names for it; one reachable from a
root with none fails --check, as does a cycle (recursion: no bound).

Roots (ROOTS, or --root LABEL=REGEX over demangled names): each must
match one function, except the optional ones a build may inline into
their callers (the bench kernel's opt-level 2).  Printed per root: the
worst depth in bytes and its path, each function with its own frame, and
the kernel functions it calls with the deepest depth each is entered at.
--check exits 1 if a root is over --max or unbounded, saying why; --goal
only reports roots over it.

--cross-check validates the frames against LLVM's: it builds the crate
again with the commands Kbuild recorded for OBJ (.OBJ.cmd: same
compilers, flags and source) plus rustc's -Zemit-stack-sizes (clang's
-fstack-size-section for the bench kernel's bitcode step) into a
temporary directory, requires the code to be byte-identical to OBJ's,
and compares every function's frame with its .stack_sizes entry (LLVM's
frame size, which excludes the return address): fewer bytes here than
there fails.
--stack-sizes OBJ2 compares with an object built so by hand.
"""
import argparse
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOTS = [
    # (label, demangled name, optional)
    ('task_work', r'unwind_rust::deferred::task_work_fn', False),
    ('faultable', r'unwind_user_faultable', False),
    ('nmi', r'unwind_user', False),
    # The walk's own steps (walk_tables_from, which also settles the
    # lookups and compilations, is inlined into cache::user_faultable).
    ('table-walk', r'<unwind_rust::logic::walk::TableWalk>::run::<unwind_rust::walk::'
     r'CurrentUserMemory, unwind_rust::tables::TaskTables>', True),
    # The interpreter on an object's own rows (its decoder, row sink and
    # reads; ObjectRows::insert, which called it, is inlined since
    # 2026-12-07 into TaskTables::fill_own and fill_shared).
    ('interpreter', r'unwind_rust::logic::cfi::compile_read::'
     r'<unwind_rust::walk::CurrentUserMemory>', True),
]

# Indirect calls whose targets the source fixes: (caller, callee) regexes
# over demangled names; every function matching callee is a target, and
# 'kernel:NAME' is a kernel function.
INDIRECT = [
    # deferred::call_works calls each registered work's func: perf's (the
    # only in-tree user; the test modules' and KUnit's are tests).
    (r'unwind_rust::deferred::call_works', r'unwind_rust::perf::deferred_callback'),
    # perf_callchain_deferred_iterate() -> perf_iterate_sb() calls the
    # output function deferred_callback passes it.
    (r'perf_iterate_sb(_cpu)?', r'unwind_rust::perf::deferred_output'),
    # perf_event_clock(): event->clock, local_clock() or the clock the
    # session chose (ktime_get_*_ns).
    (r'__perf_event_header__init_id', r'kernel:event->clock'),
    # The interpreter's row sink (`&mut dyn RowSink`, its only dyn), in
    # whichever of its functions the build inlined the call into (with its
    # state in `cfi::Scratch`, `compile` is small enough to be inlined
    # into `ObjectRows::insert` or `fill`; the rows' compile is
    # `compile_read`, the FDE in the scratch).
    (r'unwind_rust::logic::cfi::compile(_read)?::<.*>|<unwind_rust::logic::cfi::Interp>::.*'
     r'|<unwind_rust::logic::rows::ObjectRows<.*>>::(fill|insert)::<.*>',
     r'<.* as unwind_rust::logic::cfi::RowSink>::row'),
    # elf::scan reads words through the ELF class's fn pointers (inlined
    # into locate or layout, and those into their callers in the bench
    # kernel).
    (r'unwind_rust::logic::elf::(scan|locate|layout)::<.*>|unwind_rust::cache::user_faultable'
     r'|<unwind_rust::tables::TaskTables>::add_object::<.*>|unwind_rust::tables::file_rows::<.*>',
     r'unwind_rust::logic::elf::u(16|32|64)_at'),
]

# Objects linked with the unwinder's, relative to the kernel build tree,
# read when present.
LINKED = ['kernel/unwind/rust/shim.o', 'rust/kernel.o', 'rust/core.o',
          'rust/helpers/helpers.o', 'kernel/events/core.o']

Func = collections.namedtuple('Func', 'key name frame pushes subs realign dynamic '
                                      'calls tails indirect')

LABEL = re.compile(r'^([0-9a-f]+) <(.+)>:$')
INSN = re.compile(r'^\s*([0-9a-f]+):\t(\S+)\s*(.*)$')
RELOC = re.compile(r'([0-9a-f]+): (R_X86_64_\w+)\t(\S+)')
TARGET = re.compile(r'^([0-9a-f]+) <')
SYMREF = re.compile(r'^(.*?)([+-]0x[0-9a-f]+)?$')
IMM = re.compile(r'^\$(0x[0-9a-f]+),%rsp$')
EPILOGUE = re.compile(r'^(-?(0x[0-9a-f]+)?\(%rbp\)|%rbp),%rsp$')
RSP_LEA = re.compile(r'^(-?0x[0-9a-f]+)\(%rsp\),%rsp$')


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def demangle(names):
    names = sorted(names)
    suffix = os.environ.get('LLVM_SUFFIX', '-19')
    tool = next((t for t in ('llvm-cxxfilt' + suffix, 'llvm-cxxfilt') if shutil.which(t)), None)
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input='\n'.join(names) + '\n', check=True,
                         capture_output=True, text=True).stdout.split('\n')
    return dict(zip(names, out))


class Obj:
    """One object: its symbols, and its functions' instructions."""

    def __init__(self, path):
        self.path = path
        self.defs = {}          # name -> (section, value, global)
        self.sections = set()
        for line in run(['objdump', '-t', '-w', path]).splitlines():
            m = re.match(r'^([0-9a-f]{16}) (.{7}) (\S+)\t[0-9a-f]+ (?:\.hidden )?(.+)$', line)
            if not m:
                continue
            value, flags, sec, name = m.groups()
            if sec in ('*UND*', '*ABS*', '*COM*'):
                continue
            if flags[5] == 'd':
                self.sections.add(sec)
                continue
            self.defs.setdefault(name, (sec, int(value, 16), flags[0] in 'gu' or flags[1] == 'w'))
        self.funcs = {}         # (section, start) -> (label, [(addr, mnemonic, operands)])
        sec = cur = None
        for line in run(['objdump', '-dr', '-w', '--no-show-raw-insn', path]).splitlines():
            if line.startswith('Disassembly of section '):
                sec, cur = line[len('Disassembly of section '):].rstrip(':'), None
                continue
            # Alternative instructions, copied over .text at boot (stac,
            # clac, fences), are no function.
            if sec == '.altinstr_replacement':
                continue
            m = LABEL.match(line)
            if m:
                cur = (sec, int(m.group(1), 16))
                self.funcs[cur] = (m.group(2), [])
                continue
            m = INSN.match(line)
            if m and cur:
                self.funcs[cur][1].append((int(m.group(1), 16), m.group(2), m.group(3)))
        self.starts = collections.defaultdict(list)
        for s, a in sorted(self.funcs):
            self.starts[s].append(a)

    def func_at(self, sec, addr):
        """The (section, start) of the function holding `addr`."""
        best = None
        for a in self.starts.get(sec, ()):
            if a > addr:
                break
            best = a
        return None if best is None else (sec, best)


class Graph:
    def __init__(self, paths, extern_cost, rules):
        self.objs = [Obj(p) for p in paths]
        self.extern_cost = extern_cost
        self.globals = {}
        for i, o in enumerate(self.objs):
            for name, (sec, val, glob) in o.defs.items():
                if glob and sec in o.starts:
                    self.globals.setdefault(name, (i, sec, val))
        self.externals = set()
        self.funcs = {}
        for i, o in enumerate(self.objs):
            for key, (name, insns) in o.funcs.items():
                self.funcs[(i,) + key] = self.analyse(i, key, name, insns)
        self.pretty = demangle(set(f.name for f in self.funcs.values()) | self.externals)
        self.by_pretty = collections.defaultdict(list)
        for k, f in self.funcs.items():
            self.by_pretty[self.pretty[f.name]].append(k)
        self.assumed = collections.defaultdict(list)
        for caller, callee in rules:
            if callee.startswith('kernel:'):
                targets = [('x', callee[len('kernel:'):])]
            else:
                targets = [('f', t) for t in self.find(callee)]
            for k in self.find(caller):
                if self.funcs[k].indirect:
                    self.assumed[k] += targets

    def resolve(self, i, ref):
        """The node a branch relocation `ref` (symbol+addend) points at."""
        o = self.objs[i]
        m = SYMREF.match(ref)
        sym, off = m.group(1), int(m.group(2) or '0', 16) + 4   # PC-relative: -4
        if sym in o.sections:
            k = o.func_at(sym, off)
        elif sym in o.defs and o.defs[sym][0] in o.starts and \
                (not o.defs[sym][2] or self.globals.get(sym, (i,))[0] == i):
            k = o.func_at(o.defs[sym][0], o.defs[sym][1] + off)
        elif sym in self.globals:
            j, sec, val = self.globals[sym]
            k = self.objs[j].func_at(sec, val + off)
            return ('f', (j,) + k) if k else None
        else:
            return ('x', sym)
        return ('f', (i,) + k) if k else None

    def analyse(self, i, key, name, insns):
        o = self.objs[i]
        sec, start = key
        starts = o.starts[sec]
        n = starts.index(start) + 1
        end = starts[n] if n < len(starts) else float('inf')
        pushes = subs = realign = 0
        dynamic, calls, tails, indirect = [], [], [], []
        for addr, mn, ops in insns:
            relocs = RELOC.findall(ops)
            ops = ops.split('\t')[0].split('#')[0].strip()
            if mn.startswith('push'):
                pushes += 1
                continue
            if ops.endswith(',%rsp') and not mn.startswith(('cmp', 'test')):
                m = IMM.match(ops)
                v = int(m.group(1), 16) if m else 0
                if m and mn.startswith('sub'):
                    subs += v
                elif m and mn.startswith('add'):
                    subs += (1 << 64) - v if v >= 1 << 63 else 0
                elif m and mn.startswith('and'):
                    realign = max(realign, (1 << 64) - v - 8)
                elif mn.startswith('lea') and RSP_LEA.match(ops):
                    # `lea N(%rsp),%rsp`: an `add $N,%rsp` (a release,
                    # as an epilogue's) or, negative, a `sub`.
                    n = RSP_LEA.match(ops).group(1)
                    if n.startswith('-'):
                        subs += int(n[1:], 16)
                elif not (mn.startswith(('mov', 'lea')) and EPILOGUE.match(ops)):
                    dynamic.append('%x: %s %s' % (addr, mn, ops))
                continue
            is_call = mn.startswith('call')
            if not (is_call or mn.startswith('j')):
                continue
            if ops.startswith('*'):
                # A jump through a table in .rodata stays in the function.
                if not is_call and any(r[2].startswith('.rodata') for r in relocs):
                    continue
                indirect.append(addr)
                continue
            branch = [r for r in relocs if r[1] in ('R_X86_64_PLT32', 'R_X86_64_PC32')]
            if branch:
                target = self.resolve(i, branch[0][2])
            else:
                m = TARGET.match(ops)
                t = int(m.group(1), 16) if m else None
                if t is None or start <= t < end:
                    continue
                k = o.func_at(sec, t)
                target = ('f', (i,) + k) if k else None
            if target is None:
                continue
            if target[0] == 'x':
                if target[1].startswith(('__x86_indirect_thunk', '__x86_indirect_call')):
                    indirect.append(addr)
                    continue
                if target[1].startswith('__x86_return_thunk'):
                    continue
                self.externals.add(target[1])
            elif target[1] == (i, sec, start) and not is_call:
                continue
            (calls if is_call else tails).append(target)
        return Func((i, sec, start), name, 8 + 8 * pushes + subs + realign, pushes, subs,
                    realign, dynamic, calls, tails, indirect)

    def find(self, regex):
        r = re.compile('(?:%s)$' % regex)
        return [k for p, ks in self.by_pretty.items() if r.match(p) for k in ks]

    def name(self, node):
        if node[0] == 'x':
            return self.pretty.get(node[1], node[1])
        return self.pretty[self.funcs[node[1]].name]

    def own(self, node):
        return 8 + self.extern_cost if node[0] == 'x' else self.funcs[node[1]].frame

    def edges(self, f):
        return f.calls + self.assumed.get(f.key, []), f.tails

    def worst(self, root):
        """Worst depth from `root`: (bytes, path, problems)."""
        memo, onstack, problems = {}, [], set()

        def depth(node):
            if node in memo:
                return memo[node]
            if node in onstack:
                cycle = onstack[onstack.index(node):] + [node]
                problems.add('recursion: ' + ' -> '.join(self.name(n) for n in cycle))
                return (0, [])
            if node[0] == 'x':
                memo[node] = (self.own(node), [node])
                return memo[node]
            f = self.funcs[node[1]]
            if f.dynamic:
                problems.add('%s: variable stack allocation (%s)' %
                             (self.name(node), '; '.join(f.dynamic)))
            if f.indirect and not self.assumed.get(f.key):
                problems.add('%s: indirect call at %s with no known target' %
                             (self.name(node), ', '.join('%x' % a for a in f.indirect)))
            onstack.append(node)
            calls, tails = self.edges(f)
            best = (f.frame, [node])
            for c in calls:
                d, p = depth(c)
                if f.frame + d > best[0]:
                    best = (f.frame + d, [node] + p)
            for c in tails:
                d, p = depth(c)
                if d > best[0]:
                    best = (d, [node] + p)
            onstack.pop()
            memo[node] = best
            return best

        d, p = depth(root)
        return d, p, sorted(problems)

    def kernel_calls(self, root):
        """The kernel functions reachable from `root`, each with the
        deepest depth it is entered at (its return address pushed)."""
        at, entered = {}, {}
        todo = [(root, 0)]
        while todo:
            node, base = todo.pop()
            if node[0] == 'x':
                at[node[1]] = max(at.get(node[1], 0), base + 8)
                continue
            # Again only if entered deeper (a cycle: reported by worst()).
            if entered.get(node, -1) >= base or base > 1 << 20:
                continue
            entered[node] = base
            f = self.funcs[node[1]]
            calls, tails = self.edges(f)
            todo += [(c, base + f.frame) for c in calls]
            # A tail call reuses the caller's return address.
            todo += [(c, base) for c in tails]
        return at


def elf_sections(path):
    """The sections of an ELF64 object, [(name, type, bytes, link,
    info)] by index, and its symbol table, [(section index, value)]."""
    with open(path, 'rb') as f:
        elf = f.read()
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', elf, 0x3a)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    names = [elf[strtab + h[0]:elf.index(b'\0', strtab + h[0])].decode() for h in hdrs]
    secs = [(names[i], h[1], elf[h[4]:h[4] + h[5]] if h[1] != 8 else b'', h[6], h[7])
            for i, h in enumerate(hdrs)]
    syms = []
    for name, typ, data, _, _ in secs:
        if typ == 2:
            syms = [struct.unpack_from('<IBBHQQ', data, o)[3:5] for o in range(0, len(data), 24)]
    return secs, syms


def stack_sizes(path):
    """LLVM's .stack_sizes of `path`: {(section name, offset): frame size}.
    Each entry is a function's address (a RELA relocation against its
    section or symbol) and a ULEB128 size."""
    secs, syms = elf_sections(path)
    sizes = {}
    for _, typ, rela, _, info in secs:
        if typ != 4 or secs[info][0] != '.stack_sizes':
            continue
        data = secs[info][2]
        for o in range(0, len(rela), 24):
            off, rinfo, add = struct.unpack_from('<QQq', rela, o)
            shndx, value = syms[rinfo >> 32]
            pos, v, shift = off + 8, 0, 0
            while True:
                b = data[pos]
                v |= (b & 0x7f) << shift
                pos, shift = pos + 1, shift + 7
                if not b & 0x80:
                    break
            sizes[(secs[shndx][0], value + add)] = v
    return sizes


def code(path):
    """The bytes of every executable section, by name."""
    secs, _ = elf_sections(path)
    return {n: d for n, typ, d, _, _ in secs if typ == 1 and n.startswith('.text')}


def kernel_tree(path):
    d = os.path.dirname(os.path.abspath(path))
    while d != '/' and not os.path.exists(os.path.join(d, '.config')):
        d = os.path.dirname(d)
    return None if d == '/' else d


def rebuild_with_stack_sizes(obj, tmp):
    """Build `obj` again by the commands Kbuild recorded for it, into
    `tmp`, with the frame sizes emitted: rustc's -Zemit-stack-sizes, and
    clang's -fstack-size-section where clang compiles the crate's bitcode
    linked with the C helpers' (CONFIG_RUST_INLINE_HELPERS, the bench
    kernel).  Returns the new object's path."""
    tree = kernel_tree(obj)
    cmdfile = os.path.join(os.path.dirname(obj), '.%s.cmd' % os.path.basename(obj))
    if not tree or not os.path.exists(cmdfile):
        raise RuntimeError('no kernel build tree or no %s' % cmdfile)
    with open(cmdfile) as f:
        cmd = next((l.split(' := ', 1)[1] for l in f if l.startswith('savedcmd_')), None)
    if not cmd:
        raise RuntimeError('no command in %s' % cmdfile)
    stem = os.path.splitext(os.path.relpath(os.path.abspath(obj), tree))[0]
    new = os.path.join(tmp, os.path.basename(stem))
    parts = []
    for i, part in enumerate(cmd.strip().split(';')):
        # The object's relative paths (not the source's absolute one).
        part = re.sub(r'(^|[\s=])%s\.' % re.escape(stem), r'\g<1>%s.' % new, part.strip())
        if i == 0:
            part = re.sub(r'--out-dir \S+', '--out-dir ' + tmp, part)
            part = re.sub(r'--emit=dep-info=\S+', '--emit=dep-info=' + new + '.d', part)
            part += ' -Zemit-stack-sizes'
        elif re.match(r'clang\S*\s', part):
            part += ' -fstack-size-section'
        parts.append(part)
    env = dict(os.environ, RUSTC_BOOTSTRAP='1')
    r = subprocess.run(['bash', '-c', ' && '.join(parts)], cwd=tree, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(new + '.o'):
        raise RuntimeError('the recorded command failed:\n' + r.stderr[-2000:])
    return new + '.o'


def compare_stack_sizes(g, path, label):
    """Frames by objdump against LLVM's .stack_sizes for the same code."""
    mine, theirs = code(g.objs[0].path), code(path)
    if mine != theirs:
        return ['%s and %s: different code (the object is not what its command builds from '
                'the source now; rebuild it)' % (g.objs[0].path, path)]
    sizes = stack_sizes(path)
    same, diff, missing = 0, [], []
    for f in g.funcs.values():
        if f.key[0] != 0:
            continue
        k = f.key[1:]
        if k not in sizes:
            missing.append(g.pretty[f.name])
        elif f.frame - 8 == sizes[k]:
            same += 1
        else:
            diff.append((f.frame - 8 - sizes[k], g.pretty[f.name], f.frame - 8, sizes[k], f))
    print('%scross-check: %d functions, code identical to the -Zemit-stack-sizes build; '
          'frame - return address == .stack_sizes for %d, larger for %d, smaller for %d, '
          'absent %d' % (label, same + len(diff) + len(missing), same,
                         sum(1 for d in diff if d[0] > 0), sum(1 for d in diff if d[0] < 0),
                         len(missing)))
    for d, n, a, b, f in sorted(diff, key=lambda x: -x[0]):
        why = []
        if f.realign:
            why.append('realigned, up to %d' % f.realign)
        why.append('%d pushes, sub %d' % (f.pushes, f.subs))
        print('    %+5d  %s: here %d (%s), LLVM %d' % (d, n, a, '; '.join(why), b))
    bad = ['frame of %s: %d here, less than LLVM\'s %d' % (n, a, b)
           for d, n, a, b, _ in diff if d < 0]
    if missing:
        bad.append('no .stack_sizes entry for %s' % ', '.join(sorted(missing)))
    return bad


def show_path(g, node, path):
    for n in path:
        print('    %5d  %s%s' % (g.own(n), g.name(n), '  [kernel]' if n[0] == 'x' else ''))
    ext = sorted(g.kernel_calls(node).items(), key=lambda kv: (-kv[1], kv[0]))
    if ext:
        print('    %d kernel functions called, deepest entered: %s' % (len(ext), ', '.join(
            '%s at %d' % (g.pretty.get(s, s), v) for s, v in ext[:4])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('objs', nargs='+', metavar='OBJ')
    ap.add_argument('--check', action='store_true', help='exit 1 over --max or unbounded')
    ap.add_argument('--max', type=int, default=1024, help='bytes a root may use (1024)')
    ap.add_argument('--goal', type=int, help='report roots over this many bytes')
    ap.add_argument('--label', default='', help='name of the build, prefixed to the output')
    ap.add_argument('--no-linked', action='store_true', help='read only the objects named')
    ap.add_argument('--extern-cost', type=int, default=0,
                    help='bytes charged to a kernel function past its return address (0)')
    ap.add_argument('--root', action='append', default=[], metavar='LABEL=REGEX')
    ap.add_argument('--assume', action='append', default=[], metavar='CALLER=CALLEE',
                    help='an indirect call in CALLER may go to CALLEE (regexes)')
    ap.add_argument('--frames', action='store_true', help="print every function's frame")
    ap.add_argument('--brief', action='store_true',
                    help='the path and kernel calls of the deepest root only')
    ap.add_argument('--cross-check', action='store_true',
                    help="check the frames against LLVM's (rebuilds the crate in a temp dir)")
    ap.add_argument('--stack-sizes', metavar='OBJ2', help='check them against this build')
    a = ap.parse_args()
    paths = list(a.objs)
    tree = kernel_tree(a.objs[0])
    if tree and not a.no_linked:
        for rel in LINKED:
            p = os.path.join(tree, rel)
            if os.path.exists(p) and os.path.abspath(p) not in map(os.path.abspath, paths):
                paths.append(p)
    g = Graph(paths, a.extern_cost, INDIRECT + [tuple(s.split('=', 1)) for s in a.assume])
    label = a.label + ': ' if a.label else ''
    print('%sobjects: %s' % (label, ', '.join(
        os.path.relpath(p, tree) if tree else p for p in paths)))
    bad = []
    if a.frames:
        for f in sorted(g.funcs.values(), key=lambda f: -f.frame):
            print('%6d  %s  (%s)' % (f.frame, g.pretty[f.name], os.path.basename(paths[f.key[0]])))
    try:
        if a.cross_check:
            with tempfile.TemporaryDirectory() as tmp:
                bad += compare_stack_sizes(g, rebuild_with_stack_sizes(a.objs[0], tmp), label)
        elif a.stack_sizes:
            bad += compare_stack_sizes(g, a.stack_sizes, label)
    except (RuntimeError, OSError) as e:
        bad.append('cross-check: %s' % e)
    shown = len(bad)
    roots = [r + (False,) for r in (tuple(s.split('=', 1)) for s in a.root)] or ROOTS
    results = []
    for rl, rx, optional in roots:
        ks = g.find(rx)
        if len(ks) != 1:
            print('%s%-12s %d functions match%s' % (label, rl, len(ks),
                                                    ' (inlined)' if optional and not ks else ''))
            if not (optional and not ks):
                bad.insert(shown, 'root %s (%s): %d functions match, not 1' % (rl, rx, len(ks)))
                shown += 1
            continue
        node = ('f', ks[0])
        d, path, problems = g.worst(node)
        results.append((d, node, path))
        note = ''
        if d > a.max:
            note = '  OVER the limit of %d' % a.max
            bad.append('%s: %d bytes, over the limit of %d' % (rl, d, a.max))
        elif a.goal is not None and d > a.goal:
            note = '  (over the goal of %d)' % a.goal
        print('%s%-12s %5d bytes%s' % (label, rl, d, note))
        if not a.brief:
            show_path(g, node, path)
        for p in problems:
            print('    problem: %s' % p)
            bad.append('%s: %s' % (rl, p))
    if a.brief and results:
        d, node, path = max(results, key=lambda r: r[0])
        print('%sthe deepest path, %d bytes:' % (label, d))
        show_path(g, node, path)
    if not a.check:
        # Those of the cross-check and the roots' matching: the roots'
        # own are printed with them.
        for b in bad[:shown]:
            print('%sproblem: %s' % (label, b))
    if a.check:
        if bad:
            for b in bad:
                print('%sstack-depth: FAIL: %s' % (label, b), file=sys.stderr)
            return 1
        print('%sstack-depth: every root within %d bytes, no recursion, every indirect call '
              'followed%s' % (label, a.max, ', frames equal to LLVM\'s or above them'
                              if a.cross_check or a.stack_sizes else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
