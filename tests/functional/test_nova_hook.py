"""A hooked operation end to end on the real libvirtd.

A stand-in for ComputeManager whose ``_do_build_and_run_instance`` boots
a real qemu guest, as nova's does, is hooked exactly as nova-compute is;
after the operation returns the pass runs in the agent's thread and the
guest's vCPU threads are pinned, as /proc shows.
"""

from nova_pinning_hooks import cpuset
from nova_pinning_hooks.nova import agent
from nova_pinning_hooks.nova import hooks
from tests.fixtures import register_nova_options
from tests.functional import base


class TestHookedOperation(base.FunctionalTestCase):

    def test_build_then_pins_in_proc(self):
        test = self

        class Manager:
            def _do_build_and_run_instance(self, context, instance):
                test.guest = test.boot(instance, vcpus=2)
                return 'built'

        self.addCleanup(agent.deactivate)
        self.addCleanup(hooks.reset)
        self.cf.config(group='nova_pinning', coalesce_delay=0,
                       periodic_interval=0)
        conf = self.conf
        register_nova_options(conf)
        a = agent.activate(conf, manager_cls=Manager)
        self.assertFalse(a.out_of_process)
        a.coalescer.request('settle', wait=True, timeout=30)

        self.assertEqual('built', Manager()._do_build_and_run_instance(
            None, 'hooked'))
        # The hook only queued a request; wait for the pass it caused.
        self.assertTrue(a.coalescer.request('wait', wait=True, timeout=30))
        self.assertIsNone(a.last_result.error)
        pins = self.libvirt_pins(self.guest)
        self.assertEqual({cpuset.parse('0'), cpuset.parse('1')},
                         set(pins.values()))
        self.assertPinned(self.guest, pins)
