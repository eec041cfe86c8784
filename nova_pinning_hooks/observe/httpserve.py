"""The metrics endpoint over HTTP: bounded, time-bounded and minimal.

``MetricsServer`` serves the Prometheus text exposition that ``render``
returns on ``/metrics`` (and ``/``), for ``nova-pinning exporter``,
``nova-pinning agent --listen`` and nova-compute's pass thread
(``[nova_pinning] metrics_listen``). It runs as root next to libvirtd or
inside nova-compute, so a client must never be able to make it hold
more threads, descriptors or time than configured.

Invariants:

* at most ``max_requests`` requests are handled at once, one thread
  each (node_exporter's ``--web.max-requests`` is the model); a
  connection beyond that is answered ``503`` by the accepting thread
  with one non-blocking send and closed at once, so the threads of the
  server are at most ``max_requests`` plus the accepting one, whatever
  the clients do;
* a request must arrive whole (request line and headers, at most
  ``REQUEST_LIMIT`` bytes) within ``read_timeout`` seconds of the
  connection, a total deadline, not one per read (a client that sends a
  byte every few seconds is cut off too); the answer must be taken
  within ``write_timeout`` seconds (``sendall``'s timeout is total);
* ``GET`` and ``HEAD`` of ``/metrics`` or ``/`` (a query string is
  ignored) get the exposition (``HEAD``: its headers only); any other
  path is ``404``, any other method ``405``, a malformed request ``400``;
  one request per connection (``Connection: close``); no request body is
  ever read;
* ``render`` failing is a ``500`` with a one-line reason, never an
  exception out of the server;
* one peer holds at most ``max_per_peer`` of those requests at once
  (``peer_of``: an IPv4 address, an IPv6 /64, and every loopback
  address one peer, since a local user may connect from any of
  127.0.0.0/8); one more from it is answered ``503`` the same way, so
  a client that holds connections open starves only itself, not the
  Prometheus that scrapes from elsewhere (issue 40, L-3: 40 slow
  connections every 10 s made every scrape a 503);
* every refusal is counted (``refused``, ``refused_per_peer``) and
  logged: one warning line at once, then at most one a
  ``REFUSAL_LOG_INTERVAL`` with what was refused since, never a line a
  connection.
"""

import collections
import ipaddress
import re
import socket
import threading
import time
import typing

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

REQUEST_LIMIT = 8192  # bytes of request line and headers
CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
PATHS = ('/metrics', '/')
METHODS = ('GET', 'HEAD')
ACCEPT_POLL = 0.5  # seconds between checks of the stop event
REFUSAL_LOG_INTERVAL = 60.0  # seconds between warnings of refusals
LOOPBACK = 'loopback'


def peer_of(address: str) -> str:
    """The peer a connection from ``address`` counts against: its IPv4
    address (an IPv4-mapped IPv6 one too), its IPv6 /64, or
    ``LOOPBACK`` for any loopback address."""
    try:
        ip: typing.Union[ipaddress.IPv4Address, ipaddress.IPv6Address] = \
            ipaddress.ip_address(address.split('%', 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return LOOPBACK
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.ip_network('%s/64' % ip, strict=False))
    return str(ip)


def parse_listen(text: typing.Optional[str]) -> tuple[str, int]:
    """``ADDR:PORT`` or ``[IPv6]:PORT`` -> (address, port); ValueError."""
    match = re.fullmatch(r'\[([0-9A-Fa-f:.]{2,45})\]:([0-9]{1,5})|'
                         r'([0-9.]{7,15}):([0-9]{1,5})', text or '',
                         re.ASCII)
    if match is None:
        raise ValueError('%.60r is not ADDR:PORT (an IP address and a '
                         'port)' % text)
    address = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise ValueError('%.60r is not an IP address' % address) from None
    if not 1 <= port <= 65535:
        raise ValueError('port %d is out of range' % port)
    return address, port


def _status_line(code: int) -> str:
    reasons = {200: 'OK', 400: 'Bad Request', 404: 'Not Found',
               405: 'Method Not Allowed', 408: 'Request Timeout',
               500: 'Internal Server Error', 503: 'Service Unavailable'}
    return 'HTTP/1.1 %d %s\r\n' % (code, reasons[code])


def response(code: int, body: bytes,
             content_type: str = 'text/plain; charset=utf-8',
             head: bool = False,
             extra: typing.Iterable[tuple[str, str]] = ()) -> bytes:
    """The bytes of a whole answer (``head``: without the body)."""
    lines = [_status_line(code), 'Content-Type: %s\r\n' % content_type,
             'Content-Length: %d\r\n' % len(body), 'Connection: close\r\n']
    lines += ['%s: %s\r\n' % pair for pair in extra]
    return ''.join(lines + ['\r\n']).encode('ascii') + (b'' if head
                                                        else body)


def read_request(conn: socket.socket,
                 deadline: float) -> typing.Optional[bytes]:
    """The request head (bytes, up to the blank line), or None if the
    client closed, sent too much or was too slow."""
    data = b''
    while b'\r\n\r\n' not in data and b'\n\n' not in data:
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > REQUEST_LIMIT:
            return None
        conn.settimeout(left)
        try:
            chunk = conn.recv(REQUEST_LIMIT + 1 - len(data))
        except OSError:  # socket.timeout included
            return None
        if not chunk:
            return None
        data += chunk
    return data


def answer(head: bytes, render: typing.Callable[[], bytes]) -> bytes:
    """The response bytes for request head ``head`` (pure but for
    ``render``)."""
    line = head.split(b'\n', 1)[0].strip()
    parts = line.split(b' ')
    if len(parts) != 3 or not parts[2].startswith(b'HTTP/'):
        return response(400, b'bad request\n')
    method = parts[0].decode('ascii', 'replace')
    path = parts[1].split(b'?', 1)[0].decode('ascii', 'replace')
    if method not in METHODS:
        return response(405, b'only GET and HEAD\n',
                        extra=[('Allow', ', '.join(METHODS))])
    head_only = method == 'HEAD'
    if path not in PATHS:
        return response(404, b'not found: try /metrics\n', head=head_only)
    try:
        body = render()
    except Exception as exc:
        return response(500, ('metrics failed: %s\n' % type(
            exc).__name__).encode('ascii'), head=head_only)
    return response(200, body, CONTENT_TYPE, head=head_only)


class MetricsServer:
    """Listen on ``address``:``port`` (``OSError`` if it cannot be
    bound); ``serve_forever(stop)`` or ``start()`` in a daemon thread."""

    def __init__(self, address: str, port: int,
                 render: typing.Callable[[], bytes], max_requests: int = 40,
                 read_timeout: float = 10.0,
                 write_timeout: float = 10.0,
                 max_per_peer: int = 4) -> None:
        self.render = render
        self.max_requests = max_requests
        self.max_per_peer = max_per_peer
        self.read_timeout, self.write_timeout = read_timeout, write_timeout
        self.slots = threading.BoundedSemaphore(max_requests)
        # Requests being served, by peer (under _peers_lock).
        self._peers: collections.Counter[str] = collections.Counter()
        self._peers_lock = threading.Lock()
        family = socket.AF_INET6 if ':' in address else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((address, port))
            self.sock.listen(128)
        except OSError:
            self.sock.close()
            raise
        self.sock.settimeout(ACCEPT_POLL)
        self.address: tuple[str, int] = self.sock.getsockname()[:2]
        self.refused = 0  # connections answered 503: over a limit
        self.refused_per_peer = 0  # of those, over max_per_peer
        # What was refused since the last warning: {peer: count}, and
        # how many of those were over max_per_peer.
        self._unlogged: collections.Counter[str] = collections.Counter()
        self._unlogged_per_peer = 0
        self._next_log = 0.0  # monotonic time of the next warning
        self._stop = threading.Event()
        self._thread: typing.Optional[threading.Thread] = None

    def start(self) -> 'MetricsServer':
        """Serve in a daemon thread until ``close``."""
        self._thread = threading.Thread(
            target=self.serve_forever, args=(self._stop,), daemon=True,
            name='nova-pinning-metrics-http')
        self._thread.start()
        return self

    def serve_forever(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set() and not self._stop.is_set():
                try:
                    conn, client = self.sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self._stop.is_set():
                        break
                    time.sleep(ACCEPT_POLL)  # EMFILE and the like: wait
                    continue
                self._dispatch(conn, peer_of(str(client[0])))
        finally:
            self.sock.close()

    def _dispatch(self, conn: socket.socket, peer: str = LOOPBACK) -> None:
        with self._peers_lock:
            mine = self._peers[peer] < self.max_per_peer
            if mine:
                self._peers[peer] += 1
        if not mine or not self.slots.acquire(blocking=False):
            if mine:
                self._done(peer)
            self._refuse(conn, peer, per_peer=not mine)
            return
        try:
            threading.Thread(target=self._handle, args=(conn, peer),
                             daemon=True,
                             name='nova-pinning-metrics-request').start()
        except Exception:
            self.slots.release()
            self._done(peer)
            conn.close()

    def _done(self, peer: str) -> None:
        with self._peers_lock:
            self._peers[peer] -= 1
            if self._peers[peer] <= 0:
                del self._peers[peer]

    def _refuse(self, conn: socket.socket, peer: str,
                per_peer: bool) -> None:
        """Answer 503 with one non-blocking send, close, count, and warn
        (rate-limited); on the accepting thread."""
        self.refused += 1
        self.refused_per_peer += per_peer
        try:
            conn.setblocking(False)
            conn.send(response(503, b'too many requests\n'))
        except OSError:
            pass  # the client's loss: it is over the limit anyway
        conn.close()
        self._unlogged[peer] += 1
        self._unlogged_per_peer += per_peer
        now = time.monotonic()
        if now < self._next_log:
            return
        self._next_log = now + REFUSAL_LOG_INTERVAL
        total = sum(self._unlogged.values())
        top, count = self._unlogged.most_common(1)[0]
        LOG.warning(
            'metrics endpoint %s:%d: refused %d connection(s) with 503 '
            '(%d over %d requests at once from one peer, %d over %d in '
            'all), most from %s (%d); a scrape refused so reads as this '
            'endpoint down; next such line in %d s at the earliest',
            self.address[0], self.address[1], total,
            self._unlogged_per_peer, self.max_per_peer,
            total - self._unlogged_per_peer, self.max_requests, top,
            count, REFUSAL_LOG_INTERVAL)
        self._unlogged.clear()
        self._unlogged_per_peer = 0

    def _handle(self, conn: socket.socket, peer: str = LOOPBACK) -> None:
        try:
            deadline = time.monotonic() + self.read_timeout
            head = read_request(conn, deadline)
            if head is not None:
                data = answer(head, self.render)
                conn.settimeout(self.write_timeout)
                conn.sendall(data)
        except OSError:
            pass  # the client went away or was too slow to read
        finally:
            conn.close()
            self.slots.release()
            self._done(peer)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(ACCEPT_POLL * 4)
