"""Device interrupts kept off one-to-one CPUs.

``follow(record, one_to_one, online, proc, save)`` gives every
interrupt whose affinity can be changed a CPU set without one-to-one
CPUs: its own set minus them, or, when that leaves nothing, every online
CPU minus them (the reserved CPUs and the pool CPUs no one-to-one vCPU
holds). It writes ``/proc/irq/N/smp_affinity_list`` only where that
differs; ``restore(record, proc)`` writes every recorded original back.

``record`` is the ``interrupts`` part of the isolation state
(``Record``)::

    {"moved": {"<irq>": {"original": "0-7", "set": "0-3"}},
     "refused": {"<irq>": "Input/output error"}}

Invariants:

* write-ahead: an interrupt's original set is in the record (``save``)
  before its first write; a write that fails takes its new entry out
  again, so the record never claims a change that was not made;
* an interrupt goes back to its original set as soon as none of its
  original CPUs is one-to-one any more (the node went to node range):
  the record then forgets it. While some are, it gets ``original`` minus
  the one-to-one CPUs again when the set changes; a set someone else
  gave it (irqbalance, an operator) is left alone unless it holds a
  one-to-one CPU (drift, repaired);
* a refused write (a managed interrupt the kernel does not let anyone
  move: EIO; a CPU set the chip cannot take: EINVAL) is logged once per
  pass for all of them in one line, recorded under ``refused`` and not
  tried again until ``undo`` (or until the interrupt is gone);
* an interrupt that disappears is forgotten; nothing else is touched:
  only the numbered directories of /proc/irq;
* reads are bounded (``safefs.read_file``), never through a link.
"""

import errno
import os
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import safefs

LOG = logging.getLogger(__name__)


class Move(typing.TypedDict):
    """One interrupt moved: its own CPU set and the one it was given."""

    original: str
    set: str


class Record(typing.TypedDict, total=False):
    """The ``interrupts`` part of the isolation state, by irq number."""

    moved: dict[str, Move]
    refused: dict[str, str]  # why the kernel refused


SMALL_LIMIT = 65536          # one interrupt's affinity list
INTERRUPTS_LIMIT = 64 << 20  # /proc/interrupts of a very large host


def _write(path: str, value: str) -> None:
    """The only function that changes the host (tests replace it)."""
    with open(path, 'w', encoding='ascii') as f:
        f.write(value)


def _read(path: str, limit: int = SMALL_LIMIT) -> str:
    return safefs.read_file(path, limit, 'interrupt file').decode(
        'ascii', 'replace')


def numbers(proc: str = '/proc') -> list[int]:
    """The interrupt numbers listed in /proc/irq, sorted."""
    try:
        names = os.listdir(os.path.join(proc, 'irq'))
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit() and n.isascii()
                  and len(n) < 8)


def affinity(irq: int, proc: str = '/proc',
             name: str = 'smp_affinity_list'
             ) -> typing.Optional[frozenset[int]]:
    """The CPU set of one interrupt (``smp_affinity_list``, or
    ``effective_affinity_list``); None if it is gone or unreadable."""
    try:
        return cpuset.parse(_read(os.path.join(
            proc, 'irq', str(irq), name)).strip(), allow_empty=True)
    except (OSError, cpuset.CpusetError):
        return None


def target(base: frozenset[int], one_to_one: frozenset[int],
           online: frozenset[int]) -> typing.Optional[frozenset[int]]:
    """Where an interrupt whose set is ``base`` may go: ``base`` without
    the one-to-one CPUs, else every online CPU without them; None if
    there is no such CPU."""
    wanted = (base & online) - one_to_one
    if not wanted:
        wanted = online - one_to_one
    return frozenset(wanted) or None


def _why(exc: OSError) -> str:
    why = exc.strerror or str(exc)
    if exc.errno == errno.EIO:
        why += ' (managed by the kernel, or fixed by its chip)'
    return why


def _plan(record: Record,
          one_to_one: frozenset[int], online: frozenset[int],
          proc: str) -> list[tuple[int, frozenset[int], bool]]:
    """[(irq, new set, entry was new)], the record updated ahead."""
    moved = record.setdefault('moved', {})
    refused = record.setdefault('refused', {})
    present = numbers(proc)
    keys = {str(n) for n in present}
    for table in (moved, refused):
        for key in [k for k in table if k not in keys]:
            del table[key]  # the interrupt was freed
    plan = []
    for irq in present:
        key = str(irq)
        if key in refused:
            continue
        current = affinity(irq, proc)
        if current is None:
            continue
        entry = moved.get(key)
        if entry is None:
            if current & one_to_one:
                new = target(current, one_to_one, online)
                if new is not None:
                    moved[key] = {'original': cpuset.format(current),
                                  'set': cpuset.format(new)}
                    plan.append((irq, new, True))
            continue
        original = cpuset.parse(entry['original'], allow_empty=True)
        if not original & one_to_one:
            # Nothing to keep it off any more: back where it was.
            if current != original:
                plan.append((irq, original, False))
            entry['set'] = entry['original']
            continue
        new = target(original, one_to_one, online)
        ours = current == cpuset.parse(entry['set'], allow_empty=True)
        if new is not None and current != new and (
                ours or current & one_to_one):
            entry['set'] = cpuset.format(new)
            plan.append((irq, new, False))
    return plan


def follow(record: Record,
           one_to_one: frozenset[int], online: frozenset[int],
           proc: str = '/proc',
           save: typing.Optional[typing.Callable[[], None]] = None
           ) -> tuple[int, int]:
    """Keep interrupts off ``one_to_one``; ``(written, refused now)``.
    ``save()`` is called after the record is updated and before any
    write (and again if a write failed)."""
    moved, refused = record.setdefault('moved', {}), \
        record.setdefault('refused', {})
    plan = _plan(record, one_to_one, online, proc)
    if save is not None:
        save()
    written, failed = 0, {}
    for irq, new, fresh in plan:
        key = str(irq)
        try:
            _write(os.path.join(proc, 'irq', key, 'smp_affinity_list'),
                   cpuset.format(new))
            written += 1
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                moved.pop(key, None)  # freed meanwhile
                continue
            failed[key] = _why(exc)
            if fresh:
                del moved[key]
            else:
                now = affinity(irq, proc)
                if now is not None:
                    moved[key]['set'] = cpuset.format(now)
    for key, entry in list(moved.items()):
        if entry['set'] == entry['original'] and key not in failed:
            del moved[key]  # back where it was: nothing to undo
    refused.update(failed)
    if failed:
        LOG.warning('isolation: interrupts %s refused a new CPU set (%s); '
                    'left where they are, not tried again until undo',
                    ','.join(sorted(failed, key=int)),
                    '; '.join(sorted(set(failed.values()))))
    if (failed or plan) and save is not None:
        save()
    return written, len(failed)


def restore(record: Record,
            proc: str = '/proc') -> list[str]:
    """Write every recorded original set back; the failures (a list of
    messages). Restored and vanished interrupts leave the record."""
    failures = []
    moved = record.get('moved', {})
    for key in sorted(moved, key=int):
        path = os.path.join(proc, 'irq', key, 'smp_affinity_list')
        try:
            _write(path, moved[key]['original'])
        except FileNotFoundError:
            pass  # freed: nothing to restore
        except OSError as exc:
            failures.append('interrupt %s: cannot set %s back: %s'
                            % (key, moved[key]['original'], _why(exc)))
            continue
        del moved[key]
    record['refused'] = {}
    return failures


# -- counting: /proc/interrupts --------------------------------------------

def counts(proc: str = '/proc') -> dict[int, dict[int, int]]:
    """``{irq: {cpu: count}}`` of the numbered interrupts; {} if
    /proc/interrupts cannot be read."""
    try:
        text = _read(os.path.join(proc, 'interrupts'), INTERRUPTS_LIMIT)
    except OSError:
        return {}
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = []
    for word in lines[0].split():
        if word.startswith('CPU') and word[3:].isdigit():
            cpus.append(int(word[3:]))
    result = {}
    for line in lines[1:]:
        name, _, rest = line.partition(':')
        name = name.strip()
        if not name.isdigit():
            continue  # NMI, LOC, RES...: per-CPU, never movable
        fields = rest.split()[:len(cpus)]
        if not all(f.isdigit() for f in fields):
            continue
        result[int(name)] = dict(zip(cpus, map(int, fields)))
    return result


def firing_on(before: dict[int, dict[int, int]],
              after: dict[int, dict[int, int]],
              cpus: frozenset[int]) -> dict[int, int]:
    """``{irq: interrupts delivered on ``cpus`` between the two
    readings}``, only those that fired there."""
    result = {}
    for irq, now in after.items():
        then = before.get(irq, {})
        delta = sum(max(0, now.get(c, 0) - then.get(c, 0)) for c in cpus)
        if delta:
            result[irq] = delta
    return result
