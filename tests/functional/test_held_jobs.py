"""A running guest held by a job of libvirt's is left as it is (issue 34
R3), on the real libvirtd.

The cloud's case is the source of a live migration, which runs until its
switch-over; a migration needs a second host. A live dump is the same
kind of job on one host: an asynchronous job of libvirt's during which
the guest keeps running and a pin call (a modify job) waits. Dumped into
a FIFO nobody reads, it lasts as long as the test wants: qemu's
migration stream stalls on the full pipe while its monitor still answers.
"""

import os
import threading
import time

from nova_pinning_hooks.passes import reconciler
from tests.functional import base


class TestHeldByAJob(base.FunctionalTestCase):

    def dump_into_a_fifo(self, dom):
        """Start a live dump of ``dom`` into a FIFO nobody reads yet;
        returns a function that drains it (the dump then ends)."""
        fifo = os.path.join(self.tmp, 'dump.fifo')
        os.mkfifo(fifo, 0o600)
        # Open for reading first: libvirt's open for writing then returns.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, reader)
        outcome = []

        def dump():
            try:
                dom.coreDumpWithFormat(
                    fifo, self.libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_RAW,
                    self.libvirt.VIR_DUMP_LIVE)
                outcome.append('done')
            except self.libvirt.libvirtError as exc:
                outcome.append(str(exc))
        thread = threading.Thread(target=dump, daemon=True)
        thread.start()

        def stop():
            try:
                dom.abortJob()
            except self.libvirt.libvirtError:
                pass  # ended already
            thread.join(30)
        self.addCleanup(stop)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if dom.jobStats().get('type') in (
                    self.libvirt.VIR_DOMAIN_JOB_BOUNDED,
                    self.libvirt.VIR_DOMAIN_JOB_UNBOUNDED):
                break
            time.sleep(0.05)
        else:
            self.fail('no dump job on %s: %s' % (dom.name(), outcome))

        def drain():
            os.set_blocking(reader, True)
            while os.read(reader, 1 << 16):
                pass
            thread.join(30)
            return outcome
        return drain

    def test_a_guest_in_a_live_dump_holds_up_no_one(self):
        self.cf.config(group='nova_pinning', libvirt_call_timeout=5)
        a, b = self.boot('a'), self.boot('b')
        drain = self.dump_into_a_fifo(a)
        # Running, held by libvirt's dump job: what the pass must see.
        self.assertEqual(self.libvirt.VIR_DOMAIN_RUNNING, a.state()[0])
        rec = reconciler.Reconciler(self.conf)
        self.addCleanup(rec.close)
        started = time.monotonic()
        result = rec.run_pass()
        took = time.monotonic() - started
        self.assertIsNone(result.error)
        self.assertLess(took, 5)
        skipped = {c.name: why for c, why in result.skipped}
        self.assertIn('being dumped', skipped.get(a.name(), ''), skipped)
        self.assertEqual({b.name()}, {c.name for c in result.applied
                                      if c.name.startswith(base.PREFIX)})
        self.assertPinned(b, self.libvirt_pins(b))
        self.assertEqual(1, len(self.libvirt_pins(b)[0]))
        # The dump ends: the next pass writes a.
        self.assertEqual(['done'], drain())
        result = rec.run_pass()
        self.assertIsNone(result.error)
        self.assertIn(a.name(), {c.name for c in result.applied})
        pins = self.libvirt_pins(a)
        self.assertEqual(1, len(pins[0]))
        self.assertPinned(a, pins)
