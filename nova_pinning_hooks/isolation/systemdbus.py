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

The protocol (authentication, marshalling, parsing) is jeepney's: pure
Python, maintained, in Debian as python3-jeepney and in every nova
series' upper-constraints. Its own blocking connection says Hello
without a time limit, so the exchange on the socket is ours.

Invariants:

* only the system bus socket at ``SOCKET`` (/run/dbus/system_bus_socket;
  a container gets it by mounting the host's /run), never an address
  from the environment (``DBUS_SYSTEM_BUS_ADDRESS``): root talks to the
  bus root's daemon listens on, not one that a caller chose;
* every blocking step is time-bounded: connecting and authenticating,
  Hello, each call's send and its reply (``TIMEOUT`` seconds each); a
  step that runs out of time is a ``BackendError`` naming the call, and
  the connection is dropped (its stream is no longer in step); the next
  call connects afresh (dbus-daemon may have restarted);
* a D-Bus error reply is a ``BackendError`` with systemd's own message
  (``Unit user.slice not found.``); the connection stays;
* runtime properties only (runtime=true): like ``set-property
  --runtime``, nothing survives a reboot;
* jeepney is imported at first use: the systemctl path never needs it.
"""

import itertools
import socket
import threading
import time
import typing

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import BackendError

SOCKET = '/run/dbus/system_bus_socket'
TIMEOUT = 30  # seconds; systemctl's own default is 25 s (D-Bus's)
SYSTEMD = 'org.freedesktop.systemd1'
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


class Bus:
    """One connection to the system bus, opened at first use."""

    def __init__(self, path: str = SOCKET, timeout: float = TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: typing.Optional[socket.socket] = None
        self._parser: typing.Any = None  # a jeepney Parser once connected
        self._serials: typing.Optional[typing.Iterator[int]] = None
        self._lock = threading.Lock()  # one exchange at a time

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None

    def _connect(self) -> None:
        import jeepney
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import prep_socket
        self._sock = prep_socket(self.path, timeout=self.timeout)
        self._parser = jeepney.Parser()
        self._serials = itertools.count(1)
        self._exchange(message_bus.Hello())

    def _exchange(self, msg: typing.Any) -> typing.Any:
        from jeepney import HeaderFields
        # Only after _connect, which sets both.
        assert self._sock is not None and self._serials is not None
        serial = next(self._serials)
        deadline = time.monotonic() + self.timeout
        self._sock.settimeout(self.timeout)
        self._sock.sendall(msg.serialise(serial=serial))
        while True:
            reply = self._parser.get_next_message()
            if reply is None:
                left = deadline - time.monotonic()
                try:
                    if left <= 0:
                        raise socket.timeout()
                    self._sock.settimeout(left)
                    data = self._sock.recv(65536)
                except socket.timeout:
                    raise TimeoutError('no reply within %s s'
                                       % self.timeout) from None
                if not data:
                    raise ConnectionResetError('the bus closed the '
                                               'connection')
                self._parser.add_data(data)
            elif reply.header.fields.get(HeaderFields.reply_serial) == \
                    serial:
                return reply
            # Anything else (NameAcquired, a signal) is not an answer.

    def call(self, msg: typing.Any) -> tuple[typing.Any, ...]:
        """The reply's body; ``BackendError`` for an error reply, a
        timeout or a broken connection."""
        from jeepney import HeaderFields
        from jeepney import MessageType
        what = msg.header.fields.get(HeaderFields.member)
        with self._lock:
            try:
                if self._sock is None:
                    self._connect()
                reply = self._exchange(msg)
            except (OSError, ValueError) as exc:  # TimeoutError is one
                self.close()
                raise BackendError(
                    'D-Bus %s through %s: %s' % (
                        what, self.path, str(exc) or type(exc).__name__)) \
                    from None
        if reply.header.message_type is MessageType.error:
            name = reply.header.fields.get(HeaderFields.error_name)
            text = reply.body[0] if reply.body and isinstance(
                reply.body[0], str) else name
            raise BackendError('%s: %s' % (what, text))
        return reply.body


class Caller(typing.Protocol):
    """What ``Manager`` needs of a bus (``Bus``, or a test's fake)."""

    def call(self, msg: typing.Any) -> tuple[typing.Any, ...]:
        """The body of the reply to ``msg`` (a jeepney ``Message``)."""


class Manager:
    """systemd's manager on ``bus`` (anything with ``call(message)``
    returning the reply's body)."""

    def __init__(self, bus: Caller) -> None:
        self.bus = bus

    def __str__(self) -> str:
        return 'D-Bus at %s' % getattr(self.bus, 'path', self.bus)

    def _unit_path(self, unit: str) -> str:
        return self.bus.call(message(MANAGER_PATH, MANAGER, 'LoadUnit',
                                     's', (unit,)))[0]

    def show(self, unit: str) -> dict[str, str]:
        """``{property: 'cpu list'}`` for ``SHOWN``, as systemctl prints
        them."""
        interface = INTERFACES.get(unit.rsplit('.', 1)[-1])
        if interface is None:
            raise BackendError('%s: not a slice, scope or service' % unit)
        path = self._unit_path(unit)
        props: dict[str, str] = {}
        for name in SHOWN:
            (signature, value), = self.bus.call(message(
                path, PROPERTIES, 'Get', 'ss', (interface, name)))
            if signature != 'ay':
                raise BackendError('%s: %s is %r, not a CPU mask'
                                   % (unit, name, signature))
            try:
                props[name] = cpuset.format(cpumask.from_bytes(value))
            except cpuset.CpusetError as exc:
                raise BackendError('%s: %s: %s' % (unit, name, exc)) \
                    from None
        return props

    def set_runtime(self, unit: str,
                    props: typing.Mapping[str, str]) -> None:
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
                              'sba(sv)', (unit, True, values)))
