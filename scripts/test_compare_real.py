#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side tests of compare-real.py, on a real object: a small program
built here without frame pointers, whose call sites are read from its
code.  Logs are made the way perf_real.sh prints them (gzip, base64,
object + file offset frames; DWARF caller frames at return address - 1).
The comparison passes the same stacks, a rare step the oracle did not
sample (below 1%), a callee the oracle never sampled (not judged, while
the oracle covers 90% of the steps), an oracle less often complete than
the walk, a stop at the interrupted frame where the CFA is based on a
register the walk does not track (a counted limit) and a kernel message
inside the base64 text, a step to a return address after an indirect
call (which may call the callee itself); it fails a skipped caller, a
wrong return
address, unshifted DWARF frames, too few samples, a walk less often
complete than the oracle, too little the oracle can judge, a changed
object and a missing program."""
import base64
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, 'compare-real.py')
PROG = '/usr/bin/tprog'
SRC = r'''
__attribute__((noipa)) int leaf(int x) { for (int i = 0; i < 100; i++) x = x * 7 + i; return x; }
__attribute__((noipa)) int mid(int x) { return leaf(x) + 1; }
__attribute__((noipa)) int other(int x) { return leaf(x) - 1; }
__attribute__((noipa)) int tailer(int x) { if (x & 1) return leaf(x) + 1; return leaf(x + 2); }
__attribute__((noipa)) int top(int x) { return mid(x) * 3 + other(x) + tailer(x) * 5; }
/* A function whose CFA is based on %rdi from its second instruction on,
   as libc's ____longjmp_chk's is where it restores the registers. */
__asm__(".text\n.globl jumper\n.type jumper,@function\njumper:\n.cfi_startproc\n"
        "nop\n.cfi_def_cfa %rdi, 0\nnop\nret\n.cfi_endproc\n.size jumper, .-jumper\n");
void jumper(void);
/* Two calls through the PLT: one FDE covers every entry of .plt. */
#include <unistd.h>
__attribute__((noipa)) int inner(int x) { return x + (int)getppid(); }
__attribute__((noipa)) int outer(int x) { return inner(x) + (int)getpid(); }
int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 6)
        return outer(argc) * 3;
    if (argc > 5)
        jumper();
    return top(argc) & 1;
}
'''


def syms(path):
    out = {}
    for l in subprocess.run(['nm', '-S', path], capture_output=True, text=True).stdout.splitlines():
        t = l.split()
        if len(t) == 4 and t[2] in 'Tt':
            out[t[3]] = (int(t[0], 16), int(t[1], 16))
    return out


def calls(data, start, size, target):
    """Return addresses of the direct calls to target in [start, start+size)
    (text offsets equal addresses in this small program)."""
    ras = []
    for p in range(start, start + size - 4):
        if data[p] == 0xe8:
            rel = int.from_bytes(data[p + 1:p + 5], 'little', signed=True)
            if p + 5 + rel == target:
                ras.append(p + 5)
    return ras


def plt_entries(path):
    """{function: address} of the PLT entries objdump names."""
    out = {}
    for l in subprocess.run(['objdump', '-d', path], capture_output=True, text=True).stdout.splitlines():
        m = re.match(r'([0-9a-f]+) <(\w+)@plt>:', l)
        if m:
            out[m.group(2)] = int(m.group(1), 16)
    return out


def indirect_call_end(data, start, size):
    for p in range(start, start + size - 5):
        if data[p] == 0xff and data[p + 1] == 0x15:
            return p + 6
    raise AssertionError('no call *disp(%rip) in _start')


class CompareReal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.root = os.path.join(cls.dir, 'root')
        os.makedirs(cls.root + os.path.dirname(PROG))
        src = os.path.join(cls.dir, 't.c')
        with open(src, 'w') as f:
            f.write(SRC)
        exe = cls.root + PROG
        subprocess.run(['gcc', '-O2', '-fomit-frame-pointer', '-o', exe, src], check=True)
        s = syms(exe)
        with open(exe, 'rb') as f:
            data = f.read()
        # .text of a small PIE: file offsets are addresses.
        leaf, mid, other, tailer, top, main, start, jumper = (
            s[n] for n in ('leaf', 'mid', 'other', 'tailer', 'top', 'main', '_start', 'jumper'))
        cls.leaf_pc = leaf[0] + 8
        cls.ra_mid = calls(data, *mid, leaf[0])[0]
        cls.ra_other = calls(data, *other, leaf[0])[0]
        cls.ra_top_mid = calls(data, *top, mid[0])[0]
        cls.ra_top_other = calls(data, *top, other[0])[0]
        cls.ra_main = calls(data, *main, top[0])[0]
        cls.ra_tailer = calls(data, *tailer, leaf[0])[0]
        cls.ra_top_tailer = calls(data, *top, tailer[0])[0]
        cls.tailer_jumps = any(
            (data[q] == 0xe9 and q + 5 + int.from_bytes(data[q + 1:q + 5], 'little', signed=True)
             == leaf[0]) or
            (data[q] == 0xeb and q + 2 + int.from_bytes(data[q + 1:q + 2], 'little', signed=True)
             == leaf[0]) for q in range(tailer[0], tailer[0] + tailer[1]))
        cls.ra_start = indirect_call_end(data, *start)
        cls.tailer_pc = tailer[0] + 1
        cls.jumper_pc = jumper[0] + 1    # after .cfi_def_cfa %rdi, 0
        cls.ra_main_jumper = calls(data, *main, jumper[0])[0]
        cls.not_ra = leaf[0] + 1     # inside leaf's first instruction
        plt = plt_entries(exe)
        inner, outer = s['inner'], s['outer']
        cls.plt_getpid = plt['getpid']
        cls.plt_getppid = plt['getppid']
        cls.ra_outer_getpid = calls(data, *outer, plt['getpid'])[0]
        cls.ra_inner_getppid = calls(data, *inner, plt['getppid'])[0]
        cls.ra_main_outer = calls(data, *main, outer[0])[0]
        cls.exe = exe

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def full(self, via_other=False):
        mid_ra, top_ra = ((self.ra_other, self.ra_top_other) if via_other
                          else (self.ra_mid, self.ra_top_mid))
        return [self.leaf_pc, mid_ra, top_ra, self.ra_main, self.ra_start]

    def block(self, prog, defer, dwarf, session=1, extra=()):
        """perf_real.sh's output for one session of both unwinders: defer
        and dwarf are [(count, [offsets])] of return addresses; the dwarf
        ones are printed - 1, as perf's libdw unwinder reports them."""
        lines = ['O 1 %s' % PROG]
        for kind, stacks in (('D', defer), ('W', dwarf)):
            for n, offs in stacks:
                offs = [offs[0]] + [o - 1 if kind == 'W' else o for o in offs[1:]]
                lines.append('S %s %s %d 0 %d %s' % (kind, prog, n, n if kind == 'D' else 0,
                                                     ' '.join('1+%x' % o for o in offs)))
        lines.append('K L 3 perf_output_begin<deferred_output')
        lines.extend(extra)
        b64 = base64.b64encode(gzip.compress(('\n'.join(lines) + '\n').encode())).decode()
        text = '# REAL %s both: session=%d lost=0 data_bytes=1000 after_their_record=3\n' % (prog, session)
        text += '#### BEGIN real %s both gz.b64\n' % prog
        text += '\n'.join(b64[i:i + 76] for i in range(0, len(b64), 76)) + '\n'
        text += '#### END real %s both\n' % prog
        for mode in ('defer', 'dwarf'):
            text += ('# REAL %s %s: samples=1000 deferred=900 lost=0 data_bytes=100000 '
                     'bytes_per_sample=100 record_s=1 report_s=1 report_ms_per_sample=1\n' % (prog, mode))
        return text

    def md5(self):
        import hashlib
        with open(self.exe, 'rb') as f:
            return '# REAL md5 %s  %s\n' % (hashlib.md5(f.read()).hexdigest(), PROG)

    def run_on(self, defer, dwarf, extra='', programs=('tprog',), edit=None, lines=()):
        text = self.md5() + self.block('tprog', defer, dwarf, extra=lines)
        if edit:
            text = edit(text)
        text += extra
        log = os.path.join(self.dir, 'guest.log')
        with open(log, 'w') as f:
            f.write(text)
        args = [sys.executable, SCRIPT, log, '--root', self.root]
        for p in programs:
            args += ['--program', p]
        r = subprocess.run(args, capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def good(self):
        return [(600, self.full()), (300, self.full(True)), (100, [self.ra_start + 0])]

    def test_same_stacks_pass(self):
        # (The last: a sample at _start's last instruction, one frame.)
        rc, out = self.run_on(self.good(), self.good())
        self.assertEqual(rc, 0, out)
        self.assertIn('100.000%', out)
        self.assertIn('caller frames ending a call instruction: 3600 of 3600', out)

    def test_rare_unsampled_step_passes_and_is_listed(self):
        defer = self.good() + [(5, [self.leaf_pc, self.ra_other, self.ra_top_mid, self.ra_main,
                                    self.ra_start])]
        rc, out = self.run_on(defer, self.good())
        self.assertEqual(rc, 0, out)
        self.assertIn('caller not seen by the oracle', out)
        self.assertIn('tprog:other -> tprog+%#x in tprog:top' % self.ra_top_mid, out)

    def test_kernel_message_inside_base64(self):
        def edit(text):
            i = text.index('#### BEGIN real tprog both')
            j = text.index('\n', text.index('\n', i) + 1) - 10
            return text[:j] + '[   12.345678] random: crng init done\n' + text[j:]
        rc, out = self.run_on(self.good(), self.good(), edit=edit)
        self.assertEqual(rc, 0, out)

    def test_sessions_add_up(self):
        # Two sessions of half the samples each: one comparison.
        half = [(n // 2, st) for n, st in self.good()]
        text = self.md5() + self.block('tprog', half, half) + self.block('tprog', half, half, 2)
        log = os.path.join(self.dir, 'two.log')
        with open(log, 'w') as f:
            f.write(text)
        r = subprocess.run([sys.executable, SCRIPT, log, '--root', self.root, '--program', 'tprog'],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('both in one session (2)', r.stdout)
        self.assertIn('walk       1000 samples', r.stdout)

    def test_samples_not_walked_are_left_out(self):
        # Unwound in place (exiting) or without a record: not the walk's.
        rc, out = self.run_on(self.good(), self.good(), lines=(
            'S I tprog 4 4 0 1+%x 1+%x' % (self.leaf_pc, self.not_ra), 'S N tprog 2 2 0'))
        self.assertEqual(rc, 0, out)
        self.assertIn('2 without a record, 4 unwound in place', out)

    def test_caller_lost_fails(self):
        skip = [self.leaf_pc, self.ra_top_mid, self.ra_main, self.ra_start]
        rc, out = self.run_on(self.good() + [(3, skip)], self.good())
        self.assertEqual(rc, 1, out)
        self.assertIn('3 samples skipping a frame', out)
        self.assertIn('caller lost, skipped tprog:mid', out)

    def test_indirect_call_site_is_not_a_lost_caller(self):
        # leaf returning straight into _start's indirect call (to main):
        # the oracle saw leaf <- mid <- top <- main <- _start, but an
        # indirect call may call leaf itself: not evidence of a lost
        # frame, a step the oracle never saw (rare: passes).
        skip = [self.leaf_pc, self.ra_start]
        rc, out = self.run_on(self.good() + [(3, skip)], self.good())
        self.assertEqual(rc, 0, out)
        self.assertIn('0 samples skipping a frame', out)
        self.assertIn('caller not seen by the oracle', out)
        self.assertIn('after an indirect call', out)

    def test_tail_call_is_not_a_lost_caller(self):
        # tailer calls leaf on one path and tail-jumps to it on the other:
        # the oracle saw only the call; the walk's leaf -> top step (the
        # jump's) skips nothing.
        self.assertTrue(self.tailer_jumps, 'gcc made no tail call in tailer')
        via = [self.leaf_pc, self.ra_tailer, self.ra_top_tailer, self.ra_main, self.ra_start]
        jumped = [self.leaf_pc, self.ra_top_tailer, self.ra_main, self.ra_start]
        rc, out = self.run_on(self.good() + [(3, jumped)], self.good() + [(50, via)])
        self.assertEqual(rc, 0, out)
        self.assertIn('tail call not seen by the oracle', out)
        self.assertIn('0 samples skipping a frame', out)

    def test_plt_entries_are_callees_of_their_own(self):
        # The walk is in getpid@plt, called by outer; the oracle only ever
        # sampled getppid@plt, whose caller inner it saw return to the
        # same place (as libc's realloc@plt and its memcpy stub under
        # _int_realloc, under realloc): keyed by the one FDE of .plt, the
        # walk's right step looked like a lost caller (inner).
        walk = [self.plt_getpid + 6, self.ra_outer_getpid, self.ra_main_outer, self.ra_start]
        other = [self.plt_getppid + 6, self.ra_inner_getppid, self.ra_outer_getpid,
                 self.ra_main_outer, self.ra_start]
        rc, out = self.run_on(self.good() + [(1, walk)], self.good() + [(2, other)])
        self.assertEqual(rc, 0, out)
        self.assertIn('0 samples skipping a frame', out)
        self.assertIn('tprog:plt@%#x -> ' % self.plt_getpid, out)
        self.assertIn('callee never sampled by the oracle', out)

    def test_wrong_return_address_fails(self):
        bad = [self.leaf_pc, self.ra_mid, self.not_ra, self.ra_main, self.ra_start]
        rc, out = self.run_on(self.good() + [(2, bad)], self.good())
        self.assertEqual(rc, 1, out)
        self.assertIn('not a return address', out)

    def test_stack_ending_early_fails(self):
        rc, out = self.run_on(self.good() + [(2, [self.leaf_pc, self.ra_mid])], self.good())
        self.assertEqual(rc, 1, out)
        self.assertIn('2 ending before _start', out)

    def test_unshifted_dwarf_frames_fail(self):
        # DWARF caller frames printed as the return addresses themselves.
        dwarf = [(n, [o[0]] + [x + 1 for x in o[1:]]) for n, o in self.good()]
        rc, out = self.run_on(self.good(), dwarf)
        self.assertEqual(rc, 1, out)
        self.assertIn('not return address - 1', out)

    def test_too_few_samples_fail(self):
        few = [(150, self.full())]
        rc, out = self.run_on(few, self.good())
        self.assertEqual(rc, 1, out)
        self.assertIn('fewer than 200', out)

    def test_walk_less_complete_fails(self):
        cut = [(50, self.full()[:4])]
        rc, out = self.run_on(self.good() + cut, self.good())
        self.assertEqual(rc, 1, out)
        self.assertIn('stacks are complete less often than the oracle', out)

    def test_oracle_less_complete_passes(self):
        # The oracle's own limit (perf's bounded stack copy), the walk's
        # steps all checked against the oracle's other samples.
        cut = [(50, self.full()[:4])]
        rc, out = self.run_on(self.good(), self.good() + cut)
        self.assertEqual(rc, 0, out)
        self.assertIn('not a failure of the walk', out)

    def test_unsampled_callee_is_not_judged(self):
        # tailer is never sampled by the oracle: its step is the oracle's
        # silence, counted as not covered, not as agreeing or not.
        alone = [self.tailer_pc, self.ra_top_tailer, self.ra_main, self.ra_start]
        rc, out = self.run_on(self.good() + [(20, alone)], self.good())
        self.assertEqual(rc, 0, out)
        self.assertIn('callee never sampled by the oracle', out)
        self.assertIn('of the 3640 whose callee the oracle sampled 100.000%', out)
        self.assertIn('covered 99.45%', out)
        # ... but a comparison the oracle can judge too little of fails.
        rc, out = self.run_on(self.good() + [(3000, alone)], self.good())
        self.assertEqual(rc, 1, out)
        self.assertIn('sampled too few of the table walk\'s callees', out)

    def test_register_cfa_at_interrupted_frame_is_a_counted_limit(self):
        # The walk stops at jumper, its only frame, where the CFA is
        # rdi+0: the oracle (all registers) has jumper's caller.
        oracle = self.good() + [(40, [self.jumper_pc, self.ra_main_jumper, self.ra_start])]
        rc, out = self.run_on(self.good() + [(2, [self.jumper_pc])], oracle)
        self.assertEqual(rc, 0, out)
        self.assertIn('2 at the interrupted frame where the CFA is based on a register', out)
        self.assertIn('limit: 2 at tprog', out)
        self.assertIn('CFA = rdi+0 there', out)
        # The same stop below the interrupted frame is a lost caller.
        rc, out = self.run_on(self.good() + [(2, [self.leaf_pc, self.jumper_pc + 1])], oracle)
        self.assertEqual(rc, 1, out)
        self.assertIn('the table walk lost callers the oracle found', out)

    def test_changed_object_fails(self):
        rc, out = self.run_on(self.good(), self.good(),
                              edit=lambda t: re.sub('md5 [0-9a-f]{32}', 'md5 ' + '0' * 32, t))
        self.assertEqual(rc, 1, out)
        self.assertIn('the guest ran md5', out)

    def test_missing_program_fails(self):
        rc, out = self.run_on(self.good(), self.good(), programs=('tprog', 'gzip'))
        self.assertEqual(rc, 1, out)
        self.assertIn('gzip:\n  MISSING: the session of both unwinders', out)


if __name__ == '__main__':
    unittest.main()
