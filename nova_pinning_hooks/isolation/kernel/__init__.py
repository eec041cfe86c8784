"""The kernel's own work, kept off the one-to-one CPUs.

* ``pinmap``: which CPUs are one-to-one now, read from the guests' vCPU
  threads (``host.qemuproc.vcpu_affinity``);
* ``interrupts``: device interrupts' affinity (``/proc/irq``);
* ``workqueue``: the unbound workqueues' CPU mask (``/sys``);
* ``irqbalance``: telling a running irqbalance which CPUs to leave
  alone (its socket).

Rule: ``interrupts``, ``workqueue`` and ``irqbalance`` each follow a
set of one-to-one CPUs, return their part of the isolation state and
restore from it; none keeps a state of its own or knows the others
(``isolation.kernelwork`` holds them together). Imports ``engine``
and ``host`` only: never the isolation agent above it, nor any
higher layer.
"""
