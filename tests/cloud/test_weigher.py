"""nova-scheduler with the package's OneToOneWeigher, in the real cloud.

The two computes differ as small and large hosts of a fleet do:
nph-compute1's guest pool is CPUs 0-1, nph-compute2's CPU 0 alone
(``cpu_shared_set = 0``). With a 1-vCPU guest on each, nph-compute2's
pool is full and nph-compute1 has one CPU of one-to-one room. A third
1-vCPU guest, booted by a member with no host named:

* nova's default weighers weigh free RAM, free vCPUs and free disk:
  nph-compute1's guest is the larger one (``nph.big``: more RAM and
  disk), so RAM and disk favour nph-compute2 and only free vCPUs favour
  nph-compute1. The guest goes to nph-compute2, where it shares CPU 0
  with the guest there (node range): neither is one-to-one any more;
* with the weigher (``tools/cloud.sh weigher on``, the package's two
  lines in ``[filter_scheduler]``), nph-compute1's summary in its
  compute node's stats says the guest would be one-to-one there, and
  nph-compute2's that a guest would lose it: the guest goes to
  nph-compute1, bound to its free CPU alone, and every guest keeps a
  CPU of its own.

Both read in /proc. The package is on in both runs (only the scheduler
changes); ``weigher off`` brings back nova's choice, the test's proof
that the weigher made the difference.
"""

from tests.cloud import base
from tests.cloud import test_lifecycle

BIG = ('nph.big', 1, 1024, 8)  # name, vCPUs, MiB, GiB


class TestOneToOneWeigher(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if base.package_state() != 'on':
            base.cloud('package', 'on')
        self.addCleanup(self.weigher, 'on')  # as "package on" leaves it

    @staticmethod
    def weigher(state):
        base.cloud('weigher', state)

    def big_flavor(self):
        name, vcpus, ram, disk = BIG
        flavor = self.admin.compute.find_flavor(name)
        if flavor is None:
            flavor = self.admin.compute.create_flavor(
                name=name, vcpus=vcpus, ram=ram, disk=disk)
        self.ids['flavors'][name] = flavor.id
        return name

    def reported(self, host):
        """The summary line ``nova-pinning status`` shows for ``host``."""
        return test_lifecycle.status_json(host).get('scheduler_summary')

    def third_guest(self):
        """A on nph-compute1, B on nph-compute2 (both placed by the
        admin), then C placed by nova's scheduler: C's host and every
        guest's vCPU threads."""
        big = self.big_flavor()
        a = self.boot('w-a', flavor=big, host='nph-compute1')
        b = self.boot('w-b', host='nph-compute2')
        self.assert_pinned()
        c = self.boot('w-c')
        self.assert_no_fault(c)
        c = self.get(c)
        self.assert_pinned()
        view = self.kernel_view()
        return c.compute_host, {s.id: view[s.id][2] for s in (a, b, c)}, \
            (a, b, c)

    def test_the_weigher_sends_the_guest_where_it_is_one_to_one(self):
        self.weigher('on')
        host, threads, (a, b, c) = self.third_guest()
        seen = (host, threads, self.reported('nph-compute1'),
                self.reported('nph-compute2'))
        self.assertEqual('nph-compute1', host, seen)
        # C alone on nph-compute1's free CPU, A on the other; B keeps
        # nph-compute2's CPU 0 to itself.
        self.assertEqual({frozenset({0}), frozenset({1})},
                         {threads[a.id][0], threads[c.id][0]}, seen)
        self.assertEqual({0: frozenset({0})}, threads[b.id], seen)
        self.assert_no_compute_error()

    def test_without_it_nova_shares_the_full_host(self):
        self.weigher('off')
        host, threads, (a, b, c) = self.third_guest()
        seen = (host, threads)
        self.assertEqual('nph-compute2', host, seen)
        # B and C share nph-compute2's pool, CPU 0 (node range); A alone
        # on nph-compute1 is one-to-one.
        self.assertEqual({0: frozenset({0})}, threads[b.id], seen)
        self.assertEqual({0: frozenset({0})}, threads[c.id], seen)
        self.assertEqual(1, len(threads[a.id][0]), seen)
        status = test_lifecycle.status_json('nph-compute2')
        modes = {g['mode'] for g in status['guests']}
        self.assertEqual({'node-range'}, modes, status)
        self.assert_no_compute_error()
