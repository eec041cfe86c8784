"""RELEASES and tools/releases.py: which commit is which release, and
the tags pbr and reno read, made from it (a tag does not travel with
the project's commits)."""

import os
import subprocess
import tempfile

import testtools

from tests import releases


def git(top, *args):
    return subprocess.run(['git', '-C', top] + list(args), check=True,
                          capture_output=True, text=True,
                          timeout=60).stdout.strip()


class TestTheList(testtools.TestCase):

    def test_one_point_zero_is_the_release_1_0_merge(self):
        found = dict(releases.lib.read(releases.TOP))
        self.assertEqual('8f6371f15b5ab2eb5cde74e8da58453e7dabfb47',
                         found['1.0.0'])

    def test_every_release_is_in_the_history(self):
        if git(releases.TOP, 'rev-parse',
               '--is-shallow-repository') == 'true':
            self.skipTest('a shallow clone')
        listed = [v for v, _c in releases.lib.read(releases.TOP)]
        self.assertEqual(listed,
                         [v for v, _c in releases.lib.resolve(releases.TOP)])


class TestTags(testtools.TestCase):
    """On a throwaway repository, as CI's clone is: no tags."""

    def setUp(self):
        super().setUp()
        self.top = tempfile.mkdtemp(prefix='nph-releases.')
        self.addCleanup(subprocess.run, ['rm', '-rf', self.top])
        git(self.top, 'init', '-q')
        git(self.top, 'config', 'user.email', 't@example.com')
        git(self.top, 'config', 'user.name', 't')
        self.commits = [self.commit('first', '1.0.0\n')]

    def commit(self, subject, releases_text=None):
        if releases_text is not None:
            with open(os.path.join(self.top, 'RELEASES'), 'w') as f:
                f.write(releases_text)
        git(self.top, 'add', '-A')
        git(self.top, 'commit', '-q', '--allow-empty', '-m', subject)
        return git(self.top, 'rev-parse', 'HEAD')

    def tags(self):
        return {t: git(self.top, 'rev-parse', t + '^{commit}')
                for t in git(self.top, 'tag').split()}

    def test_a_line_alone_is_the_commit_that_added_it(self):
        self.commit('work')
        release = self.commit('Release 1.1.0', '1.0.0\n1.1.0\n')
        self.commit('later')
        self.assertEqual(['1.0.0', '1.1.0'], releases.lib.tag(self.top))
        self.assertEqual({'1.0.0': self.commits[0], '1.1.0': release},
                         self.tags())
        self.assertEqual([], releases.lib.tag(self.top))  # made once

    def test_a_line_with_its_commit(self):
        second = self.commit('work')
        self.commit('record', '1.0.0\n1.1.0 %s\n' % second)
        releases.lib.tag(self.top)
        self.assertEqual(second, self.tags()['1.1.0'])

    def test_a_release_after_head_is_not_tagged(self):
        self.commit('Release 1.1.0', '1.0.0\n1.1.0\n')
        git(self.top, 'checkout', '-q', self.commits[0])
        self.assertEqual(['1.0.0'], releases.lib.tag(self.top))

    def test_a_tag_elsewhere_is_refused_not_moved(self):
        other = self.commit('work')
        git(self.top, 'tag', '1.0.0', other)
        error = self.assertRaises(releases.lib.ReleaseError,
                                  releases.lib.tag, self.top)
        self.assertIn('git tag -d 1.0.0', str(error))
        self.assertEqual(other, self.tags()['1.0.0'])

    def test_versions_must_increase(self):
        self.commit('bad', '1.1.0\n1.0.0\n')
        self.assertRaises(releases.lib.ReleaseError, releases.lib.read,
                          self.top)
