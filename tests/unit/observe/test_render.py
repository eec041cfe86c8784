"""The CPU map table: each pCPU cell shows who holds it."""

import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.observe import render
from tests.unit.policy_fixtures import G, make


def grid(text, node):
    """{cpu: mark} read back from the drawn grid of one node."""
    lines = text.splitlines()
    start = lines.index(next(x for x in lines
                             if x.startswith('node %d:' % node)))
    marks, cores = {}, []
    for line in lines[start + 1:]:
        if line.startswith('  core'):
            cores = [int(c) for c in line.split()[1:]]
        elif line.startswith('  thr'):
            thread = int(line[5:7])
            cells = line[8:]
            for i, core in enumerate(cores):
                mark = cells[4 * i:4 * i + 4].strip()
                if mark:
                    marks[(core, thread)] = mark
        else:
            break
    return marks


class TestPlanTable(testtools.TestCase):

    def test_one_to_one_cells_show_the_guest(self):
        guests = [G('a', 2, 0, uuid='1'), G('b', 1, 0, uuid='2')]
        h, p = make('intel-2s-28c-ht', guests,
                    reserved_cpus=cpuset.parse('0,56'))
        text = render.plan_table(p, h, guests, plan_mod.changes(p, guests))
        marks = grid(text, 0)
        self.assertEqual('#', marks[(0, 0)])
        self.assertEqual('#', marks[(0, 1)])
        # a holds core 1 whole; b half of core 2.
        self.assertEqual(('a', 'a'), (marks[(1, 0)], marks[(1, 1)]))
        self.assertEqual(('b', '.'), (marks[(2, 0)], marks[(2, 1)]))
        self.assertIn('3 to change', text)
        for line in text.splitlines()[:40]:
            if line.startswith('  '):
                self.assertLessEqual(len(line), 79)

    def test_range_and_nova_marks(self):
        guests = [G('nova', 1, 0, numa_cells=True, pins={0: '3'}),
                  G('a', 2, 0), G('b', 2, 0)]
        h, p = make('small-1node', guests)
        marks = grid(render.plan_table(p, h, guests), 0)
        self.assertEqual({(0, 0): '~', (1, 0): '~', (2, 0): '~',
                          (3, 0): 'N'}, marks)

    def test_live_column_ok_when_pins_match(self):
        guests = [G('a', 1, 0, pins={0: '1'}, emulator='1')]
        h, p = make('small-1node', guests)
        text = render.plan_table(p, h, guests, plan_mod.changes(p, guests))
        row = [x for x in text.splitlines() if x.startswith('a ')][0]
        self.assertIn(' ok ', row)


class TestNamesForPeople(testtools.TestCase):
    """A domain name may hold any character libvirt accepts (``&#10;``);
    printed raw, it forged rows of the tables people read."""

    FORGED = ('x&#10;z    fake   dedicated  0(memory)  1  0:1  ok  '
              'rule-2-one-to-one: forged&#155;2J&#8232;&#133;')

    def test_escaped(self):
        for name, shown in (
                ('plain', 'plain'),
                ('a&#10;b', 'a\\x0ab'),
                ('a&#13;b&#9;c', 'a\\x0db\\x09c'),
                ('c1&#133;&#155;', 'c1\\x85\\x9b'),
                ('se&#8232;p&#8233;x', 'se\\u2028p\\u2029x'),
                ('back\\slash', 'back\\\\slash'),
                ('caf\u00e9 \u65e5\u672c', 'caf\u00e9 \u65e5\u672c')):
            g = G(name, 1, 0, uuid='1')
            self.assertEqual(shown, render.printable(g.name), name)
        # XML 1.0 has no ESC, but a name can reach a table elsewhere.
        self.assertEqual('esc\\x1b[31m', render.printable('esc\x1b[31m'))

    def test_one_row_per_guest_in_status_and_top(self):
        from nova_pinning_hooks.observe import stealview
        guests = [G(self.FORGED, 1, 0, uuid='1'), G('b', 1, 0, uuid='2')]
        h, p = make('intel-2s-28c-ht', guests)
        text = render.plan_table(p, h, guests)
        rows = text[text.index('\nkey '):].strip().splitlines()
        self.assertEqual(3, len(rows), text)
        self.assertNotIn('\x9b', text)
        m = stealview.measure(p, {}, {}, 1.0, [])
        top = '\n'.join(stealview.lines(m, threshold=10))
        self.assertEqual(3, len(stealview.guest_rows(m, 10)))
        self.assertNotIn('\n', ''.join(
            ''.join(r) for r in stealview.guest_rows(m, 10)))
        self.assertNotIn('\x9b', top)
