"""Cache-aware one-to-one as the plan command prints it: L3 domains in
the table (``render``), and the frozen plans and tables of hosts without
banks. The L3 domains and their plans: tests/unit/engine/test_l3.py.
"""

import json
import os
import random

import testtools

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.observe import render
from tests.unit import hosts
from tests.unit.engine.test_l3 import T
from tests.unit.engine.test_l3 import guest
from tests.unit.policy_fixtures import applied


class TestPlanOutput(testtools.TestCase):

    def test_reason_json_and_map(self):
        caps = hosts.load('genoa-2s-nps1')
        host = T(caps)
        guests = [guest('big', 40), guest('small', 4)]
        p = policy.make_plan(host, guests, policy.Options(
            allocation_ratio=4.0))
        by = {gp.name: gp for gp in p.guests}
        self.assertIn('split across L3 domains: no L3 domain had room',
                      by['big'].reason)
        self.assertNotIn('L3', by['small'].reason)
        data = plan_mod.to_json(p, [], host=host)
        l3 = {g['name']: g['l3_domains'] for g in data['guests']}
        self.assertEqual(3, len(l3['big']))
        self.assertEqual(1, len(l3['small']))
        text = render.plan_table(p, host, guests)
        self.assertEqual(24, text.count('\n  L3 '))
        self.assertIn('  L3 0-7,192-199\n  core     0   1', text)

    def test_a_host_without_banks_prints_what_it_printed(self):
        for name in ('intel-2s-28c-ht', 'genoa-2s-nps1'):
            caps = hosts.strip_banks(hosts.load(name))
            host = T(caps)
            guests = [guest('a', 6), guest('b', 3, node=1)]
            p = policy.make_plan(host, guests, policy.Options(
                allocation_ratio=4.0))
            data = plan_mod.to_json(p, [], host=host)
            self.assertEqual(json.dumps(plan_mod.to_json(p, [])),
                             json.dumps(data))
            self.assertNotIn('L3', render.plan_table(p, host, guests))


class TestIgnoredBanksAreSaid(testtools.TestCase):

    def test_the_map_says_why(self):
        caps = hosts.capabilities([[[0], [1]]], banks=['0', '0-1'])
        host = T(caps)
        p = policy.make_plan(host, [], policy.Options(allocation_ratio=1.0))
        self.assertIn('L3 cache banks ignored (one domain per node): CPU 0 '
                      'is in two L3 banks', render.plan_table(p, host, []))


# Hosts whose plans were frozen before banks were read (tests/data/
# plans-before-l3.txt): written by the code of commit 7c9f0bc, which did
# not read <cache>, so Genoa's banks were invisible to it.
FROZEN_HOSTS = ('intel-2s-28c-ht', 'amd-2s-64c-nps4', 'offline-cpus',
                'smt4', 'genoa-2s-nps1')
FROZEN = os.path.join(hosts.DATA, '..', 'plans-before-l3.txt')


def frozen_output(caps_of):
    """Plans of seeded guest sets on ``FROZEN_HOSTS`` (capabilities from
    ``caps_of(name)``), as the plan command prints them (JSON, then the
    table) before and after a few guests came, went and grew. Uses only
    what the code before banks had, so that it can write the file."""
    out = []
    for name in FROZEN_HOSTS:
        host = T(caps_of(name))
        rnd = random.Random(name)
        cpus, nodes = sorted(host.cpus), list(host.nodes)
        serial = iter(range(10 ** 6))

        def boot(vcpus=None, rnd=rnd, name=name, cpus=cpus, nodes=nodes,
                 serial=serial):
            return _frozen_guest(rnd, name, next(serial), cpus, nodes,
                                 vcpus)

        # Over-full (node and host ranges) on the small hosts only: the
        # big ones would print the same long ranges a hundred times.
        for fill, ratio in ((0.6, 4.0), (1.5, 2.0))[:1 + (len(cpus) < 150)]:
            guests, total = [], 0
            while total < fill * len(cpus):
                guests.append(boot())
                total += guests[-1].vcpu_count
            options = policy.Options(allocation_ratio=ratio,
                                     reserved_cpus=frozenset(cpus[:1]))
            first = policy.make_plan(host, guests, options)
            later = applied(guests, first)
            del later[rnd.randrange(len(later))]
            later[rnd.randrange(len(later))] = boot(8)
            later += [boot() for _ in range(3)]
            for gs in (guests, later):
                p = policy.make_plan(host, gs, options)
                changes = plan_mod.changes(p, gs)
                out.append('== %s fill %.1f ratio %.0f\n' % (
                    name, fill, ratio))
                data = plan_mod.to_json(p, changes)
                # One line per guest: a difference names its guest.
                out.extend(json.dumps(g, sort_keys=True) + '\n'
                           for g in data.pop('guests'))
                out.append(json.dumps(data, sort_keys=True) + '\n')
                out.append(render.plan_table(p, host, gs, changes))
    return ''.join(out)


def _frozen_guest(rnd, host_name, i, cpus, nodes, vcpus=None):
    vcpus = vcpus or rnd.choice([1, 2, 2, 4, 8])
    pins = {}
    if rnd.random() < 0.2:
        pins = {v: str(rnd.choice(cpus)) for v in range(vcpus)}
    mem = {rnd.choice(nodes): 1024}
    if rnd.random() < 0.1:
        mem = dict.fromkeys(rnd.sample(nodes, min(2, len(nodes))), 512)
    return guest_mod.Guest.from_xml(
        hosts.domain_xml('%s-%d' % (host_name, i), vcpus,
                         uuid='%s-%04d' % (host_name, i), pins=pins),
        memory_by_node_kib=mem)


class TestPlansBeforeBanks(testtools.TestCase):
    """A host without banks is planned byte for byte as before."""

    def test_plans_and_tables_are_the_frozen_ones(self):
        with open(FROZEN) as f:
            frozen = f.read()
        now = frozen_output(lambda n: hosts.strip_banks(hosts.load(n)))
        self.assertEqual(frozen.splitlines(), now.splitlines())
        self.assertGreater(frozen.count('"mode": "dedicated"'), 50)
        self.assertGreater(frozen.count('"mode": "node-range"'), 10)


if __name__ == '__main__':  # write the file (from the code before banks)
    with open(FROZEN, 'w') as out:
        out.write(frozen_output(hosts.load))
