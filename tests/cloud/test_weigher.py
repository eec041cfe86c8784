"""nova-scheduler with the package's OneToOneWeigher, in the real cloud.

The two computes differ as large and small hosts of a fleet do:
nph-compute1's guest pool is CPUs 0-1, nph-compute2's CPU 0 alone
(``cpu_shared_set = 0``). A 2-vCPU guest on nph-compute1 fills its pool
(one-to-one, one CPU each); nph-compute2 is empty. A 1-vCPU guest, booted
by a member with no host named
(``second_guest``):

* nova's default weighers weigh free RAM, free vCPUs and free disk, each
  as a share of the largest among the hosts (``minval = 0``: a host with
  half the free vCPUs of the other weighs 0.5), and the vCPUs are
  counted with the allocation ratio (4.0 here): nph-compute1 has 8 - 2 =
  6 free, nph-compute2 4. The guest goes to nph-compute1 (CPU weights
  1.0 and 0.67; RAM and disk differ by 1 %), where three vCPUs now share
  its two CPUs (node range): no guest is one-to-one;
* with the weigher (``tools/cloud.sh weigher on``, the package's two
  lines in ``[filter_scheduler]``), nph-compute1's summary in its compute
  node's stats says the guest there would take one-to-one from the guest
  it has, nph-compute2's that the guest would be one-to-one there: the
  guest goes to nph-compute2, bound to CPU 0 alone, and every guest
  keeps a CPU of its own.

nova's IoOpsWeigher (multiplier -1) counts the builds in progress on a
host as its compute last saved them (``io_workload`` in the node's
stats: a build counts from its claim until the compute's next periodic
audit, up to 60 s later; the API's ``current_workload`` stays 0), plus
those the scheduler placed itself since. A host that has just built a
guest weighs up to 1.0 less meanwhile, more than the CPU weigher's
difference. So the second guest is booted only once nova's database
shows no build in progress on either compute (the scheduler's input,
read with the ``mysql`` client) and by a scheduler started after that
(``weigher on|off`` restarts it): nova's choice then depends on the
hosts, not on when the audits ran. And only once each compute node's
summary (in the same stats, saved at the same audit) counts every vCPU
nova counts there (``vcpus_used``): an audit that ran after the first
guest's build but before the pass that saw it saved no build in
progress and a summary without that guest; the weigher would then see
nph-compute1 as empty.

Both outcomes are read in /proc. The package is on in both runs (only
the scheduler changes); ``weigher off`` brings back nova's choice, the
test's proof that the weigher made the difference.
"""

import json
import subprocess
import time

from tests.cloud import base
from tests.cloud import test_lifecycle

# The audit after the pass that saw the first guest may be the second
# after its build.
AUDIT_WAIT = base.AUDIT_WAIT
# The cloud's database (tools/cloud.sh), read only for the wait above;
# raw (-r): the stats are JSON with a JSON text in it, backslashes kept.
DB = ('mysql', '-h127.0.0.1', '-unph', '-pnph-cloud-secret', 'nova_cell1',
      '-N', '-B', '-r', '-e')
NODES = ("SELECT hypervisor_hostname, vcpus_used, COALESCE(stats, '{}') "
         "FROM compute_nodes WHERE deleted = 0")
SUMMARY = 'nova_pinning_numa'  # the package's key in the node's stats


class TestOneToOneWeigher(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if base.package_state() != 'on':
            base.cloud('package', 'on')
        self.addCleanup(self.weigher, 'on')  # as "package on" leaves it

    @staticmethod
    def weigher(state):
        base.cloud('weigher', state)

    def reported(self, host):
        """The summary line ``nova-pinning status`` shows for ``host``."""
        return test_lifecycle.status_json(host).get('scheduler_summary')

    @staticmethod
    def nodes():
        """{compute node: (builds it counts in progress, vCPUs nova
        counts there, vCPUs its summary has seen or None)} as the node
        last saved them in nova's database."""
        out = subprocess.run(DB + (NODES,), capture_output=True, text=True,
                             timeout=60, check=True).stdout
        seen = {}
        for line in out.splitlines():
            if not line:
                continue
            name, used, stats = line.split('\t', 2)
            stats = json.loads(stats)
            summary = stats.get(SUMMARY)
            seen[name] = (int(stats.get('io_workload', 0)), int(used),
                          json.loads(summary)['s'] if summary else None)
        return seen

    def wait_audited(self):
        """Until each compute's audit saved no build in progress and a
        summary that has seen every vCPU nova counts there."""
        deadline = time.monotonic() + AUDIT_WAIT
        while True:
            seen = self.nodes()
            if len(seen) == 2 and all(
                    builds == 0 and summary == used
                    for builds, used, summary in seen.values()):
                return seen
            if time.monotonic() > deadline:
                self.fail('after %d s, a build still counted in progress '
                          'or a summary behind nova\'s vCPUs: %s (builds, '
                          'vcpus_used, summary\'s)' % (AUDIT_WAIT, seen))
            time.sleep(2)

    def second_guest(self, weigher):
        """A (2 vCPUs) on nph-compute1 placed by the admin, then C
        (1 vCPU) placed by nova's scheduler with the weigher on or off:
        C's host and every guest's vCPU threads."""
        a = self.boot('w-a', flavor='nph.2', host='nph-compute1')
        self.assert_pinned()
        self.wait_audited()
        self.weigher(weigher)
        c = self.boot('w-c')
        self.assert_no_fault(c)
        c = self.get(c)
        self.assert_pinned()
        view = self.kernel_view()
        return c.compute_host, {s.id: view[s.id][2] for s in (a, c)}, (a, c)

    def test_the_weigher_sends_the_guest_where_it_is_one_to_one(self):
        host, threads, (a, c) = self.second_guest('on')
        seen = (host, threads, self.reported('nph-compute1'),
                self.reported('nph-compute2'))
        self.assertEqual('nph-compute2', host, seen)
        # C alone on nph-compute2's pool, CPU 0; A keeps one CPU of
        # nph-compute1 for each of its vCPUs.
        self.assertEqual({0: frozenset({0})}, threads[c.id], seen)
        self.assertEqual({frozenset({0}), frozenset({1})},
                         set(threads[a.id].values()), seen)
        self.assert_no_compute_error()

    def test_without_it_nova_shares_the_full_host(self):
        host, threads, (a, c) = self.second_guest('off')
        seen = (host, threads)
        self.assertEqual('nph-compute1', host, seen)
        # A and C share nph-compute1's pool, CPUs 0-1 (node range).
        both = frozenset({0, 1})
        self.assertEqual({0: both, 1: both}, threads[a.id], seen)
        self.assertEqual({0: both}, threads[c.id], seen)
        status = test_lifecycle.status_json('nph-compute1')
        modes = {g['mode'] for g in status['guests']}
        self.assertEqual({'node-range'}, modes, status)
        self.assert_no_compute_error()
