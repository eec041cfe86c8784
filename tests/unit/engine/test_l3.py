"""Cache-aware one-to-one: L3 domains from the capabilities' cache banks.

Table-driven cases on real-shaped hosts (AMD Genoa, Bergamo, Milan NPS4,
Intel SNC2: tests/unit/hosts.py) and properties over random banked hosts
(hypothesis). What the plan command prints of them, and the frozen plans
of hosts without banks: tests/unit/observe/test_l3.py.
"""

import random
from unittest import mock

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pinning_hooks.engine import assign
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import topology
from tests.unit import hosts
from tests.unit.engine import test_properties  # noqa: F401 - hypothesis profiles
from tests.unit.policy_fixtures import applied

T = topology.HostTopology.from_capabilities


def genoa():
    return T(hosts.load('genoa-2s-nps1'))


def guest(name, vcpus, node=0, pins=None):
    return guest_mod.Guest.from_xml(
        hosts.domain_xml(name, vcpus, uuid='u-' + name,
                         pins={v: str(c) for v, c in (pins or {}).items()}),
        memory_by_node_kib={node: 1024})


class TestTopology(testtools.TestCase):

    def test_real_shaped_hosts(self):
        self.assertEqual(set(hosts.BANKED), {
            'genoa-2s-nps1', 'bergamo-2s-nps1', 'milan-2s-nps4',
            'intel-2s-snc2'})
        for name, cpus, banks, nodes, domains, size in (
                ('genoa-2s-nps1', 384, 24, 2, 24, 16),
                ('bergamo-2s-nps1', 512, 32, 2, 32, 16),
                ('milan-2s-nps4', 256, 16, 8, 16, 16),
                # One L3 per socket, as SNC reports it: split at the node.
                ('intel-2s-snc2', 224, 2, 4, 4, 56)):
            caps = hosts.load(name)
            self.assertEqual(banks, caps.count("<bank id="), name)
            host = T(caps)
            self.assertEqual(cpus, len(host.cpus), name)
            found = set(host.l3_of.values())
            self.assertEqual((nodes, domains, {size}, ''),
                             (len(host.nodes), len(found),
                              {len(d) for d in found}, host.l3_ignored),
                             name)
            for d in found:
                self.assertEqual(1, len({host.node_of[c] for c in d}), name)

    def test_genoa_domain_is_a_ccd_with_its_siblings(self):
        host = genoa()
        self.assertEqual(cpuset.parse('8-15,200-207'), host.l3_of[8])

    def test_epyc_siblings_are_n_and_n_plus_all_cores(self):
        for name, first in (('genoa-2s-nps1', 192), ('bergamo-2s-nps1', 256),
                            ('milan-2s-nps4', 128)):
            host = T(hosts.load(name))
            self.assertEqual(frozenset({5, 5 + first}), host.core_of[5],
                             name)
            self.assertEqual(16, len(host.l3_of[5 + first]), name)

    def test_snc_sub_nodes_are_one_domain_each(self):
        host = T(hosts.load('intel-2s-snc2'))
        self.assertEqual(host.nodes[1].cpus, host.l3_of[28])
        self.assertEqual(cpuset.parse('0-27,112-139'), host.l3_of[0])

    def test_without_banks_each_node_is_one_domain(self):
        host = T(hosts.load('intel-2s-28c-ht'))
        self.assertEqual(({}, ''), (host.l3_of, host.l3_ignored))
        self.assertEqual([host.nodes[0].cpus, host.nodes[1].cpus],
                         host.l3_domains(host.cpus))

    def test_a_bank_spanning_nodes_is_split_at_the_node(self):
        caps = hosts.capabilities([[[0], [1]], [[2], [3]]],
                                  banks=['0-3'])
        host = T(caps)
        self.assertEqual('', host.l3_ignored)
        self.assertEqual([frozenset({0, 1}), frozenset({2, 3})],
                         host.l3_domains(host.cpus))

    def test_offline_cpus_may_be_named(self):
        host = T(hosts.capabilities([[[0], [1], [2], [3]]], offline=(3,),
                                    banks=['0-1', '2-3']))
        self.assertEqual(('', frozenset({2})), (host.l3_ignored,
                                                host.l3_of[2]))

    def test_bad_banks_are_ignored_with_a_reason(self):
        nodes = [[[0, 4], [1, 5]], [[2, 6], [3, 7]]]
        for banks, why in (
                (['0-2,4-6', '2-3,6-7'], 'CPU 2 is in two L3 banks'),
                (['0-1,4-5', '2-3,6-7,9'], 'name CPU 9, which the host '
                                           'does not have'),
                (['0-1,4-5', '2-3,6'], 'online CPU 7 is in no L3 bank'),
                (['0-1,4', '5', '2-3,6-7'], 'are in different L3 banks'),
                (['0-1,4-5', 'x'], 'bad cpus')):
            host = T(hosts.capabilities(nodes, banks=banks))
            self.assertEqual({}, host.l3_of, banks)
            self.assertIn(why, host.l3_ignored, banks)
            # Planned exactly as a host without banks.
            self.assertEqual(host.l3_domains(host.cpus),
                             [host.nodes[0].cpus, host.nodes[1].cpus])

    def test_other_cache_levels_are_not_l3(self):
        caps = hosts.capabilities([[[0], [1]]], banks=['0', '1'])
        caps = caps.replace("level='3'", "level='2'")
        self.assertEqual({}, T(caps).l3_of)


class TestAssign(testtools.TestCase):
    """One Genoa node: 96 cores, 12 L3 domains (CCDs) of 8 cores."""

    def setUp(self):
        super().setUp()
        self.host = genoa()
        self.pool = self.host.nodes[0].cpus

    def assign(self, guests, pool=None):
        trace = []
        pins, split = assign.assign_node(self.host, pool or self.pool,
                                         guests, trace=trace)
        return pins, split

    def domains(self, cpus):
        return {self.host.l3_of[c] for c in cpus}

    def test_a_new_guest_stays_in_one_domain(self):
        for vcpus in (1, 2, 5, 8, 16):
            pins, split = self.assign([guest('g', vcpus)])
            self.assertEqual(1, len(self.domains(pins['u-g'].values())))
            self.assertEqual({}, split)

    def test_best_fit_keeps_large_holes_for_large_guests(self):
        # CCD 1 (cores 8-15) has 2 whole cores free: a 4-vCPU guest goes
        # there, not into an empty CCD.
        busy = guest('busy', 12, pins=dict(enumerate(
            cpuset.parse('8-13,200-205'))))
        pins, split = self.assign([busy, guest('new', 4)])
        self.assertEqual(cpuset.parse('14-15,206-207'),
                         frozenset(pins['u-new'].values()))
        self.assertEqual({}, split)

    def test_whole_cores_before_the_fewest_free_pcpus(self):
        # CCD 0 has 4 free pCPUs on 4 half cores, CCD 1 has 2 whole cores
        # and 2 half ones: a 4-vCPU guest takes CCD 1's whole cores.
        half = guest('half', 12, pins=dict(enumerate(
            cpuset.parse('0-7,192-195'))))
        half1 = guest('half1', 10, pins=dict(enumerate(
            cpuset.parse('8-13,200-203'))))
        pins, _ = self.assign([half, half1, guest('new', 4)])
        self.assertEqual(cpuset.parse('14-15,206-207'),
                         frozenset(pins['u-new'].values()))

    def test_no_domain_with_room_takes_the_fewest(self):
        pins, split = self.assign([guest('big', 40)])
        self.assertEqual(3, len(self.domains(pins['u-big'].values())))
        self.assertEqual({'u-big': 'no L3 domain had room for it at its '
                                   'placement (split over 3)'}, split)

    def test_kept_pins_are_never_moved_for_alignment(self):
        pins_in = {0: 0, 1: 8}  # two CCDs
        g = guest('sticky', 2, pins=pins_in)
        pins, split = self.assign([g])
        self.assertEqual(pins_in, pins['u-sticky'])
        self.assertEqual({'u-sticky': 'its kept pCPUs are in 2 L3 domains'},
                         split)

    def test_a_grown_guest_grows_in_its_own_domain(self):
        g = guest('grown', 4, pins={0: 40, 1: 232})
        pins, split = self.assign([g])
        self.assertEqual(1, len(self.domains(pins['u-grown'].values())))
        self.assertEqual(self.host.l3_of[40],
                         self.domains(pins['u-grown'].values()).pop())
        self.assertEqual({}, split)


class TestPlanOutput(testtools.TestCase):

    def test_guests_sharing_a_pin_set_get_its_domains_once(self):
        # 60 x 8 vCPUs oversubscribe Genoa's 384 pCPUs: every guest on
        # the one host-range set; its 24 domains are found once.
        host = genoa()
        guests = [guest('g%02d' % i, 8, node=i % 2) for i in range(60)]
        p = policy.make_plan(host, guests, policy.Options(
            allocation_ratio=1.0))
        self.assertEqual({plan_mod.HOST_RANGE},
                         {gp.mode for gp in p.guests})
        real = topology.HostTopology.l3_domains
        calls = []

        def counted(self, cpus):
            calls.append(cpus)
            return real(self, cpus)

        with mock.patch.object(topology.HostTopology, 'l3_domains',
                               counted):
            data = plan_mod.to_json(p, [], host=host)
        self.assertEqual(1, len(calls))
        self.assertEqual([[cpuset.format(d) for d in real(host, p.pool)]]
                         * 60, [g['l3_domains'] for g in data['guests']])
        self.assertEqual(24, len(data['guests'][0]['l3_domains']))


@st.composite
def banked_scenario(draw):
    """A random host whose nodes are cut into L3 domains of whole cores,
    with guests that may already hold pins."""
    nnodes = draw(st.integers(1, 3))
    threads = draw(st.sampled_from([1, 2]))
    sizes = [draw(st.integers(1, 10)) for _ in range(nnodes)]
    total = sum(sizes)
    nodes, banks, first = [], [], 0
    rnd = random.Random(draw(st.integers(0, 2 ** 32)))
    for size in sizes:
        cores = [[c + t * total for t in range(threads)]
                 for c in range(first, first + size)]
        nodes.append(cores)
        i = 0
        while i < size:
            step = rnd.randint(1, 4)
            banks.append([c for core in cores[i:i + step] for c in core])
            i += step
        first += size
    caps = hosts.capabilities(nodes, banks=banks)
    cpus = sorted(c for cores in nodes for core in cores for c in core)
    guests = []
    for i in range(draw(st.integers(0, 10))):
        vcpus = rnd.randint(1, 6)
        pins = {}
        if rnd.random() < 0.4:
            pins = {v: str(rnd.choice(cpus)) for v in range(vcpus)
                    if rnd.random() < 0.7}
        guests.append(guest_mod.Guest.from_xml(
            hosts.domain_xml('g%d' % i, vcpus, uuid='%04d' % i, pins=pins),
            memory_by_node_kib={rnd.randrange(nnodes): 1024}))
    ratio = draw(st.sampled_from([1.0, 2.0, 4.0]))
    return caps, guests, policy.Options(allocation_ratio=ratio)


class TestL3Properties(testtools.TestCase):

    @hypothesis.given(banked_scenario())
    def test_no_guest_split_while_a_domain_could_hold_it(self, case):
        caps, guests, options = case
        host = T(caps)
        p = policy.make_plan(host, guests, options)
        by_uuid = {g.uuid: g for g in guests}
        for node in host.nodes:
            members = [by_uuid[gp.uuid] for gp in p.guests
                       if gp.mode == plan_mod.DEDICATED and
                       gp.home_node == node]
            if not members:
                continue
            trace = []
            pins, _ = assign.assign_node(host, p.pool_by_node[node],
                                         members, trace=trace)
            for uuid, count, kept, free in trace:
                new = set(pins[uuid].values()) - kept
                spans = {host.l3_of[c] for c in new}
                if max(free.values(), default=0) >= count:
                    self.assertEqual(1, len(spans), (uuid, count, free))
                home = {host.l3_of[c] for c in kept}
                if len(home) == 1 and free[next(iter(home))] >= count:
                    self.assertEqual(home, spans)

    @hypothesis.given(banked_scenario())
    def test_alignment_never_fits_fewer_guests_one_to_one(self, case):
        caps, guests, options = case
        banked = policy.make_plan(T(caps), guests, options)
        plain = policy.make_plan(T(hosts.strip_banks(caps)), guests, options)
        self.assertEqual([gp.mode for gp in plain.guests],
                         [gp.mode for gp in banked.guests])
        for a, b in zip(plain.guests, banked.guests):
            if a.mode != plan_mod.DEDICATED:
                self.assertEqual(a.vcpu_pins, b.vcpu_pins)

    @hypothesis.given(banked_scenario())
    def test_second_pass_changes_nothing(self, case):
        caps, guests, options = case
        host = T(caps)
        p = policy.make_plan(host, guests, options)
        after = applied(guests, p)
        self.assertEqual([], plan_mod.changes(
            policy.make_plan(host, after, options), after))

    @hypothesis.given(banked_scenario())
    def test_one_domain_per_node_is_the_plan_without_banks(self, case):
        caps, guests, options = case
        plain = T(hosts.strip_banks(caps))
        per_node = hosts.capabilities(
            [[sorted(c) for c in plain.cores(n.cpus)]
             for n in plain.nodes.values()],
            banks=[sorted(n.cpus) for n in plain.nodes.values()])
        self.assertEqual(
            policy.make_plan(plain, guests, options).guests,
            policy.make_plan(T(per_node), guests, options).guests)
