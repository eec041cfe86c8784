"""Without the libvirt binding (installed without the ``libvirt`` extra,
no python3-libvirt): a command that needs libvirt says what to install in
one line and exits 2; planning a snapshot and ``--version`` still work.
Each in a child Python where ``import libvirt`` fails."""

import os
import subprocess
import sys

import testtools

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..'))
SNAPSHOT = os.path.join(TOP, 'etc', 'examples',
                        'intel-2s-28c-ht.snapshot.json')
# sys.modules['libvirt'] = None makes every ``import libvirt`` fail with
# ImportError, as where no binding is installed.
CHILD = ('import sys; sys.modules["libvirt"] = None; '
         'from nova_pinning_hooks.cmd import {mod}; '
         'sys.exit({mod}.main(sys.argv[1:]))')


def run(mod, *argv):
    proc = subprocess.run(
        [sys.executable, '-c', CHILD.format(mod=mod)] + list(argv),
        capture_output=True, text=True, timeout=60, cwd='/')
    return proc.returncode, proc.stdout, proc.stderr


class TestWithoutBinding(testtools.TestCase):

    def test_live_command_is_one_line_and_2(self):
        code, out, err = run('pinning', '--config-file', os.devnull,
                             'status')
        self.assertEqual((2, ''), (code, out), err)
        self.assertEqual(
            ['nova-pinning: error: the libvirt Python binding is not '
             'installed (no module libvirt): pip install '
             '"nova-pinning-hooks[libvirt]", or the distribution\'s '
             'package (python3-libvirt)'], err.splitlines())

    def test_planning_and_version_need_no_binding(self):
        code, out, err = run('pinning', '--config-file', os.devnull,
                             'plan', '--snapshot', SNAPSHOT)
        self.assertEqual((0, ''), (code, err))
        self.assertIn('node', out)
        for mod in ('pinning', 'isolate'):
            code, out, err = run(mod, '--version')
            self.assertEqual(0, code, err)
            # A release's X.Y.Z, or pbr's dev version of a later commit.
            self.assertRegex(out, r'^\d+\.\d+\.\d+(\.dev\d+)?\n$')
