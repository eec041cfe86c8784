"""The package under test is the installed wheel, at the version a build
of this commit makes, as operators get it (tox.ini: ``package =
wheel``): the release's on its commit (RELEASES), a dev version after
it."""

import json
import os
import re
import sys
from importlib import metadata

import testtools

import nova_pinning_hooks
from tests import releases

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


class TestInstalledFromWheel(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if os.environ.get('NPH_TEST_INSTALLED') != '1':
            self.skipTest('not under tox (NPH_TEST_INSTALLED unset)')

    def test_package_is_imported_from_the_installed_wheel(self):
        path = os.path.abspath(nova_pinning_hooks.__file__)
        self.assertNotEqual(
            os.path.join(TOP, 'nova_pinning_hooks', '__init__.py'), path,
            'imported from the checkout')
        self.assertIn(os.sep + 'site-packages' + os.sep, path)
        # The installed distribution's record, not the egg-info that the
        # wheel's build leaves in the checkout (also on sys.path here).
        dist, = (d for d in metadata.distributions(
            name='nova-pinning-hooks',
            path=[p for p in sys.path
                  if os.path.abspath(p or os.curdir) != TOP]))
        self.assertEqual(
            os.path.realpath(path),
            os.path.realpath(dist.locate_file(
                'nova_pinning_hooks/__init__.py')))
        # pip records where it installed from (PEP 610): a wheel file is
        # an archive; an editable or source-tree install is a directory.
        origin = json.loads(dist.read_text('direct_url.json'))
        self.assertIn('archive_info', origin, origin)
        self.assertTrue(origin['url'].endswith('.whl'), origin)
        self.assertEqual('Wheel-Version: 1.0',
                         dist.read_text('WHEEL').splitlines()[0])

    def test_version_is_what_the_commit_builds(self):
        installed = metadata.version('nova-pinning-hooks')
        self.assertTrue(re.fullmatch(releases.expected_version(), installed),
                        '%s, not %s' % (installed,
                                        releases.expected_version()))
        from nova_pinning_hooks.observe import version
        self.assertEqual(installed, version.version_string())

    def test_libvirt_python_only_in_the_extra(self):
        reqs = metadata.requires('nova-pinning-hooks')
        libvirt = [r for r in reqs if r.startswith('libvirt-python')]
        self.assertEqual(['libvirt-python>=6.0.0; extra == "libvirt"'],
                         libvirt)
