"""What status and top show of two samples (``observe.stealview``); the
sampling arithmetic under it is tested in tests/unit/engine/test_steal.py.
"""

import testtools

from tests.unit.engine.test_steal import S
from tests.unit.engine.test_steal import guest


class TestView(testtools.TestCase):
    """What status and top draw from a plan and two samples."""

    def plan(self, *guests):
        from nova_pinning_hooks.engine import plan as plan_mod
        return plan_mod.Plan(
            guests=tuple(plan_mod.GuestPlan(
                uuid, uuid, mode, 0, 'memory', {0: frozenset({1})},
                frozenset({1}), {}, 'rule', 'why')
                for uuid, mode in guests),
            pool=frozenset({1}), pool_by_node={0: frozenset({1})},
            allocation_ratio=4.0, total_vcpus=len(guests),
            node_vcpus={0: len(guests)}, cross_node_vcpus=0)

    def test_every_guest_gets_a_line(self):
        from nova_pinning_hooks.engine import plan as plan_mod
        from nova_pinning_hooks.observe import stealview
        p = self.plan(('busy', 'node-range'), ('stopped', 'node-range'),
                      ('fresh', 'node-range'))
        change = plan_mod.PinChange('fresh', 'fresh',
                                    plan_mod.ChangeKind.VCPU, 0, None,
                                    frozenset({1}))
        m = stealview.measure(
            p, {'busy': guest('busy', (0, 0)),
                'stopped': guest('stopped', (0, 0))},
            {'busy': guest('busy', (S // 2, S // 2)),
             'fresh': guest('fresh', (0, 0)),
             'unplanned': guest('unplanned', (0, 0))}, 1.0, [change])
        text = '\n'.join(stealview.lines(m, threshold=50))
        rows = {ln.split()[1] if ln.startswith('!') else ln.split()[0]:
                ln.split() for ln in stealview.guest_rows(m, 50)[1:]}
        self.assertEqual(['!', 'busy', 'node-range', '0', 'all:1', '50.0',
                          '50.0', '50.0'], rows['busy'])
        self.assertEqual(['stopped', 'node-range', '0', 'all:1', '-', '-',
                          'gone'], rows['stopped'])
        # Pins not yet as planned: marked, and the legend says so.
        self.assertEqual(['fresh', 'node-range*', '0', 'all:1', '-', '-',
                          'new'], rows['fresh'])
        self.assertIn('* = pins not yet as planned', text)
        self.assertEqual(['unplanned', '?', '-', '-', '-', '-', 'new'],
                         rows['unplanned'])
        self.assertIn('node 0: vCPU demand 1.00 CPUs, pool 1 CPUs, '
                      '3 guest(s), worst busy 50.0 % steal', text)
        self.assertIn('no home node: vCPU demand 0.00 CPUs, cross-node or '
                      'unplaced, 1 guest(s), no guest measured', text)
