"""bindep.txt says what tools/ install from the distribution: its
profile-less lines are tools/setup-host.sh's list, its ``cloud`` lines
tools/cloud.sh's extra packages, so ``tox -e bindep`` on a machine the
README's commands set up lists nothing missing."""

import os
import re

import testtools

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def bindep():
    """{profile or '': {package}} of bindep.txt (platform: selectors
    are not profiles)."""
    found = {}
    with open(os.path.join(TOP, 'bindep.txt')) as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            match = re.fullmatch(r'(\S+)(?:\s+\[([^\]]*)\])?', line)
            assert match, line
            name, selectors = match.groups()
            profiles = [s for s in (selectors or '').split()
                        if not s.startswith('platform:')]
            for profile in profiles or ['']:
                found.setdefault(profile, set()).add(name)
    return found


def shell_words(path, pattern):
    with open(os.path.join(TOP, path)) as f:
        text = re.sub(r'(?m)^\s*#.*$|\s#[^\n]*', '', f.read())
    match = re.search(pattern, text, re.S)
    assert match, (path, pattern)
    return set(match.group(1).split())


class TestBindep(testtools.TestCase):

    def test_default_is_setup_hosts_list(self):
        self.assertEqual(
            shell_words('tools/setup-host.sh', r'\npackages=\((.*?)\)'),
            bindep()[''])

    def test_cloud_is_cloud_shs_extra(self):
        self.assertEqual(
            shell_words('tools/cloud/debian.sh',
                        r'NPH_EXTRA_PACKAGES="([^"]*)"'),
            bindep()['cloud'])

    def test_load_is_stress_ng(self):
        self.assertEqual({'stress-ng'}, bindep()['load'])
        with open(os.path.join(TOP, 'tools', 'run-tests.sh')) as f:
            self.assertIn('NPH_EXTRA_PACKAGES:-} stress-ng', f.read())
