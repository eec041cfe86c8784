"""An operator's page carries no measurement log (issue 50).

The operator's pages (doc/source/install, admin, configuration, cli)
say what to do and why, and link to the evidence in
doc/source/reference/, where every figure is kept with how it was
measured. A line of a run's log on an operator page is refused; what
counts as one, concretely:

* ``*Run here*``: the marker the evidence pages put before what was run
  on this project's machines (``*Not run here*``, which says a step is
  not run, is allowed);
* a commit: 7 to 40 hex digits with both a digit and a letter in them,
  standing alone (``8f6371f``, ``(e89f00d)``);
* a date of a run, ``2026-11-27``;
* a test run's result: ``3 passed``;
* a run's timing: ``took 1.6``, ``took about 2 s``.
"""

import os
import re

import testtools

DOC = os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'source')
OPERATOR_FOLDERS = ('install', 'admin', 'configuration', 'cli')

MARKERS = {
    'a run log': re.compile(r'\*run here\*', re.IGNORECASE),
    'a commit': re.compile(r'(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])'
                           r'[0-9a-f]{7,40}(?![\w/-])'),
    'a date of a run': re.compile(r'\b20\d\d-[01]\d-[0-3]\d\b'),
    'a test result': re.compile(r'\b\d+ passed\b'),
    'a timing': re.compile(r'\btook (about |up to )?\d'),
}


def measurement_lines(text):
    """[(line number, marker, line)] of each line a marker matches."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for marker, pattern in MARKERS.items():
            if pattern.search(line):
                found.append((number, marker, line.strip()))
    return found


def operator_pages():
    """Every .rst file under the operator's folders, relative to DOC."""
    pages = []
    for folder in OPERATOR_FOLDERS:
        for top, _dirs, names in os.walk(os.path.join(DOC, folder)):
            pages.extend(os.path.relpath(os.path.join(top, name), DOC)
                         for name in names if name.endswith('.rst'))
    return sorted(pages)


class TestOperatorPages(testtools.TestCase):

    def test_no_measurement_log_on_an_operator_page(self):
        pages = operator_pages()
        # The folders are there, with their pages: a test that finds
        # nothing to read proves nothing.
        for folder in OPERATOR_FOLDERS:
            self.assertTrue(any(p.startswith(folder + os.sep)
                                for p in pages), folder)
        found = []
        for page in pages:
            with open(os.path.join(DOC, page)) as f:
                found.extend('%s:%d: %s: %s' % (page, n, marker, line)
                             for n, marker, line in
                             measurement_lines(f.read()))
        self.assertEqual([], found,
                         'measurement logs belong in doc/source/reference/, '
                         'linked from the operator page')

    def test_each_marker_matches_a_log_line(self):
        """Lines of the evidence pages, and what is not a log."""
        logs = {
            'a run log': '*Run here*, by ``tox -e build``',
            'a commit': '1.0.0 is the merge of ``release-1.0`` (commit '
                        '``8f6371f``; the history',
            'a date of a run': 'Results, 2026-11-27, nova 29.4.0',
            'a test result': '29  29.4.0 (2024.1)  F  3 passed, 0 failed',
            'a timing': 'one run took 1.6 to 1.8 s (three runs',
        }
        for marker, line in logs.items():
            self.assertIn(marker, [m for _n, m, _l in
                                   measurement_lines(line)], line)
        for line in ('*Not run here* (no OpenStack-Ansible on these '
                     'machines)',
                     'Exit status: 0 done; 1 failed',
                     'nova-pinning-hooks==1.0.0, nova 29 (2024.1)',
                     'the multiplier: 1,000,000 a failed build',
                     'a decade, deadbeef, cafe'):
            self.assertEqual([], measurement_lines(line), line)
