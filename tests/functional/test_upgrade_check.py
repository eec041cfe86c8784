"""``nova-pinning-status upgrade check`` against the real libvirtd, with
real guests carrying pins of ours (libvirt 9.0 here).

Guests are defined as nova defines them (persistent, no pin in their
definition), started, and pinned by a pass; then the command is run as
an operator runs it, in its own process. What it reports is checked
against libvirt's own view (``virsh dumpxml`` and ``--inactive``, the
comparison doc/source/admin/nova.rst gives operators) through "Switch it
off": pinned, released (the pins stay in the live XML; release writes
them to every managed guest), restarted (gone).
"""

import json
import os
import subprocess
import sys
import time

from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.functional import base

DEFINED_XML = base.GUEST_XML


class TestUpgradeCheck(base.FunctionalTestCase):

    def define_and_start(self, name, vcpus=1):
        """A persistent guest, as nova defines one; undefined and
        destroyed at the end of the test."""
        name = base.PREFIX + name
        self.undefine(name)  # a crashed earlier run's
        dom = self.conn.defineXML(DEFINED_XML.format(
            type=self.virt_type, name=name, vcpus=vcpus))
        self.addCleanup(self.undefine, name)
        dom.create()
        return dom

    def undefine(self, name):
        found = [d for d in self.conn.listAllDomains() if d.name() == name]
        if not found:
            return
        dom, = found
        try:
            dom.destroy()
        except self.libvirt.libvirtError:
            pass  # not running
        dom.undefine()

    def rebind(self):
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        result = rec.run_pass()
        self.assertIsNone(result.error)
        return result

    def config(self, drivers=('messagingv2', 'nova_pinning'), extra=''):
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[oslo_messaging_notifications]\n')
            for driver in drivers:
                f.write('driver = %s\n' % driver)
            f.write('[nova_pinning]\nconnection_uri = %s\n'
                    'allocation_ratio = 4.0\nlock_path = %s\n'
                    'overcommit_file = %s\n%s'
                    '[nova_pinning_isolation]\nstate_file = %s\n'
                    % (base.URI, self.tmp, os.path.join(self.tmp, 'oc.json'),
                       extra, os.path.join(self.tmp, 'isolation.json')))
        return path

    def check(self, config):
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.status',
             '--config-file', config, 'upgrade', 'check', '--json'],
            capture_output=True, text=True, timeout=300, cwd='/')
        took = time.monotonic() - start
        self.assertIn(proc.returncode, (0, 1, 2), proc.stderr)
        doc = json.loads(proc.stdout)
        return proc.returncode, {c['check']: (c['result'], c['details'])
                                 for c in doc['checks']}, took

    def ours(self, details):
        """Our guests the pinned-guests check names."""
        return sorted(name for name in details.replace(';', ' ').replace(
            ',', ' ').split() if name.startswith(base.PREFIX))

    def recipe(self):
        """doc/source/admin/nova.rst's comparison, run as written there: the
        running guests whose live pins differ from their definition's."""
        proc = subprocess.run(
            ['bash', '-c', 'for d in $(virsh list --name); do diff '
             '<(virsh dumpxml --inactive $d | grep pin) <(virsh dumpxml $d '
             '| grep pin) >/dev/null || echo $d; done'],
            capture_output=True, text=True, timeout=120)
        self.assertEqual('', proc.stderr)
        return sorted(n for n in proc.stdout.split()
                      if n.startswith(base.PREFIX))

    def test_guests_with_our_pins_through_switching_off(self):
        a = self.define_and_start('a')
        b = self.define_and_start('b')
        fresh = self.define_and_start('fresh')
        self.boot('transient')  # createXML: no persistent definition
        config = self.config()

        # Before any pass: nothing of ours on our guests.
        code, results, _ = self.check(config)
        self.assertEqual([], self.ours(results['pinned guests'][1]))
        self.assertEqual([], self.recipe())

        # A pass pins every guest, the transient one too.
        self.rebind()
        for dom in (a, b, fresh):
            self.assertTrue(self.libvirt_pins(dom))
        # "fresh" is restarted from its definition: no pin of ours left.
        fresh.destroy()
        fresh.create()
        pins = {dom.name(): self.libvirt_pins(dom) for dom in (a, b)}
        code, results, took = self.check(config)
        result, details = results['pinned guests']
        self.assertEqual(1, result, details)
        self.assertGreaterEqual(code, 1)
        self.assertEqual([a.name(), b.name()], self.ours(details))
        self.assertEqual(self.recipe(), self.ours(details))
        self.assertIn('keep [oslo_messaging_notifications] driver = '
                      'nova_pinning until each has restarted', details)
        # Read-only: the pins are as the pass left them.
        self.assertEqual(pins, {dom.name(): self.libvirt_pins(dom)
                                for dom in (a, b)})
        self.assertLess(took, 120)

        # Switched off: release gives the guests back to nova's CPUs,
        # and the live XML still lists those pins (libvirt 9.0). It
        # writes one to every managed guest, the one restarted above
        # too (its vCPU on its <vcpu cpuset>, every CPU here): seen here,
        # release's pins are live pins like any other.
        proc = self.cli('release')
        self.assertEqual(0, proc.returncode, proc.stderr)
        code, results, _ = self.check(config)
        self.assertEqual([a.name(), b.name(), fresh.name()],
                         self.ours(results['pinned guests'][1]))
        self.assertEqual(self.recipe(),
                         self.ours(results['pinned guests'][1]))

        # a restarts (nova's hard reboot: a new qemu from the
        # definition): it is no longer named; the driver line gone from
        # the configuration is.
        a.destroy()
        a.create()
        code, results, _ = self.check(self.config(drivers=('messagingv2',)))
        result, details = results['pinned guests']
        self.assertEqual(1, result, details)
        self.assertEqual([b.name(), fresh.name()], self.ours(details))
        self.assertEqual(self.recipe(), self.ours(details))
        self.assertIn('this configuration has no driver = nova_pinning',
                      details)

        for dom in (b, fresh):
            dom.destroy()
            dom.create()
        code, results, _ = self.check(config)
        self.assertEqual([], self.ours(results['pinned guests'][1]))
        self.assertEqual([], self.recipe())

    def test_libvirtd_stopped_is_a_bounded_warning(self):
        # SIGSTOP: the socket accepts, the daemon answers nothing.
        config = self.config(extra='libvirt_call_timeout = 2\n')
        pid = base.system_libvirtd_pid()
        os.kill(pid, 19)  # SIGSTOP
        try:
            code, results, took = self.check(config)
        finally:
            os.kill(pid, 18)  # SIGCONT
        result, details = results['pinned guests']
        self.assertEqual(1, result, details)
        self.assertIn('not checked: libvirt at %s' % base.URI, details)
        self.assertLess(took, 60)
