"""nova-pinning-hooks inside nova-compute.

* ``hooks``: nova's hook mechanism (``nova.hooks``, removed in Nova 22),
  brought back with the same semantics;
* ``hookpoints``: wraps the configured ComputeManager methods with it;
* ``hook``: the ``bind_numa_affinity`` hook, which asks for a pass;
* ``agent``: the in-process runtime (overcommit file, coalescer, passes,
  periodic safety net);
* ``notifier``: the switch: an oslo.messaging notification driver that
  nova-compute loads from its configuration, early, and that activates
  the rest.

Nothing here imports eventlet or libvirt.

Rule: the top layer, beside ``cmd``: may import every layer below and
``conf``; never ``cmd``.
"""
