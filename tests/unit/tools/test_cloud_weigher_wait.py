"""tests/cloud/test_weigher.py's wait before the second guest (issue 47):
it ends only once each compute node's saved stats count no build in
progress and a summary that has seen every vCPU nova counts there; an
audit that ran before the pass that saw the first guest saved no build
and a summary without it, and must not end the wait. The database is
replaced by what ``mysql -N -B -r`` prints for nova's compute_nodes
rows, the clock by a fake one."""

import json
from unittest import mock

import testtools

from tests.cloud import test_weigher


def row(name, used, io_workload, seen):
    """One line as mysql prints it: nova saves the stats as JSON text,
    the package's summary a JSON text inside it."""
    stats = {'io_workload': str(io_workload), 'num_instances': '1'}
    if seen is not None:
        stats[test_weigher.SUMMARY] = json.dumps(
            {'v': 1, 'r': 4.0, 'x': 0, 's': seen, 't': 1.0,
             'n': [[0, 2, seen, 1024, 0, 0]]}, separators=(',', ':'))
    return '%s\t%d\t%s' % (name, used, json.dumps(stats))


class TestNodes(testtools.TestCase):

    def nodes(self, *lines):
        done = mock.Mock(stdout='\n'.join(lines) + '\n')
        with mock.patch.object(test_weigher.subprocess, 'run',
                               return_value=done) as run:
            got = test_weigher.TestOneToOneWeigher.nodes()
        self.assertIn('-r', run.call_args[0][0])  # raw: backslashes kept
        return got

    def test_builds_vcpus_and_the_summary_seen(self):
        self.assertEqual(
            {'nph-compute1': (1, 2, 0), 'nph-compute2': (0, 0, 0)},
            self.nodes(row('nph-compute1', 2, 1, 0),
                       row('nph-compute2', 0, 0, 0)))

    def test_a_node_without_a_summary(self):
        self.assertEqual({'nph-compute2': (0, 0, None)},
                         self.nodes(row('nph-compute2', 0, 0, None)))


class TestWaitAudited(testtools.TestCase):

    def wait(self, readings):
        """wait_audited over ``readings`` (one a poll), on a clock that
        moves 2 s a poll; (what it returned, polls taken)."""
        case = test_weigher.TestOneToOneWeigher('test_without_it_nova_'
                                                'shares_the_full_host')
        clock = iter(range(0, 10 ** 6, 2))
        polls = iter(readings)
        taken = []

        def nodes():
            taken.append(1)
            return next(polls)
        with mock.patch.object(case, 'nodes', nodes), \
                mock.patch.object(test_weigher.time, 'monotonic',
                                  lambda: next(clock)), \
                mock.patch.object(test_weigher.time, 'sleep'):
            return case.wait_audited(), len(taken)

    def test_an_audit_before_the_pass_does_not_end_it(self):
        building = {'nph-compute1': (1, 2, 0), 'nph-compute2': (0, 0, 0)}
        # The audit ran after the build, before the pass that saw it.
        early = {'nph-compute1': (0, 2, 0), 'nph-compute2': (0, 0, 0)}
        audited = {'nph-compute1': (0, 2, 2), 'nph-compute2': (0, 0, 0)}
        self.assertEqual((audited, 3),
                         self.wait([building, early, audited, audited]))

    def test_a_node_without_a_summary_does_not_end_it(self):
        none = {'nph-compute1': (0, 2, 2), 'nph-compute2': (0, 0, None)}
        audited = {'nph-compute1': (0, 2, 2), 'nph-compute2': (0, 0, 0)}
        self.assertEqual((audited, 2), self.wait([none, audited]))

    def test_it_fails_after_its_bound(self):
        early = {'nph-compute1': (0, 2, 0), 'nph-compute2': (0, 0, 0)}
        polls = test_weigher.AUDIT_WAIT // 2 + 2
        error = self.assertRaises(AssertionError, self.wait,
                                  [early] * polls)
        self.assertIn('summary behind', str(error))
