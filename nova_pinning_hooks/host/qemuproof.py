"""Proof that the pid libvirt recorded for a guest is that guest's qemu here.

libvirt writes each guest's qemu pid (``/run/libvirt/qemu/<name>.pid``)
as its own PID namespace numbers it. A process in another PID namespace
that still sees the host's ``/run`` -- kolla-ansible's ``nova_compute``
container: privileged, ``ipc_mode: host``, no ``pid_mode: host`` -- reads
a number that, in its own ``/proc``, names another process or none. Facts
read there (memory placement, vCPU thread affinity, ``schedstat``) would
be another process's, and the drift check would "repair" pins that never
drifted.

Invariants:

* a pid is used for a guest's ``/proc`` reads only when
  ``/proc/<pid>/cmdline`` is that guest's qemu command line: an argument
  ``-name`` followed by ``guest=<name>[,...]`` (libvirt's form; a comma in
  the name is doubled) or by the bare name (older libvirt);
* the proof holds for one read: ``read`` proves the pid, reads, then checks
  that the same process (its start time in ``/proc/<pid>/stat``) still
  holds the pid and still names the guest; a pid reused in between gives
  no answer, never the new process's facts;
* no proof, no facts: ``read`` returns None and the caller treats the
  guest's ``/proc`` facts as unknown (memory placement from libvirt's
  XML, no drift check, no ``schedstat``);
* each guest without proof is listed by ``unknown`` (``status`` shows
  it) and logged once per guest and pid (again only after it was proven
  meanwhile): at debug level first, since in a burst of boots libvirt
  records the pid of its child before the child has exec'd qemu (the
  next read proves it), and as a warning once a read still finds no
  proof ``PERSISTS`` seconds after the first; nothing is guessed;
* files are read as regular files of bounded size, without following
  links (``safefs``); nothing is written.
"""

import os
import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.host import safefs

LOG = logging.getLogger(__name__)

# Linux caps a command line shown in /proc only by the argument space;
# qemu's (libvirt's) is a few KiB. A longer one is not a guest's qemu.
CMDLINE_LIMIT = 1 << 17
STAT_LIMIT = 4096
MAX_REMEMBERED = 4096  # guests remembered as unknown, at most
# Seconds a pid stays unproven before it is a warning: libvirt's child
# execs qemu within milliseconds of its fork, and a pass reads a guest
# again only after an event or a resync.
PERSISTS = 10.0

_T = typing.TypeVar('_T')


def names_guest(cmdline: bytes, name: str) -> bool:
    """Whether the NUL-separated ``cmdline`` (bytes) is qemu's for the
    guest called ``name``: its ``-name`` argument names it."""
    args = cmdline.split(b'\0')
    wanted = name.encode('utf-8', 'surrogateescape')
    for i, arg in enumerate(args[:-1]):
        if arg != b'-name':
            continue
        value = args[i + 1]
        if value.startswith(b'guest='):
            value = value[len(b'guest='):]
        # The value ends at the first single comma (",," is a comma).
        found, j = bytearray(), 0
        while j < len(value):
            if value[j:j + 1] == b',':
                if value[j + 1:j + 2] != b',':
                    break
                j += 1
            found += value[j:j + 1]
            j += 1
        return bytes(found) == wanted
    return False


def start_time(pid: int, proc: str = '/proc') -> int:
    """The process's start time (clock ticks since boot, field 22 of
    ``/proc/<pid>/stat``): with the pid, it names one process."""
    text = safefs.read_file(os.path.join(proc, str(pid), 'stat'),
                            STAT_LIMIT, 'stat')
    # The command name (field 2) may hold spaces and ')': skip past the
    # last ')'.
    fields = text[text.rindex(b')') + 1:].split()
    return int(fields[19])


def _identity(pid: int, name: str, proc: str
              ) -> tuple[typing.Optional[int], typing.Optional[str]]:
    """(start time, None) when ``pid`` is ``name``'s qemu here, else
    (None, why)."""
    base = os.path.join(proc, str(pid))
    try:
        before = start_time(pid, proc)
        cmdline = safefs.read_file(os.path.join(base, 'cmdline'),
                                   CMDLINE_LIMIT, 'cmdline')
    except FileNotFoundError:
        return None, 'no process %d here' % pid
    except (OSError, ValueError, IndexError) as exc:
        return None, 'process %d unreadable here (%s)' % (pid, exc)
    if not names_guest(cmdline, name):
        return None, ('process %d here is not its qemu (its command line '
                      'does not name the guest)' % pid)
    return before, None


class Proof:
    """Proves pids per guest; remembers which guests have no proof."""

    def __init__(self, proc: str = '/proc') -> None:
        self.proc = proc
        self.clock = time.monotonic  # tests replace it
        self._lock = threading.Lock()
        # guest name -> (pid, why, when first unproven, warned)
        self._unknown: dict[
            str, tuple[int, typing.Optional[str], float, bool]] = {}

    def read(self, name: str, pid: int,
             reader: typing.Callable[[int], _T]) -> typing.Optional[_T]:
        """``reader(pid)`` when ``pid`` is proven to be ``name``'s qemu
        for the whole read, else None (the facts are unknown)."""
        started, why = _identity(pid, name, self.proc)
        if started is not None:
            result = reader(pid)
            again, why = _identity(pid, name, self.proc)
            if again == started:
                self._proven(name)
                return result
            why = why or 'process %d was replaced while being read' % pid
        self._refuse(name, pid, why)
        return None

    def _proven(self, name: str) -> None:
        if name in self._unknown:
            with self._lock:
                self._unknown.pop(name, None)

    def _refuse(self, name: str, pid: int,
                why: typing.Optional[str]) -> None:
        now = self.clock()
        with self._lock:
            said = self._unknown.get(name)
            if said is not None and said[0] != pid:
                said = None  # another pid: another story
            if len(self._unknown) >= MAX_REMEMBERED and said is None:
                self._unknown.clear()  # bounded; at worst said again
            first, warned = (now, False) if said is None else said[2:]
            warn = not warned and now - first >= PERSISTS
            self._unknown[name] = (pid, why, first, warned or warn)
        if warn:
            LOG.warning('guest %s: pid %d from libvirt is not proven to be '
                        'its qemu for %.0f s: %s (another PID namespace?); '
                        'its memory placement, vCPU affinity and schedstat '
                        'are unknown here: not read, no drift check', name,
                        pid, now - first, why)
        elif said is None:
            LOG.debug('guest %s: pid %d from libvirt is not proven to be '
                      'its qemu yet: %s (libvirt\'s child before it '
                      'exec\'d qemu, or another PID namespace: a warning '
                      'if it lasts %.0f s); its /proc facts are unknown '
                      'meanwhile', name, pid, why, PERSISTS)

    def unknown(self) -> dict[str, typing.Optional[str]]:
        """{guest name: why} of the guests whose /proc facts are unknown
        (their last read found no proof)."""
        with self._lock:
            return {n: said[1] for n, said in sorted(self._unknown.items())}
