"""``snapshot.Loader``: live snapshots loaded pass after pass, parsing
only the entries it has not seen, and saying what changed."""

import testtools

from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.engine import snapshot
from tests.unit import hosts

CAPS = hosts.load('intel-2s-28c-ht')


def entry(name, vcpus=2, node='0', affinity=None):
    e = {'xml': hosts.domain_xml(name, vcpus, uuid='uuid-' + name),
         'active': True, 'memory_by_node_kib': {node: 65536}}
    if affinity is not None:
        e['kernel_vcpu_affinity'] = affinity
    return e


def live(domains, caps=CAPS):
    """A live snapshot as a pass reads it: ratio 4."""
    return snapshot.LiveSnapshot(caps, domains, hostsettings.HostSettings(
        allocation_ratio=4.0, ratio_source='test'))


class TestLoader(testtools.TestCase):

    def test_what_changed_between_loads(self):
        loader = snapshot.Loader()
        a, b, c = entry('a'), entry('b', affinity={'0': '3'}), entry('c')
        snap, changed, removed = loader.load(live([a, b, c]))
        self.assertEqual(({'uuid-a', 'uuid-b', 'uuid-c'}, set()),
                         (set(changed), removed))
        self.assertEqual(snapshot.load(live([a, b, c]), from_libvirt=True),
                         snap)
        first = snap.guests
        # The same entry objects: nothing parsed, the same guests.
        snap, changed, removed = loader.load(live([a, b, c]))
        self.assertEqual(({}, set()), (changed, removed))
        self.assertTrue(all(x is y for x, y in zip(first, snap.guests)))
        # b read again (a new entry, pins moved), c gone, d new.
        b2, d = entry('b', 4, affinity={'0': '5'}), entry('d')
        snap, changed, removed = loader.load(live([d, a, b2]))
        self.assertEqual(({'uuid-b', 'uuid-d'}, {'uuid-c'}),
                         (set(changed), removed))
        self.assertEqual(4, changed['uuid-b'].vcpu_count)
        self.assertEqual(snapshot.load(live([d, a, b2]), from_libvirt=True),
                         snap)

    def test_a_refused_snapshot_changes_nothing(self):
        loader = snapshot.Loader()
        a, b = entry('a'), entry('b')
        loader.load(live([a, b]))
        c, twin = entry('c'), entry('a')  # a second entry for uuid-a
        self.assertRaisesRegex(snapshot.SnapshotError, 'appears twice',
                               loader.load, live([a, b, c, twin]))
        _, changed, removed = loader.load(live([a, c]))
        self.assertEqual(({'uuid-c'}, {'uuid-b'}), (set(changed), removed))

    def test_another_host_reads_everything_again(self):
        loader = snapshot.Loader()
        a = entry('a')
        loader.load(live([a]))
        _, changed, _ = loader.load(live([a], hosts.load('small-1node')))
        self.assertEqual({'uuid-a'}, set(changed))


class TestLiveSnapshot(testtools.TestCase):
    """A pass's typed snapshot and the JSON ``nova-pinning snapshot``
    writes from it plan the same."""

    def test_its_json_is_the_snapshot_format(self):
        snap = live([entry('a'), entry('b', affinity={'0': '3'})])
        data = snap.to_json()
        self.assertEqual(['version', 'capabilities', 'domains',
                          'allocation_ratio', 'ratio_source',
                          'reserved_cpus', 'shared_cpus', 'dedicated_cpus'],
                         list(data))
        self.assertEqual(snapshot.load(snap, from_libvirt=True),
                         snapshot.load(data, from_libvirt=True))

    def test_without_its_ratio_it_is_refused(self):
        snap = snapshot.LiveSnapshot(CAPS, [entry('a')])
        exc = self.assertRaises(snapshot.SnapshotError, snapshot.load, snap)
        self.assertIn('allocation ratio', str(exc))

    def test_the_policy_still_checks_the_ratio(self):
        # Checked at its edges; a record made by hand with a bad one is
        # refused by the policy, the one check after them.
        snap = snapshot.LiveSnapshot(CAPS, [entry('a')],
                                     hostsettings.HostSettings(
                                         allocation_ratio=0.0,
                                         ratio_source='test'))
        exc = self.assertRaises(snapshot.SnapshotError, snapshot.load, snap)
        self.assertIn('allocation ratio must be', str(exc))
