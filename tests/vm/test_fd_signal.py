"""issue 48, R5-H1, on a real host: one signal of type ``h`` (a
descriptor's index) that carries no descriptor, from any local user.

Both system buses deliver it: the VM's own dbus-daemon 1.14 (Debian's
policy lets every user send signals) and dbus-broker 33 (the VM
rebooted onto it, as ``test_forged_replies`` does). ``nobody`` runs
``tests/vm/forger.py fd``: such a signal to each new connection as it
appears (the bus's ``NameOwnerChanged``), so before the agent's answers,
and to every client connection every second, so into a running
``watch``. Root runs the real ``nova-pinning-isolate`` with systemctl
out of reach, as in kolla's images, so that it asks systemd over D-Bus:

* ``apply``, ``status`` and ``undo``, ``TRIES`` times: each exits 0,
  records systemd's values, confines and releases the host's daemons
  (their ``Cpus_allowed_list`` in /proc);
* ``watch`` as the shipped unit, 30 s: active with no restart, not one
  ERROR line, and a unit an operator widens is confined again.

Before (9aeef5f, jeepney parsing every message whole): ``IndexError``
out of its parser, then ``KeyError: b's'`` on every later call of the
connection: ``apply`` and ``undo`` failed, ``watch`` logged errors every
sweep and never confined the widened unit again.
"""

from testtools import content

from tests.vm import test_forged_replies as forged

TRIES = 3


class FdSignal(forged.OverDBus):

    def fd_signal_changes_nothing(self):
        self.assertEqual(dict.fromkeys(self.host_daemons, forged.EVERY_CPU),
                         self.daemons())
        self.start_dbus_zygote()
        self.start_forger(3600, 'fd')
        failed = []
        for i in range(TRIES):
            for step, spread in (('apply', forged.RESERVED),
                                 ('status', forged.RESERVED),
                                 ('undo', forged.EVERY_CPU)):
                result = self.npi_dbus(step)
                if step == 'apply' and self.recorded() != dict.fromkeys(
                        forged.SLICES, ''):
                    failed.append((i, 'apply recorded %r'
                                   % self.recorded()))
                daemons = self.daemons()
                if result.rc or daemons != dict.fromkeys(
                        self.host_daemons, spread):
                    failed.append((i, '%s exit %d: %s; daemons on %s' % (
                        step, result.rc,
                        result.err.strip().splitlines()[-1:], daemons)))
            if self.daemons() != dict.fromkeys(self.host_daemons,
                                               forged.EVERY_CPU) or \
                    self.recorded() is not None:
                self.reset_units()
        watch = self.watch_under_the_flood()
        sent = self.forger_sent()
        self.addDetail('fd-signal', content.text_content(
            'nobody sent %s signals of type h; failed: %r; watch: %r'
            % (sent, failed, watch)))
        self.assertEqual(
            {'failed': [], 'watch restarts': 0, 'watch active': True,
             'watch repaired a widened unit': True, 'watch errors': [],
             'watch error lines': []},
            {'failed': failed, 'watch restarts': watch['restarts'],
             'watch active': watch['active'],
             'watch repaired a widened unit': watch['repaired'],
             'watch errors': watch['errors'],
             'watch error lines': watch['error_lines']})
        self.assertGreater(sent or 0, 0)


class TestFdSignalOnDbusDaemon(FdSignal):

    host_daemons = ('systemd', 'systemd-journal', 'systemd-udevd',
                    'dbus-daemon', 'qemu-ga', 'systemd-logind')

    def setUp(self):
        super().setUp()
        self.npi('undo', check=False)
        self.addCleanup(self.sh, ['sh', '-c', 'rm -rf %s %s.d %s %s.lock '
                                  '%s && systemctl daemon-reload' % (
                                      '/etc/systemd/system/' + forged.UNIT,
                                      '/etc/systemd/system/' + forged.UNIT,
                                      forged.STATE, forged.STATE,
                                      forged.STATE.replace(
                                          '.json', '.status.json'))],
                        check=False)

    def test_fd_signal_changes_nothing(self):
        self.fd_signal_changes_nothing()


class TestFdSignalOnDbusBroker(FdSignal):

    def setUp(self):
        super().setUp()
        self.npi('undo', check=False)
        self.on_broker()

    def test_fd_signal_changes_nothing(self):
        self.fd_signal_changes_nothing()
