"""tests/vm/vmdiag.py and the VM tests' boot failure: one line that says
why, counted once.

The consoles are the ones seen: the soft lockup in a stop_machine
rendezvous that CI's run printed for 555 s (issue 39), the IO-APIC
timer check's panic and the TSC measured 20.8 times too slow that a
loaded host gave here."""

import json
import os
import socket
import threading
import unittest
from unittest import mock

import fixtures
import testtools

from tests.vm import base, machine, vmdiag

LOCKUP = (
    '[   36.912345] clocksource: Switched to clocksource tsc-early\n'
    '[   37.001000] systemd[1]: Starting systemd-udevd.service...\n'
    '[  592.100000] watchdog: BUG: soft lockup - CPU#4 stuck for 555s! '
    '[migration/4:36]\n'
    '[  592.100100] Stopper: multi_cpu_stop+0x0/0x120 <- '
    'stop_machine_cpuslocked+0x16c/0x1b0\n')
PANIC = (
    '[    0.036000] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\n'
    "[    0.036000] Kernel panic - not syncing: IO-APIC + timer doesn't "
    'work!  Boot with apic=debug and send a report.  Then try booting '
    "with the 'noapic' option.\n"
    '[    0.036000] ---[ end Kernel panic - not syncing: IO-APIC + timer '
    "doesn't work! ]---\n")
TSC = """\
[    0.000000] tsc: Fast TSC calibration failed
[    0.032000] tsc: PIT calibration deviates from HPET: 124958 2596141
[    0.032000] tsc: Using PIT calibration value
[    0.032000] tsc: Detected 124.958 MHz processor
"""
REGISTERS = """\
CPU#0
RAX=0000000000000000 RBX=0000000000000000
RIP=ffffffff81a00010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1
CPU#1
RIP=ffffffff81a00010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1
CPU#2
RIP=ffffffff8110003c RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0
CPU#3
RIP=ffffffff81a00010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1
"""


class TestConsoleVerdict(testtools.TestCase):

    def test_the_lockup_ci_saw_is_named_in_one_line(self):
        line = vmdiag.console_verdict(LOCKUP)
        self.assertNotIn('\n', line)
        self.assertIn("the VM's kernel locked up: 1 soft lockup report(s) "
                      "in stop_machine (multi_cpu_stop), last on "
                      "[migration/4:36]", line)

    def test_a_panic_says_what_the_kernel_said(self):
        line = vmdiag.console_verdict(PANIC)
        self.assertIn("kernel panic: IO-APIC + timer doesn't work!", line)

    def test_a_mismeasured_tsc_is_named_with_its_factor(self):
        line = vmdiag.console_verdict(TSC, tsc_khz=2596144)
        self.assertIn('the guest kernel mis-measured its TSC (tsc: PIT '
                      'calibration deviates from HPET: 124958 2596141)', line)
        self.assertIn("the guest took its TSC for 124.958 MHz, the host's "
                      'runs at 2596.144 MHz: its clock ran 20.8 times too '
                      'fast', line)

    def test_a_well_measured_tsc_says_nothing(self):
        self.assertEqual('', vmdiag.console_verdict(
            '[    0.0] tsc: Detected 2596.150 MHz processor\n',
            tsc_khz=2596144))

    def test_a_clean_console_says_nothing(self):
        self.assertEqual('', vmdiag.console_verdict(
            '[    1.0] clocksource: Switched to clocksource tsc-early\n'))
        self.assertEqual('', vmdiag.console_verdict(''))

    def test_the_last_line(self):
        self.assertEqual('[  592.100100] Stopper: multi_cpu_stop+0x0/0x120 '
                         '<- stop_machine_cpuslocked+0x16c/0x1b0',
                         vmdiag.console_last(LOCKUP + '\n\n'))


class FakeQMP(threading.Thread):
    """A QMP server on a UNIX socket that answers one HMP command."""

    def __init__(self, path, text):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(1)
        self.text = text

    def run(self):
        conn, _ = self.sock.accept()
        with conn:
            f = conn.makefile('rwb')
            f.write(b'{"QMP": {"version": {}}}\n')
            f.flush()
            for _ in range(2):
                request = json.loads(f.readline())
                answer = ({} if request['execute'] == 'qmp_capabilities'
                          else self.text)
                f.write(json.dumps({'return': answer}).encode() + b'\n')
                f.flush()


class TestVcpuPlaces(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def test_each_vcpu_placed_and_grouped(self):
        path = os.path.join(self.dir, 'qmp.sock')
        server = FakeQMP(path, REGISTERS)
        server.start()
        line = vmdiag.vcpu_places(path)
        server.join(10)
        self.assertEqual('vCPUs: 0-1,3 halted at 0xffffffff81a00010; '
                         '2 running at 0xffffffff8110003c', line)

    def test_no_qmp_is_no_line(self):
        self.assertEqual('', vmdiag.vcpu_places(
            os.path.join(self.dir, 'absent.sock')))


class FakeMachine:
    """A Machine whose boot fails the way a locked-up kernel's does."""

    boots = 0

    def __init__(self, *args, **kwargs):
        pass

    def boot(self):
        FakeMachine.boots += 1
        raise machine.BootError(
            'the VM did not come up in 600 s; ' + vmdiag.console_verdict(
                LOCKUP), console=LOCKUP)

    def destroy(self):
        pass


class TestABootFailureIsCountedOnce(testtools.TestCase):

    def test_one_failure_with_the_line_then_skips_naming_it(self):
        class Case(base.VMTestCase):
            def test_a(self):
                pass

            def test_b(self):
                pass

            def test_c(self):
                pass

        # (MockPatchObject would take None for "a MagicMock")
        self.useFixture(fixtures.MonkeyPatch('tests.vm.base._VM', None))
        self.useFixture(fixtures.MonkeyPatch('tests.vm.base._BOOT_ERROR',
                                             None))
        self.useFixture(fixtures.MockPatchObject(machine, 'Machine',
                                                 FakeMachine))
        self.useFixture(fixtures.MockPatchObject(base, '_missing',
                                                 lambda: None))
        FakeMachine.boots = 0
        result = unittest.TestResult()
        with mock.patch('atexit.register'):
            unittest.defaultTestLoader.loadTestsFromTestCase(Case).run(
                result)
        self.assertEqual(1, FakeMachine.boots)
        self.assertEqual(1, len(result.failures))
        self.assertEqual(0, len(result.errors))
        self.assertEqual(2, len(result.skipped))
        failed, text = result.failures[0]
        self.assertIn('the VM did not boot: the VM did not come up in 600 s;'
                      " the VM's kernel locked up", text)
        for _test, why in result.skipped:
            self.assertIn('the VM did not boot (counted once, as a failure '
                          'of %s)' % failed.id(), why)
            self.assertIn('soft lockup', why)
