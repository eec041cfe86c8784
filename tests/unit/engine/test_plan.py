"""The plan's typed names: ``Mode`` and ``ChangeKind`` read and print
as the plain names they replaced, and each kind carries its facts."""

import json

import testtools

from nova_pinning_hooks.engine import plan as plan_mod

Kind = plan_mod.ChangeKind
Mode = plan_mod.Mode


def change(uuid, kind):
    return plan_mod.PinChange(uuid, uuid, kind, None, None, frozenset({1}))


class TestNames(testtools.TestCase):

    def test_modes_print_and_serialise_as_their_names(self):
        for mode in Mode:
            self.assertEqual(mode.value, str(mode))
            self.assertEqual('%-20s|' % mode.value, '%-20s|' % mode)
            self.assertEqual('{:>20}'.format(mode.value),
                             '{:>20}'.format(mode))
            self.assertEqual(json.dumps(mode.value), json.dumps(mode))
            self.assertEqual(mode, mode.value)

    def test_kinds_print_and_serialise_as_their_names(self):
        self.assertEqual(['vcpu', 'emulator', 'iothread', 'numa'],
                         [str(k) for k in Kind])
        self.assertEqual('"numa"', json.dumps(Kind.NUMA))
        self.assertIs(Kind.VCPU, Kind('vcpu'))


class TestPending(testtools.TestCase):

    def test_a_nodeset_alone_is_not_a_pending_pin(self):
        changes = [change('a', Kind.NUMA), change('b', Kind.EMULATOR),
                   change('b', Kind.VCPU), change('c', Kind.IOTHREAD),
                   change('c', Kind.NUMA)]
        self.assertEqual({'b': 2, 'c': 1}, plan_mod.pending_pins(changes))
        self.assertEqual(3, plan_mod.pin_changes(changes))
