"""Which host CPUs are one-to-one now: read from the kernel, not a file.

A CPU is *one-to-one* when exactly one vCPU thread of all the running
guests may run on it, and that thread may run on it alone. That is what
a pass's one-to-one binding leaves in the kernel (each vCPU pinned to a
pCPU of its own), and also what nova's own dedicated guests
(``hw:cpu_policy=dedicated``) look like. Node-range and host-range
guests share their CPUs, so their CPUs are never one-to-one.

Why from the kernel: passes run as the nova user inside nova-compute,
as root in ``nova-pinning agent`` or from the CLI; the pins they leave
are the one thing all of them share, and the kernel is where a pin
changed by hand shows too. The isolation agent (root) so trusts no file
another user wrote. The guests are found through libvirt's pid files
(``/run/libvirt/qemu/<name>.pid``, written by libvirtd as root) and
their vCPU threads by name and each one's ``Cpus_allowed_list`` from
/proc (``qemuproc.vcpu_affinity``, the reader passes use too).

Invariants:

* only reads, bounded: pid files and /proc status files through ``safefs``
  (regular files, no link followed, 4 and 16 KiB at most);
* a guest or thread that vanishes while being read is left out; an
  unreadable run directory means no guest (an empty set: nothing is
  kept off any CPU, never more than the pins say);
* ``one_to_one`` is pure and decides from the affinities alone.
"""

import collections
import os
import typing

from nova_pinning_hooks.host import qemuproc

MAX_GUESTS = 100000  # pid files read at most: bounds a pass over the dir


def one_to_one(affinities: typing.Iterable[frozenset[int]]
               ) -> frozenset[int]:
    """The CPUs that one vCPU thread alone may run on.

    ``affinities``: an iterable of frozensets, one per vCPU thread of
    every guest (where the kernel lets it run)."""
    holders: collections.Counter[int] = collections.Counter()
    singles = []
    for cpus in affinities:
        holders.update(cpus)
        if len(cpus) == 1:
            singles.append(next(iter(cpus)))
    return frozenset(c for c in singles if holders[c] == 1)


def vcpu_affinities(run_dir: str,
                    proc: str = '/proc') -> list[frozenset[int]]:
    """Every running guest's vCPU threads' CPU sets (a list)."""
    try:
        names = sorted(n[:-4] for n in os.listdir(run_dir)
                       if n.endswith('.pid'))[:MAX_GUESTS]
    except OSError:
        return []
    result: list[frozenset[int]] = []
    for name in names:
        pid = qemuproc.qemu_pid(name, run_dir)
        if pid is None:
            continue
        result.extend(qemuproc.vcpu_affinity(pid, proc).values())
    return result


def read(run_dir: str, proc: str = '/proc') -> frozenset[int]:
    """The one-to-one CPUs in force on this host."""
    return one_to_one(vcpu_affinities(run_dir, proc))
