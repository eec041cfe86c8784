"""Unbound workqueues kept off one-to-one CPUs.

The kernel runs the work items of unbound workqueues (writeback, crypto,
many drivers' deferred work) on ``/sys/devices/virtual/workqueue/cpumask``,
every CPU by default; a workqueue exported in sysfs can be narrowed by
its own ``cpumask`` but never beyond that global mask. ``follow`` sets
the global mask to its original CPUs minus the one-to-one CPUs (every
online CPU minus them when that leaves none), ``restore`` writes the
original back. Per-CPU (bound) work, kernel threads, timers and RCU
callbacks cannot be moved at run time: see
doc/source/reference/isolation-design.rst.

``record`` is the ``workqueue`` part of the isolation state
(``Record``): ``{"original": "000000ff", "set": "0000000f"}`` (kernel
hex masks).

Invariants:

* write-ahead: the original mask is recorded (``save``) before the first
  write; a rejected write (EINVAL: a mask the kernel will not take) takes
  that record out again, is logged in one line and is not tried again
  for the same one-to-one CPUs;
* the mask goes back to the original as soon as no original CPU is
  one-to-one, and the record is then dropped;
* a kernel without the file (older than 4.6, or no sysfs) is left alone.
"""

import errno
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.isolation.kernel import interrupts

LOG = logging.getLogger(__name__)


class Record(typing.TypedDict, total=False):
    """The ``workqueue`` part of the isolation state."""

    original: str  # the mask before the first write
    set: str  # the mask written
    refused: list[int]  # the one-to-one CPUs the kernel refused a mask for


def _clear(record: Record) -> None:
    # Every key of the record is optional (TypedDict has no clear()).
    typing.cast(dict[str, object], record).clear()


PATH = '/sys/devices/virtual/workqueue/cpumask'


def _write(path: str, value: str) -> None:
    """The only function that changes the host (tests replace it)."""
    with open(path, 'w', encoding='ascii') as f:
        f.write(value)


def read(path: str = PATH) -> typing.Optional[frozenset[int]]:
    """The mask now, as a set; None if there is none or it is unreadable."""
    try:
        return cpumask.parse(safefs.read_file(
            path, 4096, 'workqueue mask').decode('ascii', 'replace'))
    except (OSError, cpuset.CpusetError):
        return None


def follow(record: Record, one_to_one: frozenset[int],
           online: frozenset[int], path: str = PATH,
           save: typing.Optional[typing.Callable[[], None]] = None
           ) -> typing.Optional[bool]:
    """Keep unbound work off ``one_to_one``. Returns True if it wrote,
    False if nothing needed writing, None if the kernel refused (or has
    no mask). ``record`` is updated in place."""
    current = read(path)
    if current is None:
        return None
    if record.get('refused') == sorted(one_to_one):
        return None  # refused for these very CPUs: not every pass
    record.pop('refused', None)
    original = cpumask.parse(record['original']) if 'original' in record \
        else current
    new: typing.Optional[frozenset[int]]
    if not original & one_to_one:
        new = original
    else:
        new = interrupts.target(original, one_to_one, online)
        if new is None:
            return None
    if new == current:
        if new == original:
            _clear(record)
        return False
    fresh = 'original' not in record
    record.update({'original': cpumask.format(original),
                   'set': cpumask.format(new)})
    if save is not None:
        save()
    try:
        _write(path, cpumask.format(new))
    except OSError as exc:
        if fresh:
            _clear(record)
        else:
            record['set'] = cpumask.format(current)
        record['refused'] = sorted(one_to_one)
        LOG.warning('isolation: the kernel refused workqueue mask %s (CPUs '
                    '%s) in %s: %s; unbound work stays on CPUs %s',
                    cpumask.format(new), cpuset.format(new), path,
                    exc.strerror or exc, cpuset.format(current))
        if save is not None:
            save()
        return None
    if new == original:
        _clear(record)
        if save is not None:
            save()
    return True


def restore(record: Record, path: str = PATH) -> list[str]:
    """Write the original mask back; the failures (a list)."""
    if 'original' not in record:
        _clear(record)
        return []
    try:
        _write(path, record['original'])
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            _clear(record)
            return []
        return ['workqueue mask: cannot set %s back in %s: %s'
                % (record['original'], path, exc.strerror or exc)]
    _clear(record)
    return []
