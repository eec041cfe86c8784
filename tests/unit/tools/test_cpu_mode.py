"""tools/cpu_mode.py: the cloud's guest CPU mode, probed against a
libvirt that refuses some modes the way a real one did on an AMD EPYC
machine (nested KVM: host-model and host-passthrough guests died with
"failed to set MSR 0x10a"), and one where nova's default starts."""

import importlib.util
import os

import fixtures
import testtools

TOOLS = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tools')
spec = importlib.util.spec_from_file_location(
    'cpu_mode', os.path.join(TOOLS, 'cpu_mode.py'))
cpu_mode = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_mode)

DOMCAPS = """<domainCapabilities><cpu>
  <mode name='host-passthrough' supported='yes'/>
  <mode name='host-model' supported='yes'><model>EPYC-Milan</model></mode>
  <mode name='custom' supported='yes'>
    <model usable='no' vendor='AMD'>EPYC</model>
    <model usable='yes' vendor='unknown'>pentium3</model>
    <model usable='yes' vendor='unknown'>486</model>
  </mode></cpu></domainCapabilities>"""
MSR = ('internal error: qemu unexpectedly closed the monitor: '
       '2026-11-25T20:58:48Z qemu-system-x86_64: error: failed to set MSR '
       '0x10a to 0x69\nqemu-system-x86_64: kvm.c:3183: kvm_buf_set_msrs: '
       'Assertion failed.')


class FakeDomain:
    def __init__(self, conn, xml, stays):
        self.conn, self.xml, self.stays = conn, xml, stays
        self.destroyed = False

    def isActive(self):  # noqa: N802 - libvirt's name
        return self.stays

    def destroy(self):
        self.destroyed = True


class FakeConn:
    """createXML refuses a guest whose <cpu> holds one of ``refuse``
    (libvirt's error text), or starts one that dies at once for ``dies``."""

    def __init__(self, refuse=(), dies=()):
        self.refuse, self.dies = refuse, dies
        self.started = []

    def getDomainCapabilities(self, *args):  # noqa: N802
        return DOMCAPS

    def createXML(self, xml, flags):  # noqa: N802
        for marker in self.refuse:
            if marker in xml:
                raise Exception(MSR)
        if "<cpu" not in xml and 'none' in self.refuse:
            raise Exception('internal error: no CPU at all')
        dom = FakeDomain(self, xml, stays=not any(m in xml for m in self.dies))
        self.started.append(dom)
        return dom

    def getLibVersion(self):  # noqa: N802
        return 9000000

    def getVersion(self):  # noqa: N802
        return 7002000


def choose(conn, first=()):
    return cpu_mode.choose(conn, 'kvm', first, sleep=lambda s: None)


class TestChoose(testtools.TestCase):

    def test_a_machine_where_novas_default_starts(self):
        conn = FakeConn()
        mode, refused = choose(conn)
        self.assertEqual('host-model', str(mode))
        self.assertEqual([], refused)
        self.assertEqual(1, len(conn.started))
        self.assertIn("<cpu mode='host-model'/>", conn.started[0].xml)

    def test_the_amd_machine_falls_back_to_none(self):
        conn = FakeConn(refuse=("mode='host-model'",
                                "mode='host-passthrough'"))
        mode, refused = choose(conn)
        self.assertEqual('none', str(mode))
        self.assertEqual(['host-model', 'host-passthrough'],
                         [str(m) for m, _ in refused])
        # qemu's own words, not libvirt's wrapping
        self.assertEqual('failed to set MSR 0x10a to 0x69', refused[0][1])
        self.assertNotIn('<cpu', conn.started[-1].xml)
        self.assertEqual(['cpu_mode = none'], mode.nova_lines())

    def test_then_a_usable_named_model_in_libvirts_order(self):
        conn = FakeConn(refuse=("mode='host-model'", "mode='host-passthrough'",
                                'none'))
        mode, refused = choose(conn)
        self.assertEqual('custom:pentium3', str(mode))
        self.assertEqual(['cpu_mode = custom', 'cpu_models = pentium3'],
                         mode.nova_lines())
        self.assertIn("<model fallback='forbid'>pentium3</model>",
                      conn.started[-1].xml)

    def test_a_guest_that_dies_at_once_is_a_refusal(self):
        conn = FakeConn(dies=("mode='host-model'",))
        mode, refused = choose(conn)
        self.assertEqual('host-passthrough', str(mode))
        self.assertEqual([('host-model',
                           'the guest stopped right after its start')],
                         [(str(m), why) for m, why in refused])

    def test_every_started_probe_is_destroyed(self):
        conn = FakeConn(dies=("mode='host-model'",))
        choose(conn)
        self.assertTrue(conn.started)
        self.assertTrue(all(d.destroyed for d in conn.started))

    def test_nothing_starts(self):
        conn = FakeConn(refuse=("<cpu", 'none'))
        mode, refused = choose(conn)
        self.assertIsNone(mode)
        self.assertEqual(['host-model', 'host-passthrough', 'none',
                          'custom:pentium3', 'custom:486'],
                         [str(m) for m, _ in refused])

    def test_a_forced_first_choice_is_tried_first_and_once(self):
        conn = FakeConn(refuse=("<model fallback='forbid'>nph-no-such",))
        first = [cpu_mode.Mode.parse('custom:nph-no-such'),
                 cpu_mode.Mode.parse('host-model')]
        mode, refused = choose(conn, first)
        self.assertEqual('host-model', str(mode))
        self.assertEqual(['custom:nph-no-such'], [str(m) for m, _ in refused])
        modes = [str(m) for m in cpu_mode.candidates(DOMCAPS, first)]
        self.assertEqual(1, modes.count('host-model'))

    def test_modes_are_parsed_strictly(self):
        for bad in ('host', 'custom', 'none:x', 'host-model:Skylake'):
            self.assertRaises(ValueError, cpu_mode.Mode.parse, bad)


class TestCache(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def cpuinfo(self, vendor, flags):
        path = os.path.join(self.dir, vendor)
        with open(path, 'w') as f:
            f.write('processor\t: 0\nvendor_id\t: %s\nmodel name\t: X\n'
                    'flags\t\t: %s\n\nprocessor\t: 1\n' % (vendor, flags))
        return path

    def test_an_answer_holds_for_its_machine_only(self):
        conn = FakeConn()
        amd = cpu_mode.machine_key(conn, 'kvm', self.cpuinfo('AuthenticAMD',
                                                             'fpu svm'))
        intel = cpu_mode.machine_key(conn, 'kvm', self.cpuinfo('GenuineIntel',
                                                               'fpu vmx'))
        self.assertNotEqual(amd, intel)
        self.assertNotEqual(amd, cpu_mode.machine_key(
            conn, 'qemu', self.cpuinfo('AuthenticAMD', 'fpu svm')))
        cache = os.path.join(self.dir, 'cpu-mode.json')
        cpu_mode.save_cache(cache, amd, cpu_mode.Mode('none'),
                            [(cpu_mode.Mode('host-model'), 'MSR')])
        mode, refused = cpu_mode.load_cache(cache, amd)
        self.assertEqual('none', str(mode))
        self.assertEqual([['host-model', 'MSR']], refused)
        self.assertEqual((None, None), cpu_mode.load_cache(cache, intel))

    def test_a_broken_cache_is_probed_again(self):
        cache = os.path.join(self.dir, 'cpu-mode.json')
        for text in ('', '{', '[]', '{"machine": "k", "mode": "bogus"}'):
            with open(cache, 'w') as f:
                f.write(text)
            self.assertEqual((None, None), cpu_mode.load_cache(cache, 'k'))


class TestCommand(testtools.TestCase):

    def test_a_bad_mode_is_exit_2(self):
        self.assertEqual(2, cpu_mode.main(['--uri', 'qemu:///nowhere',
                                           '--first', 'fast']))

