"""Working with irqbalance rather than racing it.

irqbalance moves interrupts every 10 s by its own rules. Writing
affinities behind its back would be undone at its next rebalance, so
when it runs the agent gives it the CPUs to keep interrupts off: the
one-to-one CPUs, added to what it banned before (its own choice from
``isolcpus=``, ``nohz_full=`` or ``IRQBALANCE_BANNED_CPULIST``, which
our list replaces while it is in force). irqbalance 1.9 (Debian 12:
1.9.2) takes ``settings cpus <list>`` (or ``NULL``: back to its own
choice) on its socket ``/run/irqbalance/irqbalance<pid>.sock`` from a
root client (it checks the sender's credentials), and answers
``setup`` with ``... BANNED <mask>``. An irqbalance that could not make
that socket falls back to an abstract name nobody can find; it is then
told nothing, and the agent's own writes keep the interrupts off (it
says so once).

``record`` is the ``irqbalance`` part of the isolation state
(``Record``): ``{"pid": 812, "start": 1234, "original": "0", "told":
"0,4-5"}``.

Invariants:

* only the irqbalance process that was recorded (pid and start time) is
  told and later given its choice back; a restarted irqbalance starts
  from its own configuration, so the record is then started afresh;
* one message per change of the one-to-one CPUs, never one per pass;
* every socket operation is bounded by ``TIMEOUT`` (irqbalance 1.9.2
  answers only between two of its rebalancing sleeps, up to 10 s);
* a failure (gone, no socket, refused) is one log line, and the rest
  of the agent goes on; it is not tried again for the same CPUs, except
  a timeout (irqbalance busy), tried again after ``RETRY_FIRST``
  seconds, then twice as long each time up to ``RETRY_MAX``
  (``retry_at`` and ``retries`` in the record).
"""

import os
import socket
import struct
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import procfs

LOG = logging.getLogger(__name__)


class Record(typing.TypedDict, total=False):
    """The ``irqbalance`` part of the isolation state."""

    pid: int  # the irqbalance told (with its start time)
    start: int
    original: str  # the CPUs it banned of its own choice
    told: str  # the CPUs it was told to ban
    failed: str  # the one-to-one CPUs it could not be told
    retry_at: float  # after a timeout: when to try again
    retries: int


def _clear(record: Record) -> None:
    # Every key of the record is optional (TypedDict has no clear()).
    typing.cast(dict[str, object], record).clear()


RUN_DIR = '/run/irqbalance'
COMM = 'irqbalance'
TIMEOUT = 15.0  # seconds: more than irqbalance's default 10 s sleep
REPLY_LIMIT = 65536
MESSAGE_LIMIT = 499  # irqbalance reads one message of up to 500 bytes
# A timeout is irqbalance busy (rescanning on a loaded host), not unable:
# tried again after RETRY_FIRST seconds, doubling up to RETRY_MAX.
RETRY_FIRST = 30.0
RETRY_MAX = 600.0
clock = time.time  # wall clock: the retry time is kept in the state file


class IrqbalanceError(OSError):
    pass


def find(proc: str = '/proc') -> typing.Optional[procfs.Proc]:
    """The running irqbalance (``procfs.Proc``), or None."""
    for pid in procfs.pids(proc):
        p = procfs.read(pid, proc)
        if p is not None and p.comm == COMM and p.state != 'Z':
            return p
    return None


def socket_path(pid: int, run_dir: str = RUN_DIR) -> str:
    return os.path.join(run_dir, 'irqbalance%d.sock' % pid)


def _talk(path: str, message: str, reply: bool = False,
          timeout: float = TIMEOUT) -> str:
    data = message.encode('ascii')
    if len(data) > MESSAGE_LIMIT:
        raise IrqbalanceError('message of %d bytes is too long for '
                              'irqbalance' % len(data))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        creds = struct.pack('3i', os.getpid(), os.getuid(), os.getgid())
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS,
                            creds)])
        if not reply:
            return ''
        chunks, size = [], 0
        while size <= REPLY_LIMIT:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b''.join(chunks).decode('ascii', 'replace')


def banned(path: str, timeout: float = TIMEOUT) -> frozenset[int]:
    """The CPUs irqbalance keeps interrupts off now (its ``setup``)."""
    words = _talk(path, 'setup', reply=True, timeout=timeout).split()
    try:
        return cpumask.parse(words[words.index('BANNED') + 1])
    except (ValueError, IndexError):
        raise IrqbalanceError('irqbalance answered "setup" without a '
                              'BANNED mask: %.80r' % ' '.join(words)) \
            from None


def tell(path: str, cpus: typing.Optional[frozenset[int]],
         timeout: float = TIMEOUT) -> None:
    """Ban ``cpus`` (None: back to irqbalance's own choice)."""
    _talk(path, 'settings cpus %s' % (
        'NULL' if cpus is None else cpuset.format(cpus)), timeout=timeout)


def follow(record: Record, one_to_one: frozenset[int],
           proc: str = '/proc', run_dir: str = RUN_DIR,
           save: typing.Optional[typing.Callable[[], None]] = None
           ) -> typing.Optional[bool]:
    """Tell the running irqbalance to keep off ``one_to_one`` too.
    True if told now, False if nothing to do, None if there is no
    irqbalance or it could not be told. ``record`` is updated in place."""
    p = find(proc)
    if p is None:
        if record.get('pid'):
            LOG.info('isolation: irqbalance (pid %s) is gone; interrupts '
                     'are kept off the one-to-one CPUs by the agent alone',
                     record['pid'])
            _clear(record)
            if save is not None:
                save()
        return None
    if (record.get('pid'), record.get('start')) != (p.pid, p.start):
        _clear(record)  # a new irqbalance knows nothing of ours
        record.update({'pid': p.pid, 'start': p.start})
    path = socket_path(p.pid, run_dir)
    key = cpuset.format(one_to_one) or '-'
    now = clock()
    if record.get('failed') == key and not _retry_due(record, now):
        return None  # this irqbalance could not be told these CPUs
    if record.get('failed') != key:
        record.pop('retry_at', None)
        record.pop('retries', None)
    try:
        if 'original' not in record:
            record['original'] = cpuset.format(banned(path))
        original = cpuset.parse(record['original'], allow_empty=True)
        wanted = original | one_to_one
        text = cpuset.format(wanted)
        if record.get('told', cpuset.format(original)) == text:
            return False
        record['told'] = text  # before: undo gives irqbalance its choice
        if save is not None:
            save()
        tell(path, wanted if one_to_one else None)
    except (OSError, ValueError) as exc:
        record.pop('told', None)
        record['failed'] = key
        later = ''
        if isinstance(exc, (socket.timeout, TimeoutError)):
            retries = int(record.get('retries', 0))
            wait = min(RETRY_MAX, RETRY_FIRST * 2 ** min(retries, 16))
            record['retry_at'] = round(now + wait, 3)
            record['retries'] = retries + 1
            later = ' (tried again in %d s)' % wait
        else:
            record.pop('retry_at', None)
            record.pop('retries', None)
        if save is not None:
            save()
        LOG.warning('isolation: cannot tell irqbalance (pid %d) to keep '
                    'off CPUs %s through %s: %s; the agent keeps the '
                    'interrupts off them alone%s', p.pid,
                    cpuset.format(one_to_one) or '(none)', path,
                    getattr(exc, 'strerror', None) or exc, later)
        return None
    record.pop('failed', None)
    record.pop('retry_at', None)
    record.pop('retries', None)
    if not one_to_one:
        record.pop('told', None)
    LOG.info('isolation: irqbalance (pid %d) keeps interrupts off CPUs %s',
             p.pid, text or '(none)')
    if save is not None:
        save()
    return True


def _retry_due(record: Record, now: float) -> bool:
    """A failure that timed out is tried again once its time came (or
    at once when the clock went back past its wait)."""
    retry_at = record.get('retry_at')
    if not isinstance(retry_at, (int, float)):
        return False  # refused or no socket: not tried again
    return now >= retry_at or retry_at - now > RETRY_MAX


def restore(record: Record, proc: str = '/proc',
            run_dir: str = RUN_DIR) -> list[str]:
    """Give the recorded irqbalance its own choice back; failures."""
    told = record.get('told')
    p = find(proc)
    if not told or p is None or (p.pid, p.start) != (record.get('pid'),
                                                     record.get('start')):
        _clear(record)  # never told, or it restarted: it forgot
        return []
    try:
        tell(socket_path(p.pid, run_dir), None)
    except OSError as exc:
        return ['irqbalance (pid %d): cannot give it its banned CPUs back: '
                '%s' % (p.pid, exc.strerror or exc)]
    _clear(record)
    return []
