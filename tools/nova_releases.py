#!/usr/bin/env python3
"""The supported nova releases, read from tools/nova-releases (Python).

    python3 tools/nova_releases.py list             # oldest first
    python3 tools/nova_releases.py tox-ini          # tox.ini, as written
    python3 tools/nova_releases.py tox-ini --write  # ... in place

tox cannot read a file, so tox.ini's release parts (``envlist``'s
nova-N and nova-functional-N, the factors of ``[testenv:nova-{...}]`` and
``[testenv:nova-functional-{...}]``, and ``[nova-release]``'s factor
lines) are written from the list by ``tox_ini``;
tests/unit/test_nova_releases.py fails when tox.ini is not what it
writes. tools/check-dist.py and the tests import this module; shell
scripts read the same list through tools/nova-releases.sh.

Invariants: the list is the only input, read whole on each call; the
releases come oldest first, their series strictly increasing; a series
not in the list raises ``KeyError``, never answers with a default;
``tox_ini`` changes only the lines named above, everything else of
tox.ini stays byte for byte.
"""

import dataclasses
import os
import re
import sys
import typing

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
LIST = os.path.join(TOP, 'tools', 'nova-releases')
TOX_INI = os.path.join(TOP, 'tox.ini')


@dataclasses.dataclass(frozen=True)
class Release:
    """One line of the list: a series and its facts (flags map to '')."""

    series: int
    facts: typing.Mapping[str, str]

    def has(self, flag: str) -> bool:
        return flag in self.facts

    def words(self, key: str) -> list[str]:
        """A comma-separated fact as a list (none: [])."""
        value = self.facts.get(key, '')
        return value.split(',') if value else []

    @property
    def nova(self) -> str:
        return self.facts['nova']

    @property
    def placement(self) -> str:
        return self.facts['placement']

    @property
    def constraints(self) -> str:
        return os.path.join(TOP, 'tools', 'constraints',
                            'nova-%d.txt' % self.series)


def releases(path: str = LIST) -> tuple[Release, ...]:
    out = []
    with open(path) as f:
        for line in f:
            fields = line.split('#', 1)[0].split()
            if not fields:
                continue
            facts = {}
            for word in fields[1:]:
                key, _, value = word.partition('=')
                facts[key] = value
            out.append(Release(int(fields[0]), facts))
    series = [r.series for r in out]
    if not series or series != sorted(set(series)):
        raise ValueError('%s: the series are not strictly increasing: %s'
                         % (path, series))
    return tuple(out)


def oldest() -> Release:
    return releases()[0]


def newest() -> Release:
    return releases()[-1]


def release(series: int) -> Release:
    for r in releases():
        if r.series == int(series):
            return r
    raise KeyError('no nova series %s in %s' % (series, LIST))


def before(series: int) -> Release:
    """The release before ``series`` in the list."""
    rs = releases()
    i = rs.index(release(series))
    if i == 0:
        raise KeyError('nova series %s is the oldest' % series)
    return rs[i - 1]


def with_flag(flag: str) -> tuple[Release, ...]:
    return tuple(r for r in releases() if r.has(flag))


def ci() -> tuple[Release, ...]:
    """The releases CI's default run tests: the oldest and the newest."""
    return (oldest(), newest())


def _factors(rs: typing.Iterable[Release]) -> str:
    return '{%s}' % ','.join(str(r.series) for r in rs)


def _release_lines(rs: typing.Sequence[Release]) -> tuple[list[str],
                                                          list[str]]:
    """[nova-release]'s factor lines: deps, env_dir."""
    deps, dirs = [], []
    for r in rs:
        n = r.series
        deps.append('    %d: -c{toxinidir}/tools/constraints/nova-%d.txt'
                    % (n, n))
        deps.append('    %d: nova==%s' % (n, r.nova))
        deps.append('    %d: openstack-placement==%s' % (n, r.placement))
        deps += ['    %d: %s' % (n, req) for req in r.words('pip')]
        dirs.append('    %d: {toxworkdir}/nova-%d' % (n, n))
    return deps, dirs


def tox_ini(text: str, rs: typing.Sequence[Release]) -> str:
    """tox.ini's ``text`` with its release parts written from ``rs``."""
    both = _factors((rs[0], rs[-1]))
    every = _factors(rs)
    text = re.sub(r'nova-\{[\d,]*\},nova-functional-\{[\d,]*\}',
                  'nova-%s,nova-functional-%s' % (both, both), text, count=1)
    text = re.sub(r'^\[testenv:nova-\{[\d,]*\}\]$',
                  '[testenv:nova-%s]' % every, text, count=1, flags=re.M)
    text = re.sub(r'^\[testenv:nova-functional-\{[\d,]*\}\]$',
                  '[testenv:nova-functional-%s]' % every, text, count=1,
                  flags=re.M)
    lines = text.split('\n')
    start = lines.index('[nova-release]')
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].startswith('['))
    # The section's factor lines (a number, a colon) are the list's: all
    # of them are dropped and written again after the line they follow.
    section = [ln for ln in lines[start:end]
               if not re.match(r'^\s+\d+: ', ln)]
    deps, dirs = _release_lines(rs)
    out = []
    for ln in section:
        out.append(ln)
        if ln == '    oslotest':
            out += deps
        elif ln == 'env_dir =':
            out += dirs
    return '\n'.join(lines[:start] + out + lines[end:])


def main(argv: list[str]) -> int:
    if argv[:1] == ['list']:
        print('\n'.join(str(r.series) for r in releases()))
        return 0
    if argv[:1] == ['tox-ini'] and argv[1:] in ([], ['--write']):
        with open(TOX_INI) as f:
            old = f.read()
        new = tox_ini(old, releases())
        if argv[1:] == ['--write']:
            if new != old:
                with open(TOX_INI, 'w') as f:
                    f.write(new)
            print('tox.ini: %s' % ('written' if new != old else 'unchanged'))
        else:
            sys.stdout.write(new)
        return 0
    print('usage: nova_releases.py list | tox-ini [--write]', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
