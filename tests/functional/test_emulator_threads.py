"""``emulator_threads`` on a real guest (this host: 2 CPUs, 1 NUMA node).

A 1-vCPU guest with an IOThread, alone on the host, is bound one-to-one
to one pCPU; the other pCPU of the pool is held by no one-to-one vCPU.
With ``shared`` the guest's emulator thread (qemu's main thread, and
every thread in libvirt's emulator cgroup) and its IOThread run there;
with ``guest`` they are back on the vCPU's pCPU. Checked in libvirt and
in the kernel (``Cpus_allowed_list`` of each thread in /proc).
"""

import json

from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.functional import base



class TestEmulatorThreads(base.FunctionalTestCase):

    def boot_with_iothread(self, name):
        name = base.PREFIX + name
        xml = base.GUEST_XML.format(type=self.virt_type, name=name,
                                    vcpus=1)
        xml = xml.replace('<vcpu>', '<iothreads>1</iothreads><vcpu>')
        dom = self.conn.createXML(xml, 0)
        self.addCleanup(self._destroy, name)
        return dom

    def rebind(self, setting):
        self.cf.config(group='nova_pinning', emulator_threads=setting)
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        result = rec.run_pass()
        self.assertIsNone(result.error)
        return result

    def iothread_tid(self, dom):
        import libvirt_qemu
        reply = json.loads(libvirt_qemu.qemuMonitorCommand(
            dom, '{"execute": "query-iothreads"}', 0))
        tid, = [t['thread-id'] for t in reply['return']]
        return tid

    def threads(self, dom):
        """(emulator, IOThread) CPUs as the kernel lets them run."""
        pid = self.pid(dom)
        return (self.cpus_allowed(pid),
                self.cpus_allowed(pid, self.iothread_tid(dom)))

    def test_shared_puts_them_on_the_free_pcpu(self):
        dom = self.boot_with_iothread('emu')
        first = self.rebind('shared')
        gp, = [gp for gp in first.plan.guests if gp.name == dom.name()]
        self.assertEqual(('dedicated', 'pool-free'),
                         (gp.mode, gp.emulator_rule))
        vcpu = self.libvirt_pins(dom)[0]
        self.assertEqual(1, len(vcpu))
        free = first.plan.pool_by_node[gp.home_node] - vcpu
        self.assertTrue(free)
        self.assertPinned(dom, {0: vcpu})
        live = self.libvirt.VIR_DOMAIN_AFFECT_LIVE
        self.assertEqual(free, frozenset(
            i for i, on in enumerate(dom.emulatorPinInfo(live)) if on))
        self.assertEqual([(1, free)], [
            (t, frozenset(i for i, on in enumerate(m) if on))
            for t, m in dom.ioThreadInfo(live)])
        self.assertEqual((free, free), self.threads(dom))
        # The vCPU thread stays alone on its pCPU.
        self.assertEqual({0: vcpu}, self.kernel_pins(dom))
        second = self.rebind('shared')
        self.assertEqual(([], 0), (second.changes, second.calls['write']))

        # Back to ``guest``: emulator and IOThread on the vCPU's pCPU;
        # the vCPU does not move.
        third = self.rebind('guest')
        self.assertEqual({'emulator', 'iothread'},
                         {c.kind for c in third.changes})
        self.assertEqual((vcpu, vcpu), self.threads(dom))
        self.assertPinned(dom, {0: vcpu})
