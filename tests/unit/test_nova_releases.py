"""tools/nova-releases, the one list of supported nova releases, against
everything that derives from it and cannot read it itself: tox.ini (its
release parts are written from the list), the constraints files, the
package's ``compat.TESTED``, and the shell reader tools/nova-releases.sh
(which must answer as the Python reader does).

Each check fails naming what to do: a release added to the list and
nothing else fails here, never later in a tox run that silently left it
out.
"""

import os
import subprocess

import fixtures
import testtools

from nova_pinning_hooks.nova import compat
from tests import nova_releases

TOP = nova_releases.TOP
SHELL_LIB = os.path.join(TOP, 'tools', 'nova-releases.sh')


def shell(*words, env=None):
    """The shell reader's answer to one of its functions."""
    proc = subprocess.run(
        ['bash', '-c', '. "$0"; "$@"', SHELL_LIB] + list(words),
        capture_output=True, text=True, timeout=30,
        env=dict(os.environ, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


class TestTheList(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.releases = nova_releases.releases()

    def test_each_release_is_complete(self):
        for r in self.releases:
            self.assertEqual(str(r.series), r.nova.split('.')[0], r)
            self.assertTrue(r.placement, r)
            self.assertTrue(os.path.isfile(r.constraints),
                            'nova %d: no %s (CONTRIBUTING.rst, "A new nova '
                            'release")' % (r.series, r.constraints))

    def test_every_constraints_file_is_a_release(self):
        listed = {os.path.basename(r.constraints) for r in self.releases}
        present = {f for f in os.listdir(os.path.join(TOP, 'tools',
                                                      'constraints'))
                   if f.startswith('nova-')}
        self.assertEqual(set(), present - listed,
                         'constraints of no release in tools/nova-releases')

    def test_the_cloud_and_kolla_run_the_newest(self):
        # cloud.sh's default series is the newest: its services need
        # their versions.
        self.assertTrue(nova_releases.newest().has('cloud'),
                        'the newest release needs cloud= (keystone, glance, '
                        'neutron of its series) for tools/cloud.sh')
        # run-tests.sh's default cloud has nph-compute2 in kolla's layout,
        # which cloud.sh runs only on the kolla line's series (seen on
        # the recipe's trial: kolla left on 33 with 34 the newest, the
        # default run's `cloud.sh up` would die).
        self.assertEqual(
            [nova_releases.newest().series],
            [r.series for r in nova_releases.with_flag('kolla')],
            'the newest release of tools/nova-releases, and it alone, is '
            'kolla (the release kolla-images.sh puts in the images)')

    def test_the_package_says_it_was_tested_on_the_list(self):
        self.assertEqual(
            (nova_releases.oldest().series, nova_releases.newest().series),
            compat.TESTED,
            'nova_pinning_hooks/nova/compat.py TESTED: (oldest, newest) of '
            'tools/nova-releases')


class TestToxIni(testtools.TestCase):

    def test_tox_ini_is_what_the_list_writes(self):
        with open(os.path.join(TOP, 'tox.ini')) as f:
            text = f.read()
        self.assertEqual(
            text, nova_releases.lib.tox_ini(text, nova_releases.releases()),
            'tox.ini differs from tools/nova-releases: python3 '
            'tools/nova_releases.py tox-ini --write')

    def test_a_release_taken_out_changes_tox_ini(self):
        # Not vacuous: the check above sees a release more or less.
        with open(os.path.join(TOP, 'tox.ini')) as f:
            text = f.read()
        rs = nova_releases.releases()
        fewer = nova_releases.lib.tox_ini(text, rs[:-1])
        last = rs[-1]
        self.assertNotEqual(text, fewer)
        self.assertNotIn('nova==%s' % last.nova, fewer)
        self.assertIn('nova-{%d,%d}' % (rs[0].series, rs[-2].series), fewer)
        self.assertIn('[testenv:nova-functional-{%s}]'
                      % ','.join(str(r.series) for r in rs[:-1]), fewer)
        # ... and written back, the same text again.
        self.assertEqual(text, nova_releases.lib.tox_ini(fewer, rs))


class TestShellReader(testtools.TestCase):

    def answer(self, *words, env=None):
        code, out, err = shell(*words, env=env)
        self.assertEqual(0, code, err)
        return out.split()

    def test_as_the_python_reader(self):
        rs = nova_releases.releases()
        self.assertEqual([str(r.series) for r in rs],
                         self.answer('nova_releases'))
        self.assertEqual([str(rs[0].series)], self.answer('nova_oldest'))
        self.assertEqual([str(rs[-1].series)], self.answer('nova_newest'))
        for r in rs:
            n = str(r.series)
            self.assertEqual([r.nova], self.answer('nova_pypi_version', n))
            self.assertEqual(r.words('pip'), self.answer('nova_pip', n))
            self.assertEqual([r.placement],
                             self.answer('nova_fact', n, 'placement'))
        for flag in ('kolla', 'cloud', 'wsgi-script', 'moves-shared-set'):
            self.assertEqual(
                [str(r.series) for r in nova_releases.with_flag(flag)],
                self.answer('nova_with', flag), flag)
        self.assertEqual(
            [str(nova_releases.before(rs[-1].series).series)],
            self.answer('nova_before', str(rs[-1].series)))

    def test_a_series_not_in_the_list_is_an_error(self):
        code, out, err = shell('nova_pypi_version', '1')
        self.assertEqual((2, ''), (code, out))
        self.assertIn("no nova series '1'", err)

    def test_another_list(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova-releases')
        with open(path, 'w') as f:
            f.write('# a comment\n\n40 nova=40.1.0 placement=1 kolla\n'
                    '41 nova=41.0.0 placement=2 pip=a<1,b\n')
        env = {'NOVA_RELEASES_FILE': path}
        self.assertEqual(['40', '41'], self.answer('nova_releases', env=env))
        self.assertEqual(['a<1', 'b'], self.answer('nova_pip', '41', env=env))
        self.assertEqual(['40'], self.answer('nova_with', 'kolla', env=env))
        self.assertEqual([], self.answer('nova_fact', '40', 'pip', env=env))
        rs = nova_releases.lib.releases(path)
        self.assertEqual([40, 41], [r.series for r in rs])
        self.assertEqual(['a<1', 'b'], rs[1].words('pip'))
