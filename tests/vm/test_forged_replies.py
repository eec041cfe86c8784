"""issue 40, H-1, on a real host: another local user answers for systemd.

The VM's system bus runs on dbus-broker (Debian's package, installed in
the image and switched on here: ``dbus.service`` made an alias of
``dbus-broker.service``, then a reboot; the test checks that the bus is
dbus-broker, switches back and reboots again at the end). dbus-broker is
the system bus of Fedora, RHEL, CentOS Stream, Rocky and Alma, and
delivers a signal carrying a reply serial from any peer (dbus-daemon
drops it). systemd 252 is pid 1; the policy is Debian's.

``nobody`` runs ``tests/vm/forger.py`` (the attacker of
``tests/functional/isolation/test_forged_replies.py``) against every
client connection of the bus, while root runs the real
``nova-pinning-isolate`` with systemctl out of reach, as in kolla's
images, so that it asks systemd over D-Bus:

* ``apply`` then ``undo``, ``TRIES`` times: each record the state file
  keeps is systemd's (the units' ``AllowedCPUs`` were empty), and after
  each ``undo`` every host daemon is on every CPU again (their
  ``Cpus_allowed_list`` in /proc, tests/vm/probe.py);
* ``watch`` as the shipped unit (etc/systemd/nova-pinning-isolate.service
  with a drop-in that makes /usr/bin/systemctl inaccessible): it stays
  active with no restart, and puts back a unit an operator widened;
* the agent dropped forged messages (its warnings say how many carried a
  call's serial).

Before the fix (e89f00d) the first message carrying a call's serial was
taken as systemd's answer: see doc/source/reference/security.rst for what this
test
showed then.
"""

import json
import re
import time

from testtools import content

from tests.vm import base
from tests.vm import machine
from tests.vm import test_isolation

TRIES = 10
RESERVED = test_isolation.RESERVED
EVERY_CPU = test_isolation.EVERY_CPU
# dbus-broker's own processes instead of dbus-daemon; all in
# system.slice but pid 1 (init.scope). Not libvirtd: Debian's is socket
# activated and exits after 120 s without a client.
HOST_DAEMONS = ('systemd', 'systemd-journal', 'systemd-udevd',
                'dbus-broker', 'dbus-broker-lau', 'qemu-ga',
                'systemd-logind')
SLICES = ('init.scope', 'system.slice', 'user.slice')
UNIT = 'nova-pinning-isolate.service'
DROP_IN = '/etc/systemd/system/%s.d/no-systemctl.conf' % UNIT
# As in kolla's images, the agent's units have no systemctl to run (an
# inaccessible file: os.access(X_OK) is false for root), so the agent
# asks systemd over D-Bus (OverDBus.hidden).
STATE = '/var/lib/nova-pinning-hooks/isolation.json'
BUS = '/run/dbus/system_bus_socket'
# systemd's own socket, which the agent asks first (issue 60); hidden
# (an inaccessible socket: connecting is refused), the agent falls back
# to the bus, as in a container that does not mount /run/systemd.
PRIVATE = '/run/systemd/private'
FORGER = '/usr/local/share/nph/forger.py'
FORGER_UNIT = 'nph-forger'
# The forged CPU set: CPU 4, a guests' CPU (reserved_cpus = 0-1).
FORGED_MASK = '10'
# A zygote (tests/vm/zygote.py) whose commands cannot run systemctl.
ZYGOTE_UNIT = 'nph-vm-zygote-dbus'
ZYGOTE_SOCKET = '/run/nph-vm-zygote-dbus.sock'
FORGED_SERIAL = re.compile(r'ignored (\d+) messages that carried its serial')
# What the agent stepped over, unread (its --debug lines): the forger's
# signals carry the calls' serials, but a signal's header is not parsed.
STEPPED_OVER = re.compile(r'stepped over (\d+) messages that were not')
PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


class OverDBus(base.VMTestCase):
    """The agent over D-Bus, systemctl out of its reach, and an attacker
    as ``nobody`` on the VM's real system bus (``tests/vm/forger.py``):
    what this test and ``test_fd_signal`` share. ``private``: whether
    the agent can reach systemd's own socket (the default; otherwise it
    falls back to the bus, where the attacker reaches it)."""

    # The host's daemons whose CPUs are checked (dbus-broker's).
    host_daemons = HOST_DAEMONS
    private = False

    # -- the bus ----------------------------------------------------------

    def on_broker(self):
        """Reboot the VM onto dbus-broker; back onto dbus-daemon (and
        rebooted) at the end."""
        self.addCleanup(self.back_on_dbus_daemon)
        # --no-reload: the running systemd keeps its idea of dbus.service
        # (the bus it runs) until the reboot; only the next boot sees the
        # alias changed.
        self.sh(['systemctl', 'enable', '--no-reload',
                 'dbus-broker.service'])
        self.vm.reboot()
        self.assertEqual('dbus-broker.service', self.sh(
            ['systemctl', 'show', '-P', 'Id', 'dbus.service']).out.strip())
        self.assertEqual('active', self.sh(
            ['systemctl', 'is-active', 'dbus-broker.service'],
            check=False).out.strip())
        procs = self.processes('dbus-broker', 'dbus-daemon')
        self.assertIsNotNone(procs['dbus-broker'])
        self.assertIsNone(procs['dbus-daemon'])
        # The bus's service is the broker's launcher (it takes the
        # socket, dbus.socket, from systemd and runs the broker).
        pid = self.sh(['systemctl', 'show', '-P', 'MainPID',
                       'dbus.service']).out.strip()
        self.assertEqual('dbus-broker-lau', self.vm.read(
            '/proc/%s/comm' % pid).strip())

    def back_on_dbus_daemon(self):
        for unit in (UNIT, FORGER_UNIT, ZYGOTE_UNIT):
            self.sh(['systemctl', 'stop', unit], check=False)
        self.sh(['rm', '-rf', '/etc/systemd/system/' + UNIT,
                 '/etc/systemd/system/%s.d' % UNIT], check=False)
        # --no-reload, as in on_broker: with systemd reloaded here (the
        # alias gone while dbus-broker still ran the bus) the guest
        # agent's power-off did not end the VM, and reboot() waited its
        # 120 s before it killed qemu (157 s for the reboot; 32 and 37 s
        # in two runs without the reload).
        self.sh(['systemctl', 'disable', '--no-reload',
                 'dbus-broker.service'], check=False)
        # Runtime properties, forged or not, end with the boot.
        self.sh(['rm', '-f', STATE, STATE + '.lock',
                 '/var/lib/nova-pinning-hooks/isolation.status.json'],
                check=False)
        self.vm.reboot()

    # -- the attacker -------------------------------------------------------

    def start_forger(self, seconds, *mode):
        self.sh(['install', '-D', '-m', '0644', '/root/nph/tests/vm/'
                 'forger.py', FORGER])
        self.sh(['systemd-run', '--unit', FORGER_UNIT, '--collect', '--uid',
                 'nobody', '--gid', 'nogroup', 'python3', FORGER, BUS,
                 str(seconds), FORGED_MASK] + list(mode))
        self.addCleanup(self.sh, ['systemctl', 'stop', FORGER_UNIT],
                        check=False)

    def forger_sent(self):
        self.sh(['systemctl', 'stop', FORGER_UNIT], check=False)
        out = self.sh(['journalctl', '-u', FORGER_UNIT, '--no-pager', '-o',
                       'cat']).out
        sent = re.findall(r'^sent (\d+)$', out, re.M)
        return int(sent[-1]) if sent else None

    # -- the agent, over D-Bus ---------------------------------------------

    def hidden(self):
        """What the agent's units cannot reach: systemctl, and systemd's
        own socket unless ``private``."""
        return ['/usr/bin/systemctl'] + ([] if self.private else [PRIVATE])

    def zygote_socket(self):
        return ZYGOTE_SOCKET.replace('.sock', '-private.sock'
                                     if self.private else '.sock')

    def start_dbus_zygote(self):
        if not self.vm.zygote:
            return
        unit = self.zygote_socket().rsplit('/', 1)[1][:-len('.sock')]
        self.sh(['systemd-run', '--unit', unit, '--collect'] + [
            '-p' + 'InaccessiblePaths=' + path for path in self.hidden()] + [
            '-E', 'NPH_VM_ZYGOTE_SOCKET=' + self.zygote_socket(), 'python3',
            machine.ZYGOTE, 'serve'])
        self.addCleanup(self.sh, ['systemctl', 'stop', unit], check=False)
        self.wait_for('the D-Bus zygote', lambda: self.sh(
            ['test', '-S', self.zygote_socket()], check=False).rc == 0,
            timeout=300, interval=1)

    def npi_dbus(self, *args):
        """``nova-pinning-isolate ARGS`` where systemctl cannot run
        (nor systemd's own socket be reached, unless ``private``):
        through the zygote started so, else in a mount namespace of its
        own (test_isolation's)."""
        argv = ['nova-pinning-isolate', '--config-file', base.CONF] + \
            list(args)
        if self.vm.zygote:
            return self.vm.run(['python3', machine.ZYGOTE, 'call'] + argv,
                               env={'NPH_VM_ZYGOTE_SOCKET':
                                    self.zygote_socket(),
                                    'PATH': PATH, 'HOME': '/root'},
                               check=False, timeout=300)
        self.vm.write('/root/no-systemctl', '', mode='0644')
        return self.sh(['unshare', '--mount', '--propagation', 'private',
                        'sh', '-c', test_isolation.WITHOUT_SYSTEMCTL,
                        'hide', 'bus' if self.private else 'busonly'] +
                       argv[1:], check=False, timeout=300)

    # -- what the kernel and the state say ---------------------------------

    def daemons(self):
        return {comm: p and p['allowed']
                for comm, p in self.processes(*self.host_daemons).items()}

    def recorded(self):
        """{unit: AllowedCPUs} as apply recorded them; None: no state."""
        result = self.sh(['cat', STATE], check=False)
        if result.rc:
            return None
        previous = json.loads(result.out)['systemd']['previous']
        return {u: p.get('AllowedCPUs') for u, p in previous.items()}

    def reset_units(self):
        """What a try that went wrong left: every unit on every CPU,
        its AllowedCPUs empty, no state (host's systemctl: its private
        socket, not the bus)."""
        for unit in SLICES:
            for value in (EVERY_CPU, ''):
                self.sh(['systemctl', 'set-property', '--runtime', unit,
                         'AllowedCPUs=' + value])
        self.sh(['rm', '-f', STATE])

    def watch_under_the_flood(self, seconds=30):
        """The shipped unit, without systemctl, under the flood for
        ``seconds``; an operator widens system.slice meanwhile. (The
        code before the fix died within seconds of each start: 3
        restarts in the 60 s this took at first.)"""
        self.sh(['cp', '/root/nph/etc/systemd/' + UNIT,
                 '/etc/systemd/system/'])
        self.sh(['mkdir', '-p', DROP_IN.rsplit('/', 1)[0]])
        self.vm.write(DROP_IN, '[Service]\n' + ''.join(
            'InaccessiblePaths=%s\n' % path for path in self.hidden()))
        self.sh(['systemctl', 'daemon-reload'])
        self.addCleanup(self.sh, ['systemctl', 'stop', UNIT], check=False)
        # Its own journal lines only: not an earlier boot's or watch's.
        since = '@' + self.sh(['date', '+%s']).out.strip()
        self.sh(['systemctl', 'start', UNIT])
        started = time.monotonic()

        def show(*props):
            out = self.sh(['systemctl', 'show', UNIT] + [
                '-p' + p for p in props]).out
            return dict(line.split('=', 1) for line in out.splitlines())

        first = show('MainPID')['MainPID']
        confined = repaired = False
        widened_at = None
        # Up to base.WAIT after the widening: on a starved VM (CI's other
        # stages beside it) a read of the daemons takes many seconds, and
        # 60 s once saw too few of them to catch the repair the watch's
        # journal shows.
        while time.monotonic() - started < seconds or (
                widened_at is not None and not repaired and
                time.monotonic() - widened_at < base.WAIT):
            daemons = self.daemons()
            if not confined and daemons == dict.fromkeys(self.host_daemons,
                                                         RESERVED):
                confined = True
                # An operator widens system.slice behind its back.
                self.sh(['systemctl', 'set-property', '--runtime',
                         'system.slice', 'AllowedCPUs=' + EVERY_CPU])
                widened_at = time.monotonic()
            elif widened_at is not None and not repaired and \
                    daemons == dict.fromkeys(self.host_daemons, RESERVED):
                repaired = True
            time.sleep(2)
        now = show('ActiveState', 'NRestarts', 'MainPID')
        journal = self.sh(['journalctl', '-b', '--since', since, '-u', UNIT,
                           '--no-pager', '-o', 'cat']).out
        self.addDetail('watch-journal', content.text_content(
            journal[-6000:]))
        self.sh(['systemctl', 'stop', UNIT], check=False)
        dropped = sum(int(n) for n in FORGED_SERIAL.findall(journal))
        errors = [line for line in journal.splitlines()
                  if 'Traceback' in line or 'error:' in line]
        result = {
            'active': now['ActiveState'] == 'active' and
            now['MainPID'] == first,
            'restarts': int(now['NRestarts']),
            'repaired': repaired, 'dropped': dropped, 'errors': errors[:5],
            'error_lines': [line for line in journal.splitlines()
                            if ' ERROR ' in line][:5]}
        self.addDetail('watch', content.text_content(
            '%r, %d warnings of forged serials' % (
                result, len(FORGED_SERIAL.findall(journal)))))
        undone = self.npi('undo', check=False)
        if undone.rc or self.daemons() != dict.fromkeys(self.host_daemons,
                                                        EVERY_CPU):
            self.reset_units()
        return result


class TestForgedRepliesOnDbusBroker(OverDBus):

    def setUp(self):
        super().setUp()
        self.npi('undo', check=False)
        self.on_broker()

    def test_only_systemd_answers(self):
        # Every daemon on every CPU, nothing recorded: a fresh boot.
        self.assertEqual(dict.fromkeys(self.host_daemons, EVERY_CPU),
                         self.daemons())
        self.start_dbus_zygote()
        self.start_forger(3600)
        time.sleep(5)  # it is flooding

        mode = self.npi_dbus('status')
        self.assertIn('mode: systemd (through D-Bus at %s)' % BUS, mode.out,
                      mode)

        poisoned, failed, dropped, seconds = [], [], 0, []
        stepped = 0
        for i in range(TRIES):
            start = time.monotonic()
            applied = self.npi_dbus('--debug', 'apply')
            undone = None
            dropped += sum(int(n) for n in FORGED_SERIAL.findall(
                applied.err))
            stepped += sum(int(n) for n in STEPPED_OVER.findall(
                applied.err))
            record = self.recorded()
            if record != dict.fromkeys(SLICES, ''):
                poisoned.append((i, record))
            if applied.rc != 0:
                failed.append((i, 'apply exit %d: %s' % (
                    applied.rc, applied.err.strip().splitlines()[-1:])))
            elif self.daemons() != dict.fromkeys(self.host_daemons, RESERVED):
                failed.append((i, 'apply: confined %s' % self.daemons()))
            if record is not None:
                undone = self.npi_dbus('undo')
                dropped += sum(int(n) for n in FORGED_SERIAL.findall(
                    undone.err))
            seconds.append(time.monotonic() - start)
            after = self.daemons()
            if (undone is not None and undone.rc != 0) or \
                    after != dict.fromkeys(self.host_daemons, EVERY_CPU):
                failed.append((i, 'undo exit %s: %s, daemons on %s' % (
                    undone and undone.rc, undone and
                    undone.err.strip().splitlines()[-1:], after)))
            if after != dict.fromkeys(self.host_daemons, EVERY_CPU) or \
                    self.recorded() is not None:
                self.reset_units()  # the next try starts afresh
        self.addDetail('apply-undo', content.text_content(
            'tries %d, poisoned %d, failed %d, forged messages carrying a '
            'call\'s serial dropped by the agent: %d, messages its applies '
            'stepped over unread: %d; seconds per try: %s'
            '\npoisoned: %r\nfailed: %r' % (
                TRIES, len(poisoned), len(failed), dropped, stepped,
                ' '.join('%.1f' % s for s in seconds), poisoned, failed)))

        watch = self.watch_under_the_flood()
        sent = self.forger_sent()
        self.addDetail('forger', content.text_content(
            'nobody sent %s forged messages' % sent))
        self.assertEqual(
            {'poisoned': [], 'failed': [], 'watch restarts': 0,
             'watch active': True, 'watch repaired a widened unit': True,
             'watch errors': []},
            {'poisoned': poisoned, 'failed': failed,
             'watch restarts': watch['restarts'],
             'watch active': watch['active'],
             'watch repaired a widened unit': watch['repaired'],
             'watch errors': watch['errors']})
        # The attack reached the agent: dbus-broker delivered the forged
        # messages, which carry the serials of its calls, and it stepped
        # over them unread (issue 60: a signal's header is not parsed, so
        # they are no longer told apart from other signals; a legitimate
        # connection on the bus sees one, NameAcquired).
        self.assertGreater(sent or 0, 0)
        self.assertGreater(dropped + stepped, 10 * TRIES,
                           'the forged messages did not reach the agent: '
                           'the test proves nothing')
