"""A hooked operation end to end on the real libvirtd.

A stand-in for ComputeManager whose ``_do_build_and_run_instance`` boots
a real qemu guest, as nova's does, is hooked exactly as nova-compute is;
after the operation returns the pass runs in the agent's thread and the
guest's vCPU threads are pinned, as /proc shows.
"""

import subprocess

from testtools.content import text_content

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import hooks
from tests.fixtures import FakeNovaLibvirtFixture
from tests.fixtures import passes_beyond
from tests.fixtures import register_nova_options
from tests.functional import base


class TestHookedOperation(base.FunctionalTestCase):

    def test_build_then_pins_in_proc(self):
        test = self

        class Manager:
            def _do_build_and_run_instance(self, context, instance):
                test.guest = test.boot(instance, vcpus=2)
                return 'built'

        self.addCleanup(activation.deactivate)
        self.addCleanup(hooks.reset)
        self.useFixture(FakeNovaLibvirtFixture())  # nova is not installed
        self.cf.config(group='nova_pinning', coalesce_delay=0,
                       periodic_interval=0)
        conf = self.conf
        register_nova_options(conf)
        a = activation.activate(conf, manager_cls=Manager)
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


class TestEventsInNovaCompute(base.FunctionalTestCase):
    """Native-thread nova: after init_host, whose driver registers and
    runs libvirt's event loop (here ``virt.start_event_loop`` stands in
    for ``nova.virt.libvirt.host.Host._init_events``), the agent follows
    libvirt's domain events on that loop: a guest nova did not start (no
    hook ran) is pinned all the same, within about a second."""

    def test_a_guest_started_behind_novas_back_is_pinned(self):
        import time

        from nova_pinning_hooks.host import virt

        class Manager:
            def init_host(self):
                virt.start_event_loop()  # what nova's driver does here
                return None

        self.addCleanup(activation.deactivate)
        self.addCleanup(hooks.reset)
        self.useFixture(FakeNovaLibvirtFixture())  # nova is not installed
        self.cf.config(group='nova_pinning', periodic_interval=0,
                       reserved_cpus='0',
                       hooked_methods=['init_host'])
        conf = self.conf
        register_nova_options(conf)
        a = activation.activate(conf, manager_cls=Manager)
        self.assertFalse(a.out_of_process)
        Manager().init_host()
        self.assertTrue(a.coalescer.request('settle', wait=True,
                                            timeout=30))
        self.assertTrue(a.watching)
        passes = a.coalescer.passes

        dom = self.boot('behind-novas-back')  # no hook runs for this
        created = time.monotonic()
        deadline = created + 30
        while self.libvirt_pins(dom) != {0: frozenset({1})}:
            self.assertLess(time.monotonic(), deadline,
                            'never pinned: no event reached the agent')
            time.sleep(0.02)
        pinned = time.monotonic()
        self.assertPinned(dom, {0: frozenset({1})})
        self.assertTrue(passes_beyond(a.coalescer, passes),
                        'no pass counted after %d' % passes)
        self.assertIn('LIFECYCLE event of %s' % dom.name(),
                      [r for _, _, r in a.requests])
        # How long it took is a detail, not a bound (periodic passes are
        # off: only an event can have pinned it).
        self.addDetail('created->pinned', text_content(
            '%.3f s' % (pinned - created)))


class TestHotPlugInNovaCompute(base.FunctionalTestCase):
    """Native-thread nova (nova 34's default): the passes run on a thread
    of nova-compute, and libvirt (9.0) raises no event for ``virsh
    setvcpus --live``. The resync and the periodic pass are off, so only
    the runtime's vCPU count poll can bind the new vCPU: before the
    nova runtime and ``nova-pinning agent`` shared one
    ``BindingService``, only the agent polled, and this vCPU ran
    anywhere until the next resync."""

    def test_a_hot_plugged_vcpu_is_bound_in_threaded_mode(self):
        import time

        class Manager:
            def init_host(self):
                return None

        self.addCleanup(activation.deactivate)
        self.addCleanup(hooks.reset)
        self.useFixture(FakeNovaLibvirtFixture())  # nova is not installed
        self.cf.config(group='nova_pinning', periodic_interval=0,
                       resync_interval=0, vcpu_poll_interval=0.5,
                       reserved_cpus='0', hooked_methods=['init_host'])
        conf = self.conf
        register_nova_options(conf)
        a = activation.activate(conf, manager_cls=Manager)
        self.assertFalse(a.out_of_process)
        self.assertTrue(a.coalescer.request('settle', wait=True,
                                            timeout=30))
        dom = self.boot('hotplug-in-nova', vcpus=2, current=1)
        # As nova's hooks would: passes until the new guest is pinned (a
        # guest still starting is left to the next pass).
        deadline = time.monotonic() + 30
        while self.libvirt_pins(dom) != {0: frozenset({1})}:
            self.assertLess(time.monotonic(), deadline,
                            'never pinned: %r' % (a.last_result,))
            a.request('a hook')
            time.sleep(0.2)
        # Let the passes our own writes' tunable events ask for go by
        # (no events here: nova's loop never ran; still, settle): every
        # request so far served, not a fixed time.
        self.assertTrue(a.coalescer.request('settle', wait=True,
                                            timeout=60))
        passes = a.coalescer.passes
        subprocess.run(['virsh', '-c', base.URI, 'setvcpus', dom.name(),
                        '2', '--live'], check=True, capture_output=True,
                       timeout=30)
        plugged = time.monotonic()
        # Two vCPUs on one pool CPU: a node range, both on CPU 1.
        want = {0: frozenset({1}), 1: frozenset({1})}
        deadline = plugged + 30
        while self.libvirt_pins(dom) != want:
            self.assertLess(time.monotonic(), deadline,
                            'the hot-plugged vCPU was never bound '
                            '(pins %r)' % self.libvirt_pins(dom))
            time.sleep(0.02)
        bound = time.monotonic()
        self.assertPinned(dom, want)
        self.assertTrue(passes_beyond(a.coalescer, passes),
                        'no pass counted after %d' % passes)
        # How long it took is a detail, not a bound (a poll every 0.5 s).
        self.addDetail('plugged->bound', text_content(
            '%.3f s' % (bound - plugged)))
