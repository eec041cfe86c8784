"""``--version`` of every console script: the installed release on
stdout, exit 0, nothing else. Run as an operator runs them: the scripts
pip wrote next to this Python (tox's environment, from the wheel)."""

import configparser
import os
import re
import subprocess
import sys
from importlib import metadata

import testtools

from tests import releases

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..'))


def console_scripts():
    """{name: 'module:func'} of setup.cfg's [entry_points]."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(TOP, 'setup.cfg'))
    lines = cfg['entry_points']['console_scripts'].strip().splitlines()
    return dict((part.strip() for part in line.split('=', 1))
                for line in lines)


class TestVersion(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if os.environ.get('NPH_TEST_INSTALLED') != '1':
            self.skipTest('not under tox: no installed console scripts')

    def test_every_console_script_answers_version(self):
        release = metadata.version('nova-pinning-hooks')
        self.assertTrue(re.fullmatch(releases.expected_version(), release),
                        release)
        installed = {ep.name for ep in metadata.distribution(
            'nova-pinning-hooks').entry_points
            if ep.group == 'console_scripts'}
        scripts = console_scripts()
        self.assertEqual(set(scripts), installed)
        self.assertIn('nova-pinning-isolate', scripts)
        bindir = os.path.dirname(sys.executable)
        for name in sorted(scripts):
            proc = subprocess.run(
                [os.path.join(bindir, name), '--version'],
                capture_output=True, text=True, timeout=60, cwd='/')
            self.assertEqual((0, release + '\n', ''),
                             (proc.returncode, proc.stdout, proc.stderr),
                             name)
