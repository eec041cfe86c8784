"""``nova.compatprobe``: what this Python's nova offers the package,
answered by a child Python (``nova-pinning-status upgrade check``)."""

import json
import os
import subprocess
import sys

import fixtures
import testtools

from nova_pinning_hooks.nova import compat
from tests import fakenova
from tests import nova_releases


def probe(path=None):
    env = dict(os.environ)
    if path is not None:
        env['PYTHONPATH'] = path
    proc = subprocess.run(
        [sys.executable, '-m', 'nova_pinning_hooks.nova.compatprobe'],
        capture_output=True, text=True, timeout=120, cwd='/', env=env)
    return proc.returncode, proc.stdout, proc.stderr


class TestProbe(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path

    def answer(self, **kw):
        top = self.useFixture(fixtures.TempDir()).path  # one nova each
        code, out, err = probe(fakenova.make(top, **kw))
        self.assertEqual(0, code, err)
        self.assertEqual(1, len(out.splitlines()), out)
        return json.loads(out)

    def test_a_nova_with_everything(self):
        newest = nova_releases.newest()
        self.assertEqual({'nova': newest.nova, 'lacking': [], 'tested': True,
                          'tested_releases': [nova_releases.oldest().series,
                                              newest.series]},
                         self.answer())

    def test_each_missing_part_is_named(self):
        self.assertEqual(
            ['LibvirtDriver._get_existing_domain_xml',
             'nova.virt.libvirt.migration.get_updated_guest_xml'],
            self.answer(lacking=('_get_existing_domain_xml',
                                 'get_updated_guest_xml'))['lacking'])

    def test_a_release_outside_the_matrix(self):
        oldest, newest = nova_releases.oldest(), nova_releases.newest()
        self.assertFalse(
            self.answer(version='%d.0.0' % (newest.series + 1))['tested'])
        self.assertFalse(
            self.answer(version='%d.1.0' % (oldest.series - 1))['tested'])
        self.assertTrue(self.answer(version=oldest.nova)['tested'])

    def test_a_driver_that_does_not_import(self):
        got = self.answer(broken='no module named eventlet')
        self.assertEqual(['nova.virt.libvirt (not importable)'],
                         got['lacking'])
        self.assertEqual('ImportError: no module named eventlet',
                         got['error'])

    def test_no_nova(self):
        code, out, err = probe(self.top)  # an empty directory
        self.assertEqual(0, code, err)
        got = json.loads(out)
        self.assertIsNone(got['nova'])
        self.assertIn('nova is not installed in this Python', got['error'])

    def test_what_nova_prints_does_not_spoil_the_answer(self):
        fakenova.make(self.top)
        with open(os.path.join(self.top, 'nova', '__init__.py'), 'w') as f:
            f.write('print("nova says hello")\n')
        code, out, err = probe(self.top)
        self.assertEqual(0, code, err)
        self.assertEqual([], json.loads(out)['lacking'])
        self.assertIn('nova says hello', err)


class TestTested(testtools.TestCase):

    def test_versions(self):
        first = nova_releases.oldest().series
        last = nova_releases.newest().series
        for text, expected in (('%d.0.0' % first, True),
                               ('%d.0.0' % last, True),
                               ('%d.1.0.dev3' % last, True),
                               ('%d.0.0' % (last + 1), False),
                               ('%d.9.9' % (first - 1), False),
                               ('x', False)):
            self.assertEqual(expected, compat.tested(text), text)
