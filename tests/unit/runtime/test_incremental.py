"""Incremental passes run by the binding service (``runtime.service``):
repairs driven by libvirt events alone, and event callbacks that never
wait for a pass. The host model and the passes themselves:
tests/unit/passes/test_incremental.py.

Everything through the fake libvirt, whose pin calls emit tunable events
as libvirt's do, and whose ``emit`` and ``restart_daemon`` stand in for
libvirt's event thread.
"""

import threading
import time

from testtools.content import text_content

from nova_pinning_hooks.runtime import service
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests import fixtures as fixtures_mod
from tests.unit.passes.test_incremental import BY_HAND
from tests.unit.passes.test_incremental import IncrementalTestCase


class TestAgentRepairs(IncrementalTestCase):
    """The service alone, driven by events only (no resync)."""

    def start_agent(self):
        self.cf.config(group='nova_pinning', coalesce_delay=0.05,
                       resync_interval=0)
        agent = service.BindingService(runtime_settings.read(self.conf),
                                       service.Role(event_loop=False))
        return fixtures_mod.run_agent(self, agent)

    def wait_for(self, check, message):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.01)
        self.fail(message)

    def test_new_guest_and_hand_made_pin_and_daemon_restart(self):
        self.start_agent()
        a = self.boot('a', 2)  # its start event alone drives the pass
        self.wait_for(lambda: len(a.vcpu_pins) == 2, 'a never pinned')
        time.sleep(0.3)  # the read-back pass of its own writes
        pins = dict(a.vcpu_pins)
        a.pinVcpuFlags(0, BY_HAND, 1)  # by hand
        self.wait_for(lambda: a.vcpu_pins == pins, 'pin never repaired')
        old = self.fake.connections[-1]
        self.fake.restart_daemon()  # close event: a new connection
        self.wait_for(lambda: self.fake.connections[-1] is not old and
                      len(self.fake.connections[-1].callbacks) == 7,
                      'no new connection with events')
        time.sleep(0.3)
        a.pinVcpuFlags(1, BY_HAND, 1)
        self.wait_for(lambda: a.vcpu_pins == pins,
                      'pin never repaired after the daemon restarted')


class TestCallbacksNeverBlock(IncrementalTestCase):

    def test_an_event_during_a_hung_pass_returns_at_once(self):
        # libvirt's event thread (nova's, inside nova-compute) must never
        # wait for a pass, its lock or a libvirt call.
        release = threading.Event()
        self.addCleanup(release.set)
        self.cf.config(group='nova_pinning', coalesce_delay=0,
                       libvirt_call_timeout=5, resync_interval=0)
        agent = service.BindingService(runtime_settings.read(self.conf),
                                       service.Role(event_loop=False))
        fixtures_mod.run_agent(self, agent)
        self.assertTrue(agent.coalescer.request('settle', wait=True,
                                                timeout=10))
        self.fake.hang['XMLDesc'] = release
        # Runs first: no pass may hang while the agent stops.
        self.addCleanup(release.set)
        self.addCleanup(self.fake.hang.pop, 'XMLDesc', None)
        a = self.boot('a', 2)  # its event starts a pass that hangs
        deadline = time.monotonic() + 5
        while self.fake.calls['XMLDesc'] == 0:
            self.assertLess(time.monotonic(), deadline, 'no pass started')
            time.sleep(0.01)
        took = []
        for _ in range(20):
            start = time.monotonic()
            self.fake.emit(a, 'TUNABLE', {})
            took.append(time.monotonic() - start)
        # A callback that waited for the pass would take the libvirt call
        # timeout (5 s) at least: a second tells the two apart on a
        # loaded machine.
        self.addDetail('emit', text_content(
            'slowest of 20: %.4f s' % max(took)))
        self.assertLess(max(took), 1.0)
        self.assertEqual({a.UUIDString()}, agent.model._marked)
        del self.fake.hang['XMLDesc']
        release.set()
        self.assertTrue(agent.coalescer.request('settle', wait=True,
                                                timeout=10))
        self.assertEqual(2, len(a.vcpu_pins))
