#!/usr/bin/env python3
"""The package's releases, read from RELEASES, and the git tags made
from them (Python, standard library only).

    python3 tools/releases.py list   # VERSION COMMIT, oldest first
    python3 tools/releases.py tag    # make the missing tags
    python3 tools/releases.py last   # the newest release's version

pbr (the version of a build) and reno (the release notes, grouped by
release) read git tags, and a tag does not travel with the project's
commits: CI builds a fresh clone of the commits of main. So RELEASES,
a committed file, says which commit is which release, and ``tag`` makes
the tags from it before pbr or reno look (setup.py, doc/ext): the tag
X.Y.Z on the release's commit. A build of that commit is X.Y.Z; a build
of any later commit is pbr's dev version of the next one
(X.Y.Z+1.devN); a tree with no git (an unpacked sdist) is not touched:
pbr reads the version its metadata records.

Invariants: a release is found in HEAD's history or not at all (a
release after HEAD's commit is not a release of it, and gets no tag);
a tag that exists is never moved: one that names another commit than
RELEASES says is an error, with the command that removes it.
"""

import os
import re
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
LIST = 'RELEASES'
_LINE = re.compile(r'^(\d+\.\d+\.\d+)(?:\s+([0-9a-f]{40}))?$')


class ReleaseError(Exception):
    """RELEASES or the tags disagree with the history."""


def _git(top, *args, check=True):
    proc = subprocess.run(['git', '-C', top] + list(args),
                          capture_output=True, text=True, timeout=120,
                          check=False)
    if check and proc.returncode:
        raise ReleaseError('git %s: %s' % (' '.join(args),
                                           proc.stderr.strip()))
    return proc


def read(top=TOP):
    """[(version, commit or None)] of RELEASES, oldest first."""
    releases = []
    with open(os.path.join(top, LIST)) as f:
        for n, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            match = _LINE.match(line)
            if not match:
                raise ReleaseError('%s line %d: not "X.Y.Z [COMMIT]": %r'
                                   % (LIST, n, line))
            releases.append(match.groups())
    versions = [tuple(int(p) for p in v.split('.')) for v, _c in releases]
    if versions != sorted(set(versions)):
        raise ReleaseError('%s: versions not increasing' % LIST)
    return releases


def in_git(top=TOP):
    """Whether ``top`` is the top of a git work tree."""
    if not os.path.exists(os.path.join(top, '.git')):
        return False
    return _git(top, 'rev-parse', 'HEAD', check=False).returncode == 0


def _added_by(top, version):
    """The commit of HEAD's history that added the line ``version``."""
    out = _git(top, 'log', '--format=%H',
               '-G', '^%s$' % re.escape(version), 'HEAD', '--',
               LIST).stdout.split()
    return out[-1] if out else None  # log is newest first


def resolve(top=TOP):
    """[(version, commit)] of the releases in HEAD's history."""
    found = []
    for version, commit in read(top):
        if commit is None:
            commit = _added_by(top, version)
            if commit is None:
                continue
        elif _git(top, 'merge-base', '--is-ancestor', commit, 'HEAD',
                  check=False).returncode:
            continue  # not in this history (or a shallow clone's)
        found.append((version, commit))
    return found


def tag(top=TOP):
    """Make the tag of each release in HEAD's history that has none;
    returns the tags made."""
    made = []
    for version, commit in resolve(top):
        have = _git(top, 'rev-parse', '-q', '--verify',
                    'refs/tags/%s^{commit}' % version, check=False)
        if have.returncode == 0:
            if have.stdout.strip() != commit:
                raise ReleaseError(
                    'tag %s is on %s, but RELEASES makes %s the release: '
                    'git tag -d %s' % (version, have.stdout.strip()[:12],
                                       commit[:12], version))
            continue
        _git(top, 'tag', version, commit)
        made.append(version)
    return made


def expected(top=TOP):
    """A regular expression of the version a build of HEAD makes: the
    release's, on a release's commit; after it, pbr's dev version of the
    next patch release (the count of commits is pbr's)."""
    version, commit = resolve(top)[-1]
    head = _git(top, 'rev-parse', 'HEAD').stdout.strip()
    if head == commit:
        return re.escape(version)
    major, minor, patch = (int(p) for p in version.split('.'))
    return r'%d\.%d\.%d\.dev\d+' % (major, minor, patch + 1)


def last(top=TOP):
    """The newest release's version (the one the install pages pin)."""
    return read(top)[-1][0]


def main(argv):
    try:
        return _main(argv)
    except ReleaseError as exc:
        print('releases.py: %s' % exc, file=sys.stderr)
        return 1


def _main(argv):
    if argv == ['list']:
        for version, commit in resolve():
            print(version, commit)
    elif argv == ['tag']:
        for version in tag():
            print('tagged', version)
    elif argv == ['last']:
        print(last())
    else:
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
