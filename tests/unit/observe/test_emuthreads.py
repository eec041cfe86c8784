"""Where one-to-one guests' emulator and I/O threads run
(``[nova_pinning] emulator_threads``), as the plan's output says it. The
rule and its plans: tests/unit/engine/test_emuthreads.py; passes through
the fake libvirt: tests/unit/cmd/test_emuthreads.py."""

import json

import testtools

from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.observe import render
from tests.unit.engine.test_emuthreads import GUEST
from tests.unit.engine.test_emuthreads import SHARED
from tests.unit.policy_fixtures import G
from tests.unit.policy_fixtures import make


class TestOutput(testtools.TestCase):

    def plans(self, setting):
        guests = [G('a', 1, 0, iothreads=1)]
        h, p = make('this-machine', guests, 1.0, emulator_threads=setting)
        return (h, guests, p,
                json.dumps(plan_mod.to_json(p, plan_mod.changes(p, guests),
                                            host=h)),
                render.plan_table(p, h, guests))

    def test_guest_adds_nothing(self):
        _, _, _, text, table = self.plans(GUEST)
        self.assertNotIn('emulator_threads', text)
        self.assertNotIn('emu:', table)
        self.assertNotIn(emuthreads.Rule.WITH_VCPUS, table)

    def test_shared_says_where_and_why(self):
        _, _, _, text, table = self.plans(SHARED)
        data = json.loads(text)
        self.assertEqual('shared', data['emulator_threads'])
        a, = data['guests']
        self.assertEqual(('0', '1', {'1': '1'}, 'pool-free'),
                         (a['vcpu_pins']['0'], a['emulator_pin'],
                          a['iothread_pins'], a['emulator_threads']['rule']))
        self.assertIn("node 0's pool", a['emulator_threads']['reason'])
        row = [line for line in table.splitlines()
               if line.startswith('a ')][0]
        self.assertIn('0:0 emu:1', row)
        self.assertIn('pool-free: emulator and I/O threads', row)
