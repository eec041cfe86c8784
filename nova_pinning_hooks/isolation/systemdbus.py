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

Authentication and the marshalling of what we send are jeepney's (pure
Python, maintained, in Debian as python3-jeepney and in every nova
series' upper-constraints); the framing of what arrives is ours. jeepney
reads a message whole and parses its body before anyone can look at its
header: a signal of type ``h`` (a descriptor's index) that carries no
descriptor, which dbus-daemon and dbus-broker both deliver from any
local user, raised ``IndexError`` out of its parser and left the stream
out of step for the life of the process, and 8 signals of 16 MiB took
14.5 s and 222 MiB against a 5 s deadline (issue 48, R5-H1, R5-M1).
No library offers what is needed here (look at the header, skip the
body unread): dbus-fast and dbus-next parse whole messages too and are
asyncio's, python-dbus (libdbus) buffers up to 32 MiB a message and is
in no nova series' upper-constraints, sd-bus has no Python binding there.
So ``Bus`` reads the 16 bytes of the fixed header (the body's length,
the header fields' length), then the header fields alone (at most
``MAX_HEADER``, else the message is skipped unread; jeepney parses
them), and decides from them; it reads a
body only for the awaited answer (at most ``MAX_ANSWER``) and parses it
with jeepney only when its signature is the one expected (an error's
when it starts with its message, ``s``). Anything else is skipped in
bounded reads, never held.

Invariants:

* only the system bus socket at ``SOCKET`` (/run/dbus/system_bus_socket;
  a container gets it by mounting the host's /run), never an address
  from the environment (``DBUS_SYSTEM_BUS_ADDRESS``): root talks to the
  bus root's daemon listens on, not one that a caller chose;
* only systemd answers: at connect, after Hello, the bus is asked which
  unique name owns ``org.freedesktop.systemd1`` (``GetNameOwner``), and
  every call is sent to that unique name. A message is taken as the
  answer to a call only when it is a ``method_return`` or an ``error``
  that carries the call's serial and comes from that unique name (an
  ``error`` from the bus itself too: it answers calls it cannot
  deliver, systemd gone or restarted under another name, and the
  connection is then dropped, so the next call asks again), and a
  ``method_return`` only with the signature the call expects (a body of
  another signature is a ``BackendError``). The bus
  sets every message's sender itself, so no other peer can send as
  systemd or as the bus; serials are predictable and our unique name is
  public, and a peer can send us a signal (or, on some buses, a method
  return) carrying any reply serial: anything else is dropped and
  counted (``ignored``; a debug line each, one warning per call for
  those that carried its serial), its body never read into memory nor
  parsed; at most ``MAX_DROPPED`` bytes a call are dropped so: beyond,
  another peer floods the connection, which is dropped
  (``BackendUnreachable``);
* anything that does not parse (the fixed header, the header fields, an
  answer's body: any exception, not only jeepney's ``ValueError``) is a
  ``BackendError``, and the connection is dropped: it is never left out
  of step, and the next call connects afresh;
* every blocking step is time-bounded: connecting and authenticating,
  Hello, GetNameOwner, each call's send and its reply (``TIMEOUT``
  seconds each, and never beyond a caller's ``deadline``), the clock
  looked at before every read, each read bounded by the time left and
  by the bytes the message still owes (never more than 1 MiB); a
  step that
  runs out of time or a connection that breaks is a
  ``BackendUnreachable`` (a ``BackendError``) naming the call, and the
  connection is dropped (its stream is no longer in step); the next call
  connects afresh (dbus-daemon or systemd may have restarted);
* a D-Bus error reply is a ``BackendError`` with systemd's own message
  (``Unit user.slice not found.``); the connection stays;
* runtime properties only (runtime=true): like ``set-property
  --runtime``, nothing survives a reboot;
* jeepney is imported at first use: the systemctl path never needs it.
"""

import itertools
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

LOG = logging.getLogger(__name__)

SOCKET = '/run/dbus/system_bus_socket'
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
FIXED = 16
MAX_HEADER = 64 << 10
MAX_ANSWER = 1 << 20
MAX_DROPPED = 256 << 20
READ_SIZE = 1 << 20
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


def _bound(seconds: float,
           deadline: typing.Optional[float]) -> tuple[float, bool]:
    """(the monotonic time one step must end by, whether the caller's
    ``deadline`` rather than ``seconds`` sets it)."""
    end = time.monotonic() + seconds
    if deadline is not None and deadline < end:
        return deadline, True
    return end, False


class _Flooded(BackendUnreachable):
    """More than ``MAX_DROPPED`` bytes of messages that were not the
    answer arrived during one call."""


class _Frame(typing.NamedTuple):
    """One message as it arrived: its header (jeepney's ``Header``),
    and its bytes up to the body (the body is read only for an
    answer)."""

    header: typing.Any  # None: header fields beyond MAX_HEADER, unread
    head: bytes
    unread: int = 0  # the bytes of the message after ``head``, unread


class Bus:
    """One connection to the system bus, opened at first use."""

    def __init__(self, path: str = SOCKET, timeout: float = TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: typing.Optional[socket.socket] = None
        self._serials: typing.Optional[typing.Iterator[int]] = None
        self._lock = threading.Lock()  # one exchange at a time
        # systemd's unique name on this connection (GetNameOwner)
        self.owner: typing.Optional[str] = None
        self.ignored = 0  # messages dropped: not the answer awaited

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self.owner = None

    def _connect(self, deadline: typing.Optional[float]) -> None:
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import prep_socket
        end, _ = _bound(self.timeout, deadline)
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError('no time left to connect')
        try:
            self._sock = prep_socket(self.path, timeout=left)
        except TimeoutError:
            raise TimeoutError('the bus did not authenticate us within '
                               '%.3g s' % left) from None
        self._serials = itertools.count(1)
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

    def _read(self, count: int, end: float, cut: bool,
              into: typing.Optional[bytearray] = None) -> int:
        """Read exactly ``count`` bytes (appended to ``into``, or
        dropped), before ``end``; each read asks for no more than the
        message still owes, ``READ_SIZE`` at most."""
        assert self._sock is not None  # only after _connect
        scratch = bytearray(min(count, READ_SIZE))
        done = 0
        while done < count:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError('no reply in the time left' if cut else
                                   'no reply within %s s' % self.timeout)
            self._sock.settimeout(left)
            try:
                n = self._sock.recv_into(scratch, min(count - done,
                                                      len(scratch)))
            except socket.timeout:
                continue  # the clock says, at the top of the loop
            if not n:
                raise ConnectionResetError('the bus closed the connection')
            if into is not None:
                into += scratch[:n]
            done += n
        return done

    def _frame(self, end: float, cut: bool) -> _Frame:
        """The next message's header, read from the socket: the fixed
        header, then the header fields alone. The body is left unread."""
        from jeepney.low_level import Header
        head = bytearray()
        self._read(FIXED, end, cut, head)
        order = {b'l': '<', b'B': '>'}.get(bytes(head[:1]))
        if order is None or head[3] != 1:
            raise _Garbled('not a D-Bus message (byte order %r, version '
                           '%d)' % (bytes(head[:1]), head[3]))
        body, fields = struct.unpack(order + 'I4xI', head[4:16])
        padded = fields + -(FIXED + fields) % 8
        if fields > MAX_HEADER:
            # No answer of systemd's has such a header: not read.
            return _Frame(None, bytes(head), padded + body)
        self._read(padded, end, cut, head)
        try:
            header, _ = Header.from_buffer(bytes(head))
        except Exception as exc:
            raise _Garbled('a header that does not parse: %s'
                           % (str(exc) or type(exc).__name__)) from None
        return _Frame(header, bytes(head), body)

    def _exchange(self, msg: typing.Any, senders: tuple[str, ...],
                  deadline: typing.Optional[float]) -> _Frame:
        """Send ``msg``; the header of its answer from one of
        ``senders`` (a method return or an error), whose body is read
        but not parsed. Everything else that arrives meanwhile is
        dropped unread, up to ``MAX_DROPPED`` bytes."""
        from jeepney import HeaderFields
        # Only after _connect, which sets both.
        assert self._sock is not None and self._serials is not None
        serial = next(self._serials)
        end, cut = _bound(self.timeout, deadline)
        forged: list[str] = []
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError('no time left')
        self._sock.settimeout(left)
        self._sock.sendall(msg.serialise(serial=serial))
        dropped = 0
        try:
            while True:
                frame = self._frame(end, cut)
                header = frame.header
                why = 'header fields beyond %d bytes' % MAX_HEADER \
                    if header is None else \
                    _not_the_answer(header, serial, senders)
                if why is None:
                    if frame.unread > MAX_ANSWER:
                        raise _Garbled('an answer of %d bytes (at most %d)'
                                       % (frame.unread, MAX_ANSWER))
                    body = bytearray(frame.head)
                    self._read(frame.unread, end, cut, body)
                    return _Frame(header, bytes(body))
                dropped += len(frame.head) + frame.unread
                if dropped > MAX_DROPPED:
                    raise _Flooded(
                        'dropped more than %d bytes of messages that were '
                        'not its answer (another peer floods the '
                        'connection)' % MAX_DROPPED)
                self._read(frame.unread, end, cut)
                self.ignored += 1
                fields = {} if header is None else header.fields
                LOG.debug('isolation: D-Bus: ignored a message of %d bytes '
                          'from %s: %s', len(frame.head) + frame.unread,
                          fields.get(HeaderFields.sender), why)
                if fields.get(HeaderFields.reply_serial) == serial:
                    forged.append(str(fields.get(HeaderFields.sender)))
        finally:
            if forged:
                LOG.warning(
                    'isolation: D-Bus %s: ignored %d messages that carried '
                    'its serial but were not its answer (from %s; systemd '
                    'is %s): another peer on the bus tries to answer for '
                    'systemd', msg.header.fields.get(HeaderFields.member),
                    len(forged), ', '.join(sorted(set(forged))[:5]),
                    self.owner or 'not known yet')

    @staticmethod
    def _answer(reply: _Frame, signature: str,
                what: typing.Any) -> tuple[typing.Any, ...]:
        """The body of ``reply``; ``BackendError`` for an error reply or
        a body of another signature than ``signature`` (not parsed). A
        body that does not parse is a ``_Garbled``."""
        from jeepney import HeaderFields
        from jeepney import MessageType
        fields = reply.header.fields
        got = fields.get(HeaderFields.signature, '')
        if reply.header.message_type is MessageType.error:
            name = fields.get(HeaderFields.error_name)
            text = name
            if got.startswith('s') and 'h' not in got:
                body = _body(reply)
                if body and isinstance(body[0], str):
                    text = body[0]
            raise BackendError('%s: %s' % (what, text))
        if got != signature:
            raise BackendError('%s: the answer has a body of signature '
                               '%r, not %r' % (what, got, signature))
        return _body(reply)

    def _to_owner(self, msg: typing.Any) -> typing.Any:
        """``msg`` sent to systemd's unique name instead of its
        well-known one: to the peer whose answers are taken."""
        from jeepney import HeaderFields
        from jeepney.low_level import Header
        from jeepney.low_level import Message
        fields = dict(msg.header.fields)
        if fields.get(HeaderFields.destination) != SYSTEMD:
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
        from jeepney import HeaderFields
        what = msg.header.fields.get(HeaderFields.member)
        with self._lock:
            try:
                if self._sock is None:
                    self._connect(deadline)
                reply = self._exchange(self._to_owner(msg),
                                       (str(self.owner),), deadline)
                if reply.header.fields.get(HeaderFields.sender) == DRIVER:
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
                if self.owner is None:
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


class _Garbled(BackendError):
    """A message that does not parse, or is larger than allowed: the
    stream can no longer be trusted to be in step."""


def _body(reply: _Frame) -> tuple[typing.Any, ...]:
    """The parsed body of a whole message (jeepney)."""
    from jeepney.low_level import Message
    try:
        body: tuple[typing.Any, ...] = Message.from_buffer(reply.head).body
    except Exception as exc:
        raise _Garbled('a body that does not parse: %s: %s'
                       % (type(exc).__name__, exc)) from None
    return body


def _not_the_answer(header: typing.Any, serial: int,
                    senders: tuple[str, ...]) -> typing.Optional[str]:
    """Why the message of ``header`` is not the answer to call
    ``serial`` awaited from one of ``senders``, or None when it is."""
    from jeepney import HeaderFields
    from jeepney import MessageType
    fields = header.fields
    if fields.get(HeaderFields.reply_serial) != serial:
        return 'not about this call'
    kind = header.message_type
    if kind not in (MessageType.method_return, MessageType.error):
        return 'a %s is no answer' % kind.name
    sender = fields.get(HeaderFields.sender)
    if sender in senders or (kind is MessageType.error and
                             sender == DRIVER):
        return None
    return 'not sent by %s' % ' or '.join(senders)


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
