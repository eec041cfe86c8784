"""systemd's manager over D-Bus, for hosts and containers without
``systemctl`` (kolla's images have none).

``Manager(Bus())`` answers the two questions the systemd backend asks,
as ``systemd.Systemctl`` does with the command: ``show(unit)``
(``AllowedCPUs``, ``EffectiveCPUs``, ``AllowedMemoryNodes`` in
systemctl's syntax, ``0-1`` or empty) and ``set_runtime(unit, props)``
(what ``systemctl set-property --runtime`` sends:
``org.freedesktop.systemd1.Manager.SetUnitProperties`` with runtime
true, each CPU or memory node set as the byte mask ``ay`` systemctl
builds, ``cpumask.to_bytes``). A unit's object is found with
``LoadUnit``, which loads it as ``systemctl show`` does; its properties
are read with ``org.freedesktop.DBus.Properties.Get``.

The transport (issue 60). Four rounds found a message of another local
user's that reached the agent's connection through the system bus and
broke it (forged replies, an ``h`` signal, big bodies, a header field of
an unknown code): patching message shapes did not converge. So ``Bus``
connects first to systemd's own socket, ``PRIVATE``
(/run/systemd/private, where ``systemctl`` run as root talks to it):
peer to peer, no bus daemon, so no other process can send anything on
the connection; only root can connect, and the peer is checked to be
root (``SO_PEERCRED``). Where that socket cannot be reached (a container
that does not mount the host's /run/systemd, an old layout) it falls
back to the system bus at ``SOCKET``, with one warning a process naming
the mount to add, and ``status`` says which (``D-Bus at PATH``): refusing
would leave such hosts' daemons on the guests' CPUs for good, while the
reader below keeps the fallback in step against everything the rounds
found; a flood on the bus can still fail a call within its bound.

The reader (``dbuswire``, by the specification): the marshalling of
what we send is jeepney's, authentication ours (``_authenticate``: as
systemctl does it, which systemd's own socket needs); nothing that arrives is
handed to jeepney or any other parser that can raise out of step or
loop. What arrives is read in chunks of up to ``READ_SIZE`` and stepped
over message by message by the lengths of its fixed header
(``dbuswire.step_over``: about 0.5 us a small signal); only a method
return or an error has its header fields parsed (unknown codes ignored,
at most ``MAX_HEADER``), only the awaited answer its body (at most
``MAX_ANSWER``; ``s``, ``o`` or ``v`` holding ``ay``, read by hand).

Invariants:

* only systemd's own socket at ``PRIVATE`` (served by root) or the
  system bus socket at ``SOCKET`` (/run/dbus/system_bus_socket), never an
  address from the environment (``DBUS_SYSTEM_BUS_ADDRESS``): root talks
  to the sockets root's daemons listen on, not one that a caller chose;
* only systemd answers: on its own socket it is the only peer; on the
  bus, at connect, after Hello, the bus is asked which unique name owns
  ``org.freedesktop.systemd1`` (``GetNameOwner``), and every call is sent
  to that unique name. A message is taken as the answer to a call only
  when it is a ``method_return`` or an ``error`` that carries the call's
  serial and (on the bus) comes from that unique name (an ``error`` from
  the bus itself too: it answers calls it cannot deliver, systemd gone
  or restarted under another name, and the connection is then dropped,
  so the next call asks again), and a ``method_return`` only with the
  signature the call expects (a body of another signature is a
  ``BackendError``). The bus sets every message's sender itself, so no
  other peer can send as systemd or as the bus; anything else is stepped
  over and counted (``ignored``; one warning per call for those that
  carried its serial), its body never read into memory nor parsed; at
  most ``MAX_IGNORED`` messages and ``MAX_DROPPED`` bytes a call are
  dropped so: beyond, another peer floods the connection, which is
  dropped (``BackendUnreachable``);
* a message is never misread as the start of another: every one is
  stepped over by its fixed header's lengths, whatever its header fields
  or body hold; only bytes that are no fixed header, or an answer's body
  that does not parse, are a ``BackendError`` that drops the connection
  (it is never left out of step: the next call connects afresh);
* every blocking step is time-bounded: connecting and authenticating,
  Hello, GetNameOwner, each call's send and its reply (``TIMEOUT``
  seconds each, and never beyond a caller's ``deadline``), the clock
  looked at before every read, each read of at most ``READ_SIZE``; a
  step that runs out of time or a connection that breaks is a
  ``BackendUnreachable`` (a ``BackendError``) naming the call, and the
  connection is dropped; the next call connects afresh (systemd or the
  bus may have restarted);
* a D-Bus error reply is a ``BackendError`` with systemd's own message
  (``Unit user.slice not found.``); the connection stays;
* runtime properties only (runtime=true): like ``set-property
  --runtime``, nothing survives a reboot;
* jeepney is imported at first use: the systemctl path never needs it.
"""

import itertools
import os
import re
import socket
import struct
import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import BackendUnreachable
from nova_pinning_hooks.isolation import dbuswire

LOG = logging.getLogger(__name__)

SOCKET = '/run/dbus/system_bus_socket'
# systemd's own socket, peer to peer (what systemctl run as root uses):
# no bus daemon, so no other peer can send on the connection (issue 60).
PRIVATE = '/run/systemd/private'
TIMEOUT = 30  # seconds; systemctl's own default is 25 s (D-Bus's)
SYSTEMD = 'org.freedesktop.systemd1'
# The bus itself: the sender of its own replies (Hello, GetNameOwner) and
# of the errors for calls it cannot deliver; no peer can send as it.
DRIVER = 'org.freedesktop.DBus'
MANAGER_PATH = '/org/freedesktop/systemd1'
MANAGER = 'org.freedesktop.systemd1.Manager'
PROPERTIES = 'org.freedesktop.DBus.Properties'
# The unit types whose interface carries the cgroup properties.
INTERFACES = {'slice': 'org.freedesktop.systemd1.Slice',
              'scope': 'org.freedesktop.systemd1.Scope',
              'service': 'org.freedesktop.systemd1.Service'}
# What the backend reads; each a CPU or memory node set (``ay``).
SHOWN = ('AllowedCPUs', 'EffectiveCPUs', 'AllowedMemoryNodes')
SETTABLE = ('AllowedCPUs', 'AllowedMemoryNodes')
# The framing of what arrives (issue 48): the fixed header's bytes;
# the most the header fields may take (a real header is well under 1
# KiB: names of at most 255 bytes, a path); the most an answer of
# systemd's to our calls may take (a unit path, a CPU mask of at most
# 8 KiB: cpumask.MAX_CPUS); the most bytes of messages that are not the
# answer skipped in one call before the connection is dropped (we ask
# for no signal: a legitimate connection sees NameAcquired, a few
# hundred bytes; skipping costs a copy in the kernel, about 0.1 s for
# 128 MiB here: a flood that size is survived, a larger one fails the
# call, in bounded time either way); the most one read asks for.
MAX_HEADER = 64 << 10
MAX_ANSWER = 1 << 20
MAX_DROPPED = 256 << 20
MAX_IGNORED = 1 << 20
READ_SIZE = 1 << 20
MAX_AUTH_LINE = 4096  # the server's answer to AUTH: OK and a GUID
# D-Bus's own rule for an object path (jeepney refuses any other when a
# message to it is made).
_OBJECT_PATH = re.compile(r'/|(/[A-Za-z0-9_]+)+', re.ASCII)


def available() -> typing.Optional[str]:
    """None when jeepney can be imported, otherwise why not."""
    try:
        import jeepney  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def message(path: str, interface: str, method: str, signature: str,
            body: tuple[typing.Any, ...]) -> typing.Any:
    """A method call to systemd (a jeepney ``Message``)."""
    import jeepney
    return jeepney.new_method_call(
        jeepney.DBusAddress(path, bus_name=SYSTEMD, interface=interface),
        method, signature, body)


class Sockets(typing.NamedTuple):
    """Where systemd is asked over D-Bus: its own socket first, the
    system bus where that cannot be reached."""

    bus: str = SOCKET
    private: str = PRIVATE


def _bound(seconds: float,
           deadline: typing.Optional[float]) -> tuple[float, bool]:
    """(the monotonic time one step must end by, whether the caller's
    ``deadline`` rather than ``seconds`` sets it)."""
    end = time.monotonic() + seconds
    if deadline is not None and deadline < end:
        return deadline, True
    return end, False


class _Flooded(BackendUnreachable):
    """More than ``MAX_DROPPED`` bytes or ``MAX_IGNORED`` messages that
    were not the answer arrived during one call."""


class _Garbled(BackendError):
    """Bytes that are not a D-Bus message where one must start, or an
    answer that does not parse or is larger than allowed: the stream
    can no longer be trusted to be in step."""


class _Answer(typing.NamedTuple):
    """The answer to a call, whole: its fixed header, its header
    fields (``dbuswire.fields``) and its bytes."""

    head: dbuswire.Fixed
    fields: dict[int, typing.Union[str, int]]
    data: bytes


class _Stream:
    """What arrives on one connection, read in chunks of up to
    ``READ_SIZE`` (one ``recv`` for many small messages) and consumed
    message by message; every read bounded by the time left."""

    def __init__(self, sock: socket.socket, early: bytes,
                 timeout: float) -> None:
        self.sock = sock
        self.timeout = timeout
        self.buf = bytearray(early)  # what came with the server's OK
        self.pos = 0  # where the next message starts in ``buf``

    def _recv(self, size: int, end: float, cut: bool) -> bytes:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError('no reply in the time left' if cut else
                                   'no reply within %s s' % self.timeout)
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(size)
            except TimeoutError:
                continue  # the clock says, at the top of the loop
            if not data:
                raise ConnectionResetError('the bus closed the connection')
            return data

    def have(self, count: int, end: float, cut: bool) -> None:
        """At least ``count`` bytes from ``pos`` in ``buf``."""
        if len(self.buf) - self.pos >= count:
            return
        del self.buf[:self.pos]
        self.pos = 0
        while len(self.buf) < count:
            self.buf += self._recv(max(READ_SIZE, count - len(self.buf)),
                                   end, cut)

    def skip(self, count: int, end: float, cut: bool) -> None:
        """Drop the next ``count`` bytes, read but never held whole."""
        held = min(count, len(self.buf) - self.pos)
        self.pos += held
        count -= held
        if self.pos == len(self.buf):
            self.buf.clear()
            self.pos = 0
        while count:
            data = self._recv(min(count, READ_SIZE), end, cut)
            count -= len(data)
            if count < 0:  # the next message's first bytes: kept
                self.buf += data[count:]
                count = 0


class Bus:
    """One connection to systemd, opened at first use: its own socket
    ``private`` when there is one, otherwise the system bus at
    ``path``."""

    def __init__(self, path: str = SOCKET, timeout: float = TIMEOUT,
                 private: typing.Optional[str] = None) -> None:
        self.bus_path = path
        self.private = private
        self.path = path  # the socket of the connection (the last one)
        self.timeout = timeout
        self.direct = False  # connected to systemd itself, no bus between
        self._sock: typing.Optional[socket.socket] = None
        self._stream: typing.Optional[_Stream] = None
        self._serials: typing.Optional[typing.Iterator[int]] = None
        self._lock = threading.Lock()  # one exchange at a time
        self._warned = False  # of the system bus, where private is absent
        # systemd's unique name on the system bus (GetNameOwner)
        self.owner: typing.Optional[str] = None
        self.ignored = 0  # messages dropped: not the answer awaited

    def __str__(self) -> str:
        return 'D-Bus at %s' % self.path

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._stream = None
        self.owner = None

    def _open(self, path: str, end: float,
              root: bool = False) -> tuple[socket.socket, bytes]:
        """A connection to ``path``, authenticated: the socket and what
        arrived after the server's ``OK`` line. ``root``: served by
        root only (``SO_PEERCRED``), checked before anything is sent."""
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError('no time left to connect')
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(left)
            sock.connect(path)
            uid = _peer_uid(sock) if root else 0
            if uid != 0:
                # Only root can listen there (/run/systemd is root's); a
                # peer of another user is not systemd, whatever the path.
                raise BackendError('%s is served by uid %d, not root: not '
                                   'systemd' % (path, uid))
            return sock, _authenticate(sock, end)
        except BaseException:
            sock.close()
            raise

    def _connect_private(self, private: str, end: float
                         ) -> typing.Optional[tuple[socket.socket, bytes]]:
        """A connection to systemd's own socket (no other peer can send
        on it); None where there is none to connect to."""
        try:
            return self._open(private, end, root=True)
        except (FileNotFoundError, ConnectionRefusedError,
                PermissionError) as exc:
            if not self._warned:
                self._warned = True
                LOG.warning(
                    'isolation: systemd\'s own socket %s cannot be '
                    'reached (%s): asking systemd through the system bus '
                    'at %s instead, where any local user can send this '
                    'connection messages; mount the host\'s /run/systemd '
                    '(doc: reference/security.rst)', private,
                    exc.strerror or exc, self.bus_path)
            return None

    def _connect(self, deadline: typing.Optional[float]) -> None:
        from jeepney.bus_messages import message_bus
        end, _ = _bound(self.timeout, deadline)
        self._serials = itertools.count(1)
        opened = None if self.private is None else \
            self._connect_private(self.private, end)
        if opened is not None and self.private is not None:
            self._sock, self.path, self.direct = opened[0], self.private, True
            self._stream = _Stream(*opened, self.timeout)
            return  # systemd itself: no bus, no Hello, no other sender
        opened = self._open(self.bus_path, end)
        self._sock, self.path, self.direct = opened[0], self.bus_path, False
        self._stream = _Stream(*opened, self.timeout)
        self._answer(self._exchange(message_bus.Hello(), (DRIVER,),
                                    deadline), 's',
                     'D-Bus Hello through %s' % self.path)
        owner, = self._answer(self._exchange(
            message_bus.GetNameOwner(SYSTEMD), (DRIVER,), deadline), 's',
            'D-Bus GetNameOwner(%s) through %s' % (SYSTEMD, self.path))
        if not owner.startswith(':'):
            raise BackendError('the bus names %r as the owner of %s, not a '
                               'unique name' % (owner, SYSTEMD))
        self.owner = owner

    # -- framing ------------------------------------------------------------

    def _exchange(self, msg: typing.Any,
                  senders: typing.Optional[tuple[str, ...]],
                  deadline: typing.Optional[float]) -> _Answer:
        """Send ``msg``; its answer from one of ``senders`` (any sender:
        None, on systemd's own socket), a method return or an error,
        read whole but not parsed beyond its header. Everything else
        that arrives meanwhile is stepped over by its fixed header's
        lengths, up to ``MAX_IGNORED`` messages and ``MAX_DROPPED``
        bytes."""
        # Only after _connect, which sets all three.
        assert self._sock is not None and self._serials is not None \
            and self._stream is not None
        stream = self._stream
        serial = next(self._serials)
        end, cut = _bound(self.timeout, deadline)
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError('no time left')
        self._sock.settimeout(left)
        self._sock.sendall(msg.serialise(serial=serial))
        dropped = ignored = 0
        forged: list[str] = []
        try:
            while True:
                stream.pos, count, size = dbuswire.step_over(
                    stream.buf, stream.pos, MAX_IGNORED - ignored + 1)
                ignored += count
                dropped += size
                if ignored > MAX_IGNORED or dropped > MAX_DROPPED:
                    raise _Flooded(
                        'dropped more than %d messages or %d bytes that '
                        'were not its answer (another peer floods the '
                        'connection)' % (MAX_IGNORED, MAX_DROPPED))
                stream.have(dbuswire.FIXED, end, cut)
                try:
                    head = dbuswire.fixed(stream.buf, stream.pos)
                except dbuswire.WireError as exc:
                    raise _Garbled(str(exc)) from None
                why = _why_not(stream, head, serial, senders, end, cut)
                if isinstance(why, _Answer):
                    return why
                if why is not None:
                    dropped += head.length
                    ignored += 1
                    if dropped > MAX_DROPPED:
                        continue  # flooded, said at the top, unread
                    LOG.debug('isolation: D-Bus: ignored a message of %d '
                              'bytes: %s', head.length, why[0])
                    if why[1] is not None:
                        forged.append(why[1])
                    stream.skip(head.length, end, cut)
        finally:
            self.ignored += ignored
            if ignored:
                LOG.debug('isolation: D-Bus %s: stepped over %d messages '
                          'that were not its answer',
                          msg.header.fields.get(_member()), ignored)
            if forged:
                LOG.warning(
                    'isolation: D-Bus %s: ignored %d messages that carried '
                    'its serial but were not its answer (from %s; systemd '
                    'is %s): another peer on the bus tries to answer for '
                    'systemd', msg.header.fields.get(_member()),
                    len(forged), ', '.join(sorted(set(forged))[:5]),
                    self.owner or 'not known yet')

    @staticmethod
    def _answer(reply: _Answer, signature: str,
                what: typing.Any) -> tuple[typing.Any, ...]:
        """The body of ``reply``; ``BackendError`` for an error reply or
        a body of another signature than ``signature`` (not parsed). A
        body that does not parse is a ``_Garbled``."""
        fields = reply.fields
        got = str(fields.get(dbuswire.SIGNATURE, ''))
        try:
            if reply.head.kind == dbuswire.ERROR:
                text = str(fields.get(dbuswire.ERROR_NAME))
                if got.startswith('s'):
                    text = dbuswire.string(reply.data, reply.head)
                raise BackendError('%s: %s' % (what, text))
            if got != signature:
                raise BackendError('%s: the answer has a body of signature '
                                   '%r, not %r' % (what, got, signature))
            if signature in ('s', 'o'):
                return (dbuswire.string(reply.data, reply.head),)
            if signature == 'v':
                return (dbuswire.variant_bytes(reply.data, reply.head),)
        except dbuswire.WireError as exc:
            raise _Garbled('a body that does not parse: %s' % exc) \
                from None
        if signature:
            raise BackendError('%s: no reader for a body of signature %r'
                               % (what, signature))
        return ()

    def _to_owner(self, msg: typing.Any) -> typing.Any:
        """``msg`` sent to systemd's unique name instead of its
        well-known one: to the peer whose answers are taken (on the
        system bus; on systemd's own socket there is no other)."""
        from jeepney import HeaderFields
        from jeepney.low_level import Header
        from jeepney.low_level import Message
        fields = dict(msg.header.fields)
        if self.direct or fields.get(HeaderFields.destination) != SYSTEMD:
            return msg
        fields[HeaderFields.destination] = self.owner
        h = msg.header
        return Message(Header(h.endianness, h.message_type, h.flags,
                              h.protocol_version, h.body_length, h.serial,
                              fields), msg.body)

    def call(self, msg: typing.Any, signature: str,
             deadline: typing.Optional[float] = None
             ) -> tuple[typing.Any, ...]:
        """The body of systemd's reply to ``msg``, which must have the
        D-Bus ``signature``; ``BackendError`` for an error reply or
        another body, ``BackendUnreachable`` for a timeout (each step at
        most ``timeout`` seconds, and none beyond ``deadline``, a
        ``time.monotonic()`` time), a broken connection or a flood.
        Anything but an error reply of systemd's or a body of another
        signature drops the connection."""
        what = msg.header.fields.get(_member())
        with self._lock:
            try:
                if self._sock is None:
                    self._connect(deadline)
                reply = self._exchange(
                    self._to_owner(msg),
                    None if self.direct else (str(self.owner),), deadline)
                if reply.fields.get(dbuswire.SENDER) == DRIVER:
                    # The bus could not deliver the call (systemd gone,
                    # restarted under another name, no reply): the next
                    # call asks who systemd is again.
                    self.close()
                return self._answer(reply, signature, what)
            except _Garbled as exc:
                self.close()
                raise BackendError('D-Bus %s through %s: %s'
                                   % (what, self.path, exc)) from None
            except _Flooded as exc:
                self.close()
                raise BackendUnreachable('D-Bus %s through %s: %s'
                                         % (what, self.path, exc)) from None
            except BackendError:
                if self.owner is None and not self.direct:
                    self.close()  # GetNameOwner failed: no systemd known
                raise
            except OSError as exc:  # TimeoutError is one
                self.close()
                raise BackendUnreachable(
                    'D-Bus %s through %s: %s' % (
                        what, self.path, str(exc) or type(exc).__name__)) \
                    from None
            except Exception as exc:  # jeepney's, or ours: never in step
                self.close()
                raise BackendError(
                    'D-Bus %s through %s: %s: %s' % (
                        what, self.path, type(exc).__name__, exc)) from None


def _authenticate(sock: socket.socket, end: float) -> bytes:
    """SASL EXTERNAL on a connected ``sock`` by ``end``: what arrived
    after the server's ``OK`` line (``_Stream`` reads it first).

    ``BEGIN`` goes in the same write as ``AUTH``, before the ``OK``, as
    sd-bus's clients (systemctl) send it. Sent after the ``OK``, it can
    reach systemd in one read with the first call behind it, and sd-bus's
    server (systemd's own socket) leaves a call read with ``BEGIN``
    unhandled until more bytes arrive: the call went unanswered 5 to 30
    s, or for good on a quiet host (issue 60, seen in the 2-socket VM).
    Both buses take it either way."""
    uid = str(os.geteuid()).encode('ascii').hex().encode('ascii')
    sock.sendall(b'\0AUTH EXTERNAL ' + uid + b'\r\nBEGIN\r\n')
    got = b''
    while b'\r\n' not in got:
        if len(got) > MAX_AUTH_LINE:
            raise _Garbled('%d bytes and no line in answer to AUTH'
                           % len(got))
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError('no answer to AUTH in time')
        sock.settimeout(left)
        data = sock.recv(MAX_AUTH_LINE)
        if not data:
            raise ConnectionResetError('closed in answer to AUTH')
        got += data
    line, early = got.split(b'\r\n', 1)
    if not line.startswith(b'OK '):
        raise BackendError('AUTH EXTERNAL as uid %d refused: %r'
                           % (os.geteuid(), line[:80]))
    return early


def _peer_uid(sock: socket.socket) -> int:
    """The user the process at the other end of ``sock`` runs as."""
    pid_uid_gid = struct.unpack('3i', sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize('3i')))
    return int(pid_uid_gid[1])


def _member() -> typing.Any:
    from jeepney import HeaderFields
    return HeaderFields.member


def _why_not(stream: _Stream, head: dbuswire.Fixed, serial: int,
             senders: typing.Optional[tuple[str, ...]], end: float,
             cut: bool) -> typing.Union[_Answer, tuple[str, typing.Optional[
                 str]], None]:
    """The message at ``stream.pos`` (fixed header ``head``) read whole
    when it is the answer to call ``serial`` awaited from one of
    ``senders`` (any: None); else why not, and its sender when it
    carried that serial; None: nothing decided yet (not whole)."""
    if head.kind not in (dbuswire.METHOD_RETURN, dbuswire.ERROR):
        if len(stream.buf) - stream.pos >= head.length:
            return None  # whole: step_over takes it
        return ('a message of type %d is no answer' % head.kind, None)
    if head.header_length > MAX_HEADER:
        return ('header fields beyond %d bytes' % MAX_HEADER, None)
    stream.have(head.header_length, end, cut)
    try:
        fields = dbuswire.fields(stream.buf, head, stream.pos)
    except dbuswire.WireError as exc:
        return ('header fields that do not parse: %s' % exc, None)
    if fields.get(dbuswire.REPLY_SERIAL) != serial:
        return ('not about this call', None)
    sender = fields.get(dbuswire.SENDER)
    if senders is not None and sender not in senders and not (
            head.kind == dbuswire.ERROR and sender == DRIVER):
        return ('not sent by %s' % ' or '.join(senders), str(sender))
    if head.body_length > MAX_ANSWER:
        raise _Garbled('an answer of %d bytes (at most %d)'
                       % (head.body_length, MAX_ANSWER))
    stream.have(head.length, end, cut)
    data = bytes(stream.buf[stream.pos:stream.pos + head.length])
    stream.pos += head.length
    return _Answer(head, fields, data)


class Caller(typing.Protocol):
    """What ``Manager`` needs of a bus (``Bus``, or a test's fake)."""

    def call(self, msg: typing.Any, signature: str,
             deadline: typing.Optional[float] = None
             ) -> tuple[typing.Any, ...]:
        """The body of systemd's reply to ``msg`` (a jeepney
        ``Message``), of D-Bus signature ``signature``."""


class Manager:
    """systemd's manager on ``bus`` (anything with ``call(message,
    signature, deadline)`` returning the reply's body)."""

    def __init__(self, bus: Caller) -> None:
        self.bus = bus

    def __str__(self) -> str:
        return 'D-Bus at %s' % getattr(self.bus, 'path', self.bus)

    def _unit_path(self, unit: str,
                   deadline: typing.Optional[float]) -> str:
        path, = self.bus.call(message(MANAGER_PATH, MANAGER, 'LoadUnit',
                                      's', (unit,)), 'o', deadline)
        if not isinstance(path, str) or not _OBJECT_PATH.fullmatch(path):
            raise BackendError('%s: LoadUnit answered %r, not an object '
                               'path' % (unit, path))
        return path

    def show(self, unit: str, deadline: typing.Optional[float] = None
             ) -> dict[str, str]:
        """``{property: 'cpu list'}`` for ``SHOWN``, as systemctl prints
        them; nothing asked beyond ``deadline`` (``time.monotonic()``)."""
        interface = INTERFACES.get(unit.rsplit('.', 1)[-1])
        if interface is None:
            raise BackendError('%s: not a slice, scope or service' % unit)
        path = self._unit_path(unit, deadline)
        props: dict[str, str] = {}
        for name in SHOWN:
            body = self.bus.call(message(
                path, PROPERTIES, 'Get', 'ss', (interface, name)), 'v',
                deadline)
            try:
                (signature, value), = body
            except (TypeError, ValueError):
                raise BackendError('%s: %s: %r is not a variant'
                                   % (unit, name, body)) from None
            if signature != 'ay' or not isinstance(value, bytes):
                raise BackendError('%s: %s is %r, not a CPU mask'
                                   % (unit, name, signature))
            try:
                props[name] = cpuset.format(cpumask.from_bytes(value))
            except cpuset.CpusetError as exc:
                raise BackendError('%s: %s: %s' % (unit, name, exc)) \
                    from None
        return props

    def set_runtime(self, unit: str, props: typing.Mapping[str, str],
                    deadline: typing.Optional[float] = None) -> None:
        """``systemctl set-property --runtime unit K=V...``: each value
        a CPU (or memory node) list, empty for none."""
        values: list[tuple[str, tuple[str, bytes]]] = []
        for name, text in sorted(props.items()):
            if name not in SETTABLE:
                raise BackendError('%s: %s cannot be set over D-Bus here'
                                   % (unit, name))
            try:
                mask = cpumask.to_bytes(cpuset.parse(text, allow_empty=True))
            except cpuset.CpusetError as exc:
                raise BackendError('%s=%s: %s' % (name, text, exc)) \
                    from None
            values.append((name, ('ay', mask)))
        self.bus.call(message(MANAGER_PATH, MANAGER, 'SetUnitProperties',
                              'sba(sv)', (unit, True, values)), '',
                      deadline)
