#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side tests of stack-depth.py on small objects assembled here (GNU
as): frames from pushes, `sub`, `add $-N`, `lea -N(%rsp),%rsp` and realignment
(and `lea N(%rsp),%rsp` releasing); the worst path
through direct calls, calls the assembler resolved itself, tail calls and
kernel functions; and --check failing on a path over the limit, on
recursion, on an indirect call with no known target, on a variable-size
frame and on a missing root, and passing otherwise."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

# leaf: 8 + 8 (rbp) + 32 = 48.  mid: 8 + 8 + 8 + 0x100 = 280, calls leaf.
# top: 8 + 8 + 8 = 24, calls mid and the kernel's memcpy: 24 + 280 + 48.
# tail: 8 + 8 = 16 after popping, jumps to mid: its depth is mid's.
# big: 8 + 8 + 0x80 (add $-0x80) + 56 (and $-64) = 200.
# local_caller calls local_fn (static, resolved by the assembler: no
# relocation): 8 + 8 = 16, + local_fn's 8 + 8 + 0x40 = 80.
# leas: 8 + 8 + 0x30 (lea -0x30(%rsp),%rsp), released by lea 0x30(%rsp),
# calls leaf: 64 + 48.
BASE = '''
	.text
	.globl leaf, mid, top, tail, big, local_caller, leas
leaf:	push %rbp
	mov %rsp,%rbp
	sub $0x20,%rsp
	add $0x20,%rsp
	pop %rbp
	ret
mid:	push %rbp
	mov %rsp,%rbp
	push %rbx
	sub $0x100,%rsp
	call leaf
	add $0x100,%rsp
	pop %rbx
	pop %rbp
	ret
top:	push %rbp
	mov %rsp,%rbp
	push %r12
	call mid
	call memcpy
	pop %r12
	pop %rbp
	ret
tail:	push %rbp
	mov %rsp,%rbp
	pop %rbp
	jmp mid
big:	push %rbp
	mov %rsp,%rbp
	and $-64,%rsp
	add $-0x80,%rsp
	mov %rbp,%rsp
	pop %rbp
	ret
local_fn:
	push %rbp
	mov %rsp,%rbp
	sub $0x40,%rsp
	leave
	ret
local_caller:
	push %rbp
	mov %rsp,%rbp
	call local_fn
	pop %rbp
	ret
leas:	push %rbp
	mov %rsp,%rbp
	lea -0x30(%rsp),%rsp
	call leaf
	lea 0x30(%rsp),%rsp
	pop %rbp
	ret
'''

RECURSIVE = '''
	.text
	.globl a, b
a:	push %rbp
	call b
	pop %rbp
	ret
b:	push %rbp
	call a
	pop %rbp
	ret
'''

INDIRECT = '''
	.text
	.globl ind
ind:	push %rbp
	call *%rax
	pop %rbp
	ret
'''

ALLOCA = '''
	.text
	.globl dyn
dyn:	push %rbp
	mov %rsp,%rbp
	sub %rax,%rsp
	mov %rbp,%rsp
	pop %rbp
	ret
'''


class StackDepth(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def obj(self, text, name='t'):
        s = os.path.join(self.tmp.name, name + '.s')
        o = os.path.join(self.tmp.name, name + '.o')
        with open(s, 'w') as f:
            f.write(text)
        subprocess.run(['as', '--64', '-o', o, s], check=True)
        return o

    def run_on(self, objs, *args):
        r = subprocess.run([sys.executable, os.path.join(HERE, 'stack-depth.py'), '--no-linked']
                           + list(args) + objs, capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr

    def depth(self, out, label):
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == label and len(f) > 2 and f[2] == 'bytes':
                return int(f[1])
        self.fail('no figure for %s in:\n%s' % (label, out))

    def test_frames_and_paths(self):
        o = self.obj(BASE)
        rc, out, _ = self.run_on([o], '--root', 'leaf=leaf', '--root', 'mid=mid',
                                 '--root', 'top=top', '--root', 'tail=tail', '--root', 'big=big',
                                 '--root', 'local=local_caller', '--root', 'leas=leas')
        self.assertEqual(rc, 0)
        self.assertEqual(self.depth(out, 'leaf'), 48)
        self.assertEqual(self.depth(out, 'mid'), 280 + 48)
        self.assertEqual(self.depth(out, 'top'), 24 + 280 + 48)
        # The tail call's frame is gone when mid runs.
        self.assertEqual(self.depth(out, 'tail'), 280 + 48)
        self.assertEqual(self.depth(out, 'big'), 8 + 8 + 0x80 + 56)
        self.assertEqual(self.depth(out, 'local'), 16 + 80)
        # An allocation by lea, and its release by lea (not a variable
        # frame).
        self.assertEqual(self.depth(out, 'leas'), 8 + 8 + 0x30 + 48)
        self.assertIn('memcpy at %d' % (24 + 8), out)

    def test_check_limit(self):
        o = self.obj(BASE)
        rc, _, err = self.run_on([o], '--check', '--max', '351', '--root', 'top=top')
        self.assertEqual(rc, 1)
        self.assertIn('352 bytes, over the limit of 351', err)
        rc, out, _ = self.run_on([o], '--check', '--max', '352', '--root', 'top=top')
        self.assertEqual(rc, 0, out)

    def test_extern_cost(self):
        o = self.obj(BASE)
        rc, out, _ = self.run_on([o], '--extern-cost', '1000', '--root', 'top=top')
        self.assertEqual(self.depth(out, 'top'), 24 + 8 + 1000)

    def test_recursion_fails(self):
        rc, _, err = self.run_on([self.obj(RECURSIVE)], '--check', '--root', 'a=a')
        self.assertEqual(rc, 1)
        self.assertIn('recursion: a -> b -> a', err)

    def test_indirect_call(self):
        o = self.obj(INDIRECT)
        rc, _, err = self.run_on([o], '--check', '--root', 'i=ind')
        self.assertEqual(rc, 1)
        self.assertIn('indirect call', err)
        # Named, it is followed.
        o2 = self.obj(BASE, 'base')
        rc, out, _ = self.run_on([o, o2], '--check', '--root', 'i=ind', '--assume', 'ind=mid')
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.depth(out, 'i'), 16 + 280 + 48)

    def test_variable_frame_fails(self):
        rc, _, err = self.run_on([self.obj(ALLOCA)], '--check', '--root', 'd=dyn')
        self.assertEqual(rc, 1)
        self.assertIn('variable stack allocation', err)

    def test_missing_root_fails(self):
        rc, _, err = self.run_on([self.obj(BASE)], '--check', '--root', 'x=nosuch')
        self.assertEqual(rc, 1)
        self.assertIn('0 functions match', err)

    def test_objects_linked_together(self):
        # A global defined in another object is followed into it.
        o1 = self.obj(BASE, 'one')
        o2 = self.obj('\t.text\n\t.globl caller\n'
                      'caller:\tpush %rbp\n\tcall top\n\tpop %rbp\n\tret\n', 'two')
        rc, out, _ = self.run_on([o2, o1], '--check', '--max', '4096', '--root', 'c=caller')
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.depth(out, 'c'), 16 + 352)


if __name__ == '__main__':
    unittest.main()
