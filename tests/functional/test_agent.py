"""``nova-pinning agent`` against the real libvirtd: passes driven by
libvirt's events, in its own process, as an operator runs it.

With real qemu guests, read back from libvirt and the kernel: a guest
created behind its back is pinned, and a pin changed with ``virsh vcpupin
--live`` behind its back is put back, with the periodic resync off, so
that only libvirt's events can have driven the pass; SIGTERM stops it
with exit status 0, the host lock free. How long each took is recorded
in the test's details, never asserted: speed is a benchmark's figure
(doc/source/reference/performance.rst), and a timed test fails on a loaded
machine
where the behaviour is right.
"""

import os
import signal
import subprocess
import time

from testtools.content import text_content

from nova_pinning_hooks.passes import passlock
from tests.functional import base


class AgentTestCase(base.FunctionalTestCase):

    options = {}

    def setUp(self):
        super().setUp()
        # CPU 0 for the host: a lone 1-vCPU guest gets CPU 1 one-to-one.
        self.cf.config(group='nova_pinning', reserved_cpus='0',
                       **self.options)
        self.log = os.path.join(self.tmp, 'agent.log')
        with open(self.log, 'w') as err:
            self.agent = subprocess.Popen(
                self.cli_argv('agent', options=self.options),
                cwd=base.TOP,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=err, text=True)
        self.addCleanup(self._kill)
        # Ready once its first pass is logged.
        self.wait_for(lambda: 'rebinding pass' in self.log_text(), 30,
                      'the agent ran no first pass')

    def _kill(self):
        if self.agent.poll() is None:
            self.agent.kill()
            self.agent.wait(10)

    def log_text(self):
        if self.agent.poll() is not None:
            with open(self.log) as f:
                raise AssertionError('the agent exited %d: %s' % (
                    self.agent.returncode, f.read()[-2000:]))
        with open(self.log) as f:
            return f.read()

    @staticmethod
    def wait_for(check, seconds, message):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check():
                return time.monotonic()
            time.sleep(0.02)
        raise AssertionError(message)


class TestAgent(AgentTestCase):

    # No resync: a pin can only come from a pass an event asked for.
    options = {'resync_interval': 0}

    def test_follows_libvirt_events_and_stops_on_sigterm(self):
        start = time.monotonic()
        dom = self.boot('agent-a')
        created = time.monotonic()
        pinned = self.wait_for(
            lambda: self.libvirt_pins(dom) == {0: frozenset({1})}, 30,
            'the new guest was never pinned to CPU 1')
        self.assertPinned(dom, {0: frozenset({1})})
        self.addDetail('created->pinned', text_content(
            '%.3f s' % (pinned - created)))
        self.addDetail('boot', text_content('%.3f s' % (created - start)))

        # virsh vcpupin --live, behind the agent's back.
        subprocess.run(['virsh', '-c', base.URI, 'vcpupin', dom.name(),
                        '0', '0-1', '--live'], check=True,
                       capture_output=True, timeout=30)
        changed = time.monotonic()
        self.assertEqual({0: frozenset({0, 1})}, self.libvirt_pins(dom))
        repaired = self.wait_for(
            lambda: self.libvirt_pins(dom) == {0: frozenset({1})}, 30,
            'the hand-made pin was never repaired')
        self.assertPinned(dom, {0: frozenset({1})})
        self.addDetail('changed->repaired', text_content(
            '%.3f s' % (repaired - changed)))

        self.agent.send_signal(signal.SIGTERM)
        status = self.agent.wait(15)
        with open(self.log) as f:
            self.assertEqual(0, status, f.read()[-2000:])
        self.assertEqual('', self.agent.stdout.read())
        # The host lock is free at once.
        with passlock.PassLock(self.tmp, 0.5):
            pass

    def test_recreated_with_the_same_name_and_uuid_is_pinned_again(self):
        # Destroyed and created again at once, same name and UUID: a new
        # domain id and new qemu threads, unpinned; the agent keys its
        # model by UUID and must not take it for the guest it bound.
        dom = self.boot('agent-r')
        self.wait_for(lambda: self.libvirt_pins(dom) == {0: frozenset({1})},
                      30, 'the guest was never pinned to CPU 1')
        uuid, name, old_id = dom.UUIDString(), dom.name(), dom.ID()
        dom.destroy()
        xml = base.GUEST_XML.format(type=self.virt_type, name=name,
                                    vcpus=1).replace(
            '</name>', '</name><uuid>%s</uuid>' % uuid)
        calling = time.monotonic()
        again = self.conn.createXML(xml, 0)
        created = time.monotonic()  # running now
        self.assertEqual(uuid, again.UUIDString())
        self.assertNotEqual(old_id, again.ID())
        pinned = self.wait_for(
            lambda: self.libvirt_pins(again) == {0: frozenset({1})}, 30,
            'the re-created guest was never pinned to CPU 1')
        self.assertPinned(again, {0: frozenset({1})})
        # The pass the destroy's event asked for may bind it while
        # createXML is still returning: pinned - created is then ~0.
        self.addDetail('re-created->pinned', text_content(
            '%.3f s after createXML returned, %.3f s after it was called'
            % (pinned - created, pinned - calling)))


class TestHotPlug(AgentTestCase):
    """libvirt 9.0 raises no event for ``virsh setvcpus --live`` (every
    event id registered, none fired); the agent's vCPU count poll finds
    it. The resync is off here, so nothing else could bind it."""

    options = {'resync_interval': 0, 'vcpu_poll_interval': 1.0}

    def test_a_hot_plugged_vcpu_is_bound(self):
        dom = self.boot('hotplug', vcpus=2, current=1)
        self.wait_for(lambda: self.libvirt_pins(dom) == {0: frozenset({1})},
                      30, 'the guest was never pinned to CPU 1')
        # Let the pass our own writes' tunable events ask for go by, so
        # that nothing but the poll can see the new vCPU.
        time.sleep(1.5)
        subprocess.run(['virsh', '-c', base.URI, 'setvcpus', dom.name(),
                        '2', '--live'], check=True, capture_output=True,
                       timeout=30)
        plugged = time.monotonic()
        # Two vCPUs on one pool CPU: a node range, both on CPU 1.
        want = {0: frozenset({1}), 1: frozenset({1})}
        bound = self.wait_for(lambda: self.libvirt_pins(dom) == want, 30,
                              'the hot-plugged vCPU was never bound')
        self.assertPinned(dom, want)
        self.addDetail('plugged->bound', text_content(
            '%.3f s' % (bound - plugged)))
        self.assertIn('hot-plug', self.log_text())
