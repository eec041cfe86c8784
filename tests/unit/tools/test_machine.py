"""tests/machine.py: the one line that says the machine is not the one
the functional and cloud tests are written for."""

import os

import fixtures
import testtools

from tests import machine


class TestCpusUnlikeTests(testtools.TestCase):

    def online(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'online')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_this_projects_machines(self):
        self.assertIsNone(machine.cpus_unlike_tests(self.online('0-1\n')))

    def test_another_machine_is_named_in_one_line(self):
        for text in ('0-3\n', '0\n', '0,2\n'):
            why = machine.cpus_unlike_tests(self.online(text))
            self.assertIn("this machine's are %s" % text.strip(), why)
            self.assertNotIn('\n', why)

    def test_unreadable(self):
        why = machine.cpus_unlike_tests('/nonexistent/online')
        self.assertIn('cannot read the online CPUs', why)
