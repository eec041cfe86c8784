"""The systemd (cgroup v2) path over D-Bus, where there is no systemctl.

``FakeBus`` stands for the connection to the system bus: it plays
systemd's manager exactly as test_systemd's fake systemctl does (the
same units file, the same behaviour of systemd 252) and records every
method call with its arguments. Each message goes through jeepney's
wire format both ways, so a body that does not match its signature
fails here as it would on a real bus. It decodes the CPU byte masks
itself (systemd's ``cpu_set_from_dbus``: CPU n is bit n % 8 of byte
n // 8) and logs a ``SetUnitProperties`` as the ``systemctl
set-property --runtime`` line that sends the same, so every test of
test_systemd runs again here, with systemctl gone from PATH.

``FakeDaemon`` is a D-Bus peer on a real UNIX socket, for the transport
itself: authentication, Hello, replies among other messages, error
replies, and a daemon that never answers (the time bound).
"""

import json
import os
import socket
import threading
import time

import fixtures
import jeepney
import testtools

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import systemdbus
from tests.unit.isolation import test_systemd

EVERY_CPU = '0-3'


def systemd_bytes(text):
    """What systemd sends for a CPU list: a mask of whole 64-bit words
    (``cpu_set_to_dbus`` over ``CPU_ALLOC_SIZE``), so trailing zeros."""
    cpus = cpuset.parse(text, allow_empty=True)
    if not cpus:
        return b''
    value = sum(1 << c for c in cpus)
    return value.to_bytes((max(cpus) // 64 + 1) * 8, 'little')


def systemd_text(mask):
    """The CPU list systemd reads from a byte mask."""
    value = int.from_bytes(mask, 'little')
    return cpuset.format(frozenset(
        i for i in range(len(mask) * 8) if value >> i & 1))


def wire(msg):
    """``msg`` as the other end of a real connection parses it."""
    parser = jeepney.Parser()
    parser.add_data(msg.serialise(serial=7))
    return parser.get_next_message()


class FakeBus:

    def __init__(self, units_path, log_path, behaviour, path):
        self.units_path, self.log_path = units_path, log_path
        self.behaviour, self.path = behaviour, path

    def _units(self):
        with open(self.units_path) as f:
            return json.load(f)

    def _log(self, argv):
        with open(self.log_path, 'a') as f:
            f.write(json.dumps(argv) + '\n')

    def _reply(self, msg, signature, body):
        return wire(jeepney.new_method_return(msg, signature, body)).body

    def call(self, msg):
        msg = wire(msg)
        fields = msg.header.fields
        member = fields[jeepney.HeaderFields.member]
        self.behaviour['calls'].append((
            fields[jeepney.HeaderFields.destination],
            fields[jeepney.HeaderFields.path],
            fields[jeepney.HeaderFields.interface], member,
            fields.get(jeepney.HeaderFields.signature), msg.body))
        units = self._units()
        if member == 'LoadUnit':
            unit, = msg.body
            self._log(['show', unit])
            if unit not in units:
                raise BackendError('LoadUnit: Unit %s not found.' % unit)
            return self._reply(msg, 'o', ('/org/freedesktop/systemd1/unit/'
                                          + unit.replace('.', '_2e'),))
        if member == 'Get':
            unit = fields[jeepney.HeaderFields.path].rsplit('/', 1)[1] \
                .replace('_2e', '.')
            interface, name = msg.body
            assert interface == 'org.freedesktop.systemd1.' + \
                unit.rsplit('.', 1)[1].capitalize(), interface
            props = units[unit]
            if name == 'EffectiveCPUs':
                text = '' if self.behaviour.get('effective_empty') else (
                    props.get('_kernel') or EVERY_CPU)
            else:
                text = props.get(name, '')
            return self._reply(msg, 'v', (('ay', systemd_bytes(text)),))
        if member == 'SetUnitProperties':
            unit, runtime, values = msg.body
            assert runtime is True, runtime
            argv = ['set-property', '--runtime', unit]
            props = units[unit]
            for name, (signature, mask) in values:
                assert signature == 'ay', signature
                text = systemd_text(mask)
                argv.append('%s=%s' % (name, text))
                props[name] = text
                if name == 'AllowedCPUs' and text:
                    props['_kernel'] = self.behaviour.get(
                        'stuck', {}).get(unit, text)
            self._log(argv)
            with open(self.units_path + '.tmp', 'w') as f:
                json.dump(units, f)
            os.replace(self.units_path + '.tmp', self.units_path)
            return self._reply(msg, '', ())
        raise AssertionError('unexpected call %s' % member)


class BusMixin:
    """systemctl gone from PATH; the system bus a socket file, its
    connections ``FakeBus``."""

    def setUp(self):
        super().setUp()
        # No systemctl anywhere: a run of it would fail the test.
        os.unlink(os.path.join(self.host.top, 'bin', 'systemctl'))
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', os.path.join(self.host.top, 'bin')))
        self.socket_path = self.host.paths.system_bus
        os.makedirs(os.path.dirname(self.socket_path))
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(self.socket_path)
        self.addCleanup(listener.close)
        self.behaviour = {'calls': []}
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.systemdbus.Bus',
            lambda path: FakeBus(self.units_path, self.log, self.behaviour,
                                 path)))

    def dbus_calls(self, member):
        return [c[3:] for c in self.behaviour['calls'] if c[3] == member]


class TestSystemdOverDBus(BusMixin, test_systemd.TestSystemd):
    """Every test of the systemctl path, over D-Bus."""

    def test_undo_that_leaves_a_unit_confined_is_a_failure(self):
        self.isolator().apply()
        # A unit systemd will not widen (a parent slice holds it).
        self.behaviour['stuck'] = {'user.slice': '0'}
        result = self.undo()
        self.assertEqual(1, len(result.failures))
        self.assertIn('user.slice: still on CPUs 0', result.failures[0])
        self.assertTrue(os.path.exists(self.state_file))

    def test_apply_sends_what_systemctl_sends(self):
        self.cf.config(group='nova_pinning', reserved_cpus='0-1')
        self.isolator().apply()
        manager = ('org.freedesktop.systemd1', '/org/freedesktop/systemd1',
                   'org.freedesktop.systemd1.Manager')
        sets = [c for c in self.behaviour['calls']
                if c[3] == 'SetUnitProperties']
        # CPUs 0-1: the byte 0x03, runtime true (set-property --runtime).
        self.assertEqual(
            [manager + ('SetUnitProperties', 'sba(sv)',
                        (unit, True, [('AllowedCPUs', ('ay', b'\x03'))]))
             for unit in test_systemd.SLICES], sets)
        self.assertEqual(
            [['set-property', '--runtime', unit, 'AllowedCPUs=0-1']
             for unit in test_systemd.SLICES], self.calls('set-property'))
        self.assertEqual(
            [('Get', 'ss', ('org.freedesktop.systemd1.Slice', name))
             for name in systemdbus.SHOWN],
            self.dbus_calls('Get')[:3])

    def test_undo_widens_then_empties_as_systemctl_does(self):
        self.isolator().apply()
        del self.behaviour['calls'][:]
        self.assertEqual((), self.undo().failures)
        self.assertEqual(
            [('SetUnitProperties', 'sba(sv)', ('system.slice', True, [
                ('AllowedCPUs', ('ay', b'\x0f'))])),
             ('SetUnitProperties', 'sba(sv)', ('system.slice', True, [
                 ('AllowedCPUs', ('ay', b''))]))],
            [c for c in self.dbus_calls('SetUnitProperties')
             if c[2][0] == 'system.slice'])

    def test_status_says_how_systemd_is_reached(self):
        st = report.status(self.conf, self.host.paths)
        self.assertEqual('D-Bus at %s' % self.socket_path,
                         st['systemd_through'])
        self.assertEqual(0, st['confined'])


class TestWhereSystemdCannotConfineOverDBus(
        BusMixin, test_systemd.TestWhereSystemdCannotConfine):

    def test_a_property_systemd_takes_but_does_not_apply_is_a_failure(self):
        self.behaviour['effective_empty'] = True
        exc = self.assertRaises(BackendError, self.isolator().apply)
        self.assertIn('systemd accepted AllowedCPUs=0 but its '
                      'EffectiveCPUs are', str(exc))


class TestMasks(testtools.TestCase):
    """The CPU byte masks against systemd's own encoding."""

    def test_to_bytes(self):
        for text, mask in (('0-1', b'\x03'), ('0', b'\x01'), ('', b''),
                           ('0-7', b'\xff'), ('8', b'\x00\x01'),
                           ('1,9-10,63', b'\x02\x06\x00\x00\x00\x00\x00\x80'),
                           ('64', b'\x00' * 8 + b'\x01')):
            cpus = cpuset.parse(text, allow_empty=True)
            self.assertEqual(mask, cpumask.to_bytes(cpus), text)
            # systemd sends whole words; the same set either way.
            self.assertEqual(cpus, cpumask.from_bytes(systemd_bytes(text)))
            self.assertEqual(cpus, cpumask.from_bytes(mask))
            self.assertEqual(text, systemd_text(mask))

    def test_bounds(self):
        self.assertRaises(cpuset.CpusetError, cpumask.to_bytes, {-1})
        self.assertRaises(cpuset.CpusetError, cpumask.from_bytes,
                          bytes(cpumask.MAX_CPUS // 8 + 1))


class FakeDaemon(threading.Thread):
    """One client's D-Bus peer: answers ``answer(msg)`` (a message, a
    list of them, or None for no answer)."""

    def __init__(self, path, answer):
        super().__init__(daemon=True)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path)
        self.listener.listen(1)
        self.listener.settimeout(10)
        self.answer = answer
        self.seen = []
        self.stop = threading.Event()

    def run(self):
        conn, _ = self.listener.accept()
        conn.settimeout(0.1)
        with conn:
            buf = b''
            while b'BEGIN\r\n' not in buf:
                buf += conn.recv(4096)
                if b'AUTH' in buf and b'OK' not in buf:
                    conn.sendall(b'OK 0123456789abcdef0123456789abcdef\r\n')
                    buf += b'OK'
            parser = jeepney.Parser()
            parser.add_data(buf.split(b'BEGIN\r\n', 1)[1])
            serial = 100
            while not self.stop.is_set():
                msg = parser.get_next_message()
                if msg is None:
                    try:
                        data = conn.recv(4096)
                    except socket.timeout:
                        continue
                    if not data:
                        return
                    parser.add_data(data)
                    continue
                self.seen.append(
                    msg.header.fields[jeepney.HeaderFields.member])
                replies = self.answer(msg) or []
                for reply in (replies if isinstance(replies, list)
                              else [replies]):
                    serial += 1
                    conn.sendall(reply.serialise(serial=serial))


class TestBus(testtools.TestCase):
    """The transport on a real socket (jeepney's marshalling and
    authentication, our time bounds)."""

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'bus')

    def daemon(self, answer):
        def answer_hello(msg):
            if msg.header.fields[jeepney.HeaderFields.member] == 'Hello':
                return jeepney.new_method_return(msg, 's', (':1.42',))
            return answer(msg)
        daemon = FakeDaemon(self.path, answer_hello)
        daemon.start()
        self.addCleanup(daemon.join, 10)
        self.addCleanup(daemon.stop.set)
        return daemon

    def load_unit(self):
        return systemdbus.message(systemdbus.MANAGER_PATH,
                                  systemdbus.MANAGER, 'LoadUnit', 's',
                                  ('system.slice',))

    def test_a_reply_among_other_messages(self):
        def answer(msg):
            noise = jeepney.new_signal(jeepney.DBusAddress(
                '/org/freedesktop/DBus', interface='org.freedesktop.DBus'),
                'NameAcquired', 's', (':1.42',))
            return [noise, jeepney.new_method_return(
                msg, 'o', ('/org/freedesktop/systemd1/unit/system_2eslice',))]
        daemon = self.daemon(answer)
        bus = systemdbus.Bus(self.path, timeout=5)
        self.addCleanup(bus.close)
        self.assertEqual(('/org/freedesktop/systemd1/unit/system_2eslice',),
                         bus.call(self.load_unit()))
        self.assertEqual(['Hello', 'LoadUnit'], daemon.seen)

    def test_an_error_reply_is_systemds_message(self):
        self.daemon(lambda msg: jeepney.new_error(
            msg, 'org.freedesktop.systemd1.NoSuchUnit', 's',
            ('Unit system.slice not found.',)))
        bus = systemdbus.Bus(self.path, timeout=5)
        self.addCleanup(bus.close)
        exc = self.assertRaises(BackendError, bus.call, self.load_unit())
        self.assertEqual('LoadUnit: Unit system.slice not found.', str(exc))

    def test_a_daemon_that_never_answers_is_an_error_in_time(self):
        self.daemon(lambda msg: None)
        bus = systemdbus.Bus(self.path, timeout=0.5)
        self.addCleanup(bus.close)
        start = time.monotonic()
        exc = self.assertRaises(BackendError, bus.call, self.load_unit())
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual('D-Bus LoadUnit through %s: no reply within 0.5 s'
                         % self.path, str(exc))
        self.assertIsNone(bus._sock)  # dropped: the stream is out of step

    def test_a_daemon_that_never_authenticates_is_an_error_in_time(self):
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(self.path)
        listener.listen(1)
        self.addCleanup(listener.close)
        bus = systemdbus.Bus(self.path, timeout=0.5)
        start = time.monotonic()
        exc = self.assertRaises(BackendError, bus.call, self.load_unit())
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn('D-Bus LoadUnit through %s: ' % self.path, str(exc))

    def test_no_bus(self):
        bus = systemdbus.Bus(self.path, timeout=0.5)
        exc = self.assertRaises(BackendError, bus.call, self.load_unit())
        self.assertIn('D-Bus LoadUnit through %s: ' % self.path, str(exc))
        self.assertIn('No such file', str(exc))


class TestWhichWay(test_systemd.SystemdTestCase):
    """systemctl where there is one; the bus only without it; otherwise
    one line that says what is missing."""

    def bus_socket(self):
        path = self.host.paths.system_bus
        os.makedirs(os.path.dirname(path))
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        self.addCleanup(listener.close)
        return path

    def no_systemctl(self):
        self.useFixture(fixtures.EnvironmentVariable('PATH', self.host.top))

    def test_systemctl_when_there_is_one(self):
        self.bus_socket()
        settings = self.isolator().settings
        self.assertEqual((os.path.join(self.host.top, 'bin', 'systemctl'),
                          None), (settings.systemctl, settings.system_bus))

    def test_the_bus_without_systemctl(self):
        path = self.bus_socket()
        self.no_systemctl()
        settings = self.isolator().settings
        self.assertEqual((None, path),
                         (settings.systemctl, settings.system_bus))

    def test_neither(self):
        self.no_systemctl()
        exc = self.assertRaises(config.ConfigError, self.isolator)
        self.assertEqual(
            "cgroup_mode systemd: no systemctl on PATH and no system bus at "
            "%s: mount the host's /run/dbus (or /run) into the container, "
            "or install systemctl" % self.host.paths.system_bus, str(exc))

    def test_a_file_that_is_not_a_socket_is_no_bus(self):
        path = self.host.paths.system_bus
        os.makedirs(os.path.dirname(path))
        open(path, 'w').close()
        self.no_systemctl()
        self.assertRaises(config.ConfigError, self.isolator)

    def test_the_bus_without_jeepney(self):
        self.bus_socket()
        self.no_systemctl()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.systemdbus.available',
            lambda: "No module named 'jeepney'"))
        exc = self.assertRaises(config.ConfigError, self.isolator)
        self.assertIn('no systemctl on PATH, and the Python package '
                      'jeepney', str(exc))
        self.assertIn('apt install python3-jeepney', str(exc))
        self.assertEqual(1, len(str(exc).splitlines()))

    def test_undo_with_neither_changes_nothing(self):
        self.isolator().apply()
        with open(self.state_file) as f:
            before = f.read()
        calls = len(self.calls())
        self.no_systemctl()
        exc = self.assertRaises(config.ConfigError, self.undo)
        self.assertIn('no systemctl on PATH and no system bus', str(exc))
        self.assertEqual(calls, len(self.calls()))
        with open(self.state_file) as f:
            self.assertEqual(before, f.read())
