"""A libvirtd that stops answering, then answers again, through the real
client library: passes, scrapes and the agent cost no thread and no
descriptor per try while it hangs, fail at once saying so, and recover
by themselves.

"The daemon" is a relay in a child process: a UNIX socket whose
connections it carries, byte for byte, to the real libvirtd's socket.
Stopped with SIGSTOP it still has connections accepted by the kernel
(its listen backlog) and answers nothing, as a hung libvirtd does; with
SIGCONT it answers again, the blocked call included. The shared libvirtd
itself is never stopped. Counts are this process's (``/proc/self``):
the relay's threads and sockets are its own process's.
"""

import gc
import os
import re
import signal
import subprocess
import sys
import threading
import time

from nova_pinning_hooks.runtime import service
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.observe import settings as observe_settings
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests import fixtures
from tests.functional import base

DAEMON_SOCKET = '/run/libvirt/libvirt-sock'

RELAY = r'''
import os, socket, sys, threading
path, target = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(128)
def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
print('ready', flush=True)
while True:
    client, _ = server.accept()
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    daemon.connect(target)
    for a, b in ((client, daemon), (daemon, client)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
'''

TRIES = 15


def counts():
    """(threads, open descriptors) of this process."""
    return (len(os.listdir('/proc/self/task')),
            len(os.listdir('/proc/self/fd')))


def settled(seconds=5):
    """``counts()`` once two readings 0.3 s apart agree (at most
    ``seconds``): threads that were already ending (a closed scrape's
    worker retiring) and garbage not yet collected are not counted. A
    thread blocked on the hung daemon never ends, so it is counted."""
    deadline = time.monotonic() + seconds
    gc.collect()
    last = counts()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        gc.collect()
        now = counts()
        if now == last:
            break
        last = now
    return last


def up(text):
    match = re.search(r'^nova_pinning_up (\S+)$', text, re.M)
    return float(match.group(1)) if match else None


class HungDaemonTestCase(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        path = os.path.join(self.tmp, 'libvirt-sock')
        self.relay = subprocess.Popen(
            [sys.executable, '-c', RELAY, path, DAEMON_SOCKET],
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(self._end_relay)
        self.assertEqual('ready', self.relay.stdout.readline().strip())
        self.cf.config(group='nova_pinning',
                       connection_uri='qemu+unix:///system?socket=' + path,
                       libvirt_call_timeout=1, pass_timeout=10,
                       lock_timeout=5)

    def _end_relay(self):
        self.relay.send_signal(signal.SIGCONT)
        self.relay.kill()
        self.relay.wait(10)
        self.relay.stdout.close()

    def hang(self):
        self.relay.send_signal(signal.SIGSTOP)

    def answer(self):
        self.relay.send_signal(signal.SIGCONT)

    def scrape(self):
        """One scrape as ``nova-pinning metrics`` makes it: a new
        reconciler and connection. (text, errors, seconds)"""
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        start = time.monotonic()
        try:
            view = metrics.read_view(rec, observe_settings.read(self.conf),
                                     isolation=False)
        finally:
            rec.close()
        return (metrics.exposition(view), view.errors,
                time.monotonic() - start)

    def until(self, predicate, seconds=30):
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True


class TestPassesAndScrapes(HungDaemonTestCase):

    def test_flat_while_it_hangs_and_recovered_when_it_answers(self):
        self.boot('hung')
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        self.assertIsNone(rec.run_pass().error)
        text, errors, _ = self.scrape()
        self.assertEqual(([], 1.0), (errors, up(text)))

        self.hang()
        first = rec.run_pass()
        self.assertIn('did not return within 1 s', first.error)
        before = settled()
        messages = []
        for _ in range(TRIES):
            start = time.monotonic()
            result = rec.run_pass()
            messages.append((result.error, time.monotonic() - start))
            text, errors, took = self.scrape()
            messages.append((' '.join(errors), took))
            self.assertEqual(0.0, up(text))
        # Not one more thread or descriptor for the passes and scrapes
        # made while the daemon hangs (before: one of each per try).
        self.assertEqual(before, settled(), messages)
        # Each failed at once, without a call of its own to time out (that
        # would say "did not return within"): no timing asserted here.
        for message, _ in messages:
            self.assertIn('libvirtd does not answer', message)

        # The daemon answers again: the blocked call returns, and the
        # next pass and scrape reach it by themselves.
        self.answer()
        self.assertTrue(self.until(lambda: rec.run_pass().error is None),
                        'no pass succeeded after the daemon answered')
        text, errors, _ = self.scrape()
        self.assertEqual(([], 1.0), (errors, up(text)))
        # The abandoned call's thread ends (and the closed scrapes'
        # workers); the open connection's worker takes its place.
        self.assertTrue(self.until(lambda: counts()[0] <= before[0], 10),
                        (before, counts(), threading.enumerate()))


class TestAgent(HungDaemonTestCase):

    def test_the_agent_stays_flat_and_recovers(self):
        self.boot('hung')
        self.cf.config(group='nova_pinning', resync_interval=1,
                       coalesce_delay=0.05)
        agent = service.BindingService(runtime_settings.read(self.conf))
        fixtures.run_agent(self, agent, 15)
        self.assertTrue(self.until(
            lambda: agent.last_result is not None and
            agent.last_result.error is None),
            'the agent\'s first pass did not succeed')

        self.hang()
        self.assertTrue(self.until(
            lambda: 'does not answer' in (agent.last_result.error or '')),
            agent.last_result.error)
        before = settled()
        passes = sum(agent.pass_metrics.stats.passes.values())
        time.sleep(TRIES)  # a resync pass a second, and vCPU polls
        self.assertEqual(before, settled())
        self.assertIn('libvirtd does not answer', agent.last_result.error)
        self.assertGreaterEqual(
            sum(agent.pass_metrics.stats.passes.values()) - passes,
            TRIES // 2)

        self.answer()
        self.assertTrue(self.until(
            lambda: agent.last_result.error is None, 40),
            agent.last_result.error)
