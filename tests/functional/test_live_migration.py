"""A real live migration between two libvirt daemons on this machine.

The destination is a second libvirtd (``tools/second-libvirtd.sh``): its
own mount namespace, run and state directories, virtlogd and host UUID,
reached over loopback TCP, and a cpuset hierarchy that gives its guests
CPU 0 only, as a destination host that lacks a CPU, or keeps it
reserved, would. The source guest carries the pins a pass of ours
writes (vCPU and emulator on CPU 1, ``VIR_DOMAIN_AFFECT_LIVE``).

* As nova builds it without the package (``dumpxml --migratable``, which
  carries those pins), the destination XML makes the migration fail: the
  destination cannot put the guest on CPU 1, and the guest stays on the
  source.
* With the package's filter (``migratexml.strip_pins``, what the wrapped
  ``get_updated_guest_xml`` returns to nova; ``tests/nova_functional``
  shows nova's own function wrapped), the migration succeeds, and the
  destination's pass binds the guest to the CPUs it has, as /proc shows.
* The second daemon starts with none of the first's persistent domain
  definitions (a nova-compute there would refuse to start: "My
  hypervisor has existing instances").
"""

import os
import subprocess

from nova_pinning_hooks.engine import migratexml
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.functional import base

SCRIPT = os.path.join(base.TOP, 'tools', 'second-libvirtd.sh')
NAME = base.PREFIX + 'migrating'
DEFINED = base.PREFIX + 'defined-on-source'


class TestLiveMigration(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        # A persistent definition on the source, as a nova host has.
        self.conn.defineXML(base.GUEST_XML.format(
            type=self.virt_type, name=DEFINED, vcpus=1))
        self.addCleanup(self._undefine, DEFINED)
        self.dest_dir = os.path.join(self.tmp, 'second-libvirtd')
        # (the script's own bounds, a loaded host's, speak first)
        proc = subprocess.run([SCRIPT, 'start', self.dest_dir],
                              capture_output=True, text=True, timeout=300)
        self.addCleanup(subprocess.run, [SCRIPT, 'stop', self.dest_dir],
                        capture_output=True, timeout=300)
        if proc.returncode:
            base.require(self, 'second libvirtd did not start: %s'
                         % proc.stderr.strip()[-500:])
        self.dest_uri = proc.stdout.strip().splitlines()[-1]
        self.dest = self.libvirt.open(self.dest_uri)
        self.addCleanup(self.dest.close)
        self.addCleanup(self._destroy_on_dest)

    def _undefine(self, name):
        try:
            self.conn.lookupByName(name).undefine()
        except self.libvirt.libvirtError:
            pass  # not there

    def _destroy_on_dest(self):
        try:
            self.dest.lookupByName(NAME).destroy()
        except self.libvirt.libvirtError:
            pass  # not there: the migration failed or it was destroyed

    def pinned_source_guest(self):
        """A guest on the source, pinned as a pass of ours pins it."""
        dom = self.boot('migrating')
        live = self.libvirt.VIR_DOMAIN_AFFECT_LIVE
        dom.pinVcpuFlags(0, (False, True), live)
        dom.pinEmulator((False, True), live)
        xml = dom.XMLDesc(self.libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        self.assertIn("<vcpupin vcpu='0' cpuset='1'/>", xml)
        self.assertIn("<emulatorpin cpuset='1'/>", xml)
        return dom, xml

    def migrate(self, dom, xml):
        dom.migrateToURI3(
            self.dest_uri,
            {self.libvirt.VIR_MIGRATE_PARAM_DEST_XML: xml},
            self.libvirt.VIR_MIGRATE_LIVE | self.libvirt.VIR_MIGRATE_PEER2PEER)

    def test_the_destination_has_none_of_the_sources_definitions(self):
        source = {d.name() for d in self.conn.listAllDomains(
            self.libvirt.VIR_CONNECT_LIST_DOMAINS_PERSISTENT)}
        self.assertIn(DEFINED, source)
        self.assertEqual(set(), source & {d.name() for d in
                                          self.dest.listAllDomains()})

    def test_our_pins_in_the_xml_make_it_fail(self):
        dom, xml = self.pinned_source_guest()
        exc = self.assertRaises(self.libvirt.libvirtError, self.migrate,
                                dom, xml)
        self.assertIn('cpuset.cpus', str(exc))
        # Nothing moved: the guest still runs on the source.
        self.assertTrue(dom.isActive())
        self.assertEqual([], [d.name() for d in self.dest.listAllDomains()
                              if d.name() == NAME])

    def test_without_our_pins_it_migrates_and_the_destination_binds_it(self):
        dom, xml = self.pinned_source_guest()
        stripped, removed = migratexml.strip_pins(xml)
        self.assertEqual(2, removed)
        self.migrate(dom, stripped)
        moved = self.dest.lookupByName(NAME)
        self.assertTrue(moved.isActive())
        self.assertNotIn(NAME, [d.name() for d in self.conn.listAllDomains(
            self.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)])
        # The destination's post-migration pass: it keeps CPU 1 for the
        # host there, and binds the guest to CPU 0.
        self.cf.config(group='nova_pinning', connection_uri=self.dest_uri,
                       reserved_cpus='1', foreign_domains='manage')
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        result = rec.run_pass()
        self.assertIsNone(result.error)
        self.assertIn(NAME, {c.name for c in result.applied})
        with open(os.path.join(self.dest_dir, 'run', 'libvirt', 'qemu',
                               NAME + '.pid')) as f:
            pid = int(f.read())
        threads = self.vcpu_threads(moved)
        self.assertEqual({0: frozenset({0})},
                         {v: self.cpus_allowed(pid, tid)
                          for v, tid in threads.items()})

