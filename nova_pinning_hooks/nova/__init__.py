"""nova-pinning-hooks inside nova-compute.

* ``hooks``: nova's hook mechanism (``nova.hooks``, removed in Nova 22),
  brought back with the same semantics;
* ``hookpoints``: wraps the configured ComputeManager methods with it;
* ``hook``: the ``bind_numa_affinity`` hook, which asks for a pass;
* ``activation``: switching the package on (checks, nova's libvirt
  connection, hook points, driver hooks, then the pass runner); the
  configuration edge here: it reads the records the rest is handed;
* ``passrunner``: the passes inside nova-compute, one ``PassRunner``
  chosen at activation: ``runtime.service``'s ``BindingService`` on a
  thread of nova-compute (``ThreadPasses``), or a worker process under
  eventlet (``WorkerPasses``);
* ``ratiofile``: the overcommit file from nova's configuration and the
  ratio nova reports;
* ``compat``: what the package needs of nova, by capability;
  ``compatprobe``: the same asked of this Python's nova in a child
  process, for ``nova-pinning-status upgrade check``;
* ``notifier``: the switch: an oslo.messaging notification driver that
  nova-compute loads from its configuration, early, and that activates
  the rest;
* ``nodesummary``: the plan's summary in the compute node's stats, for
  nova's scheduler (a hook on its resource tracker's ``_update``);
* ``migration``: live migration and rescue, nova's guest XML without
  our pins; ``earlylog``: log records written before nova set up
  logging, kept until it has;
* ``weigher``: ``OneToOneWeigher``, for nova-scheduler (loaded there by
  class path, not activated: it imports nova's weigher base where nova
  is installed, and is importable without it).

Nothing here imports eventlet or libvirt.

Rule: the top layer, beside ``cmd``: may import every layer below and
``conf``; never ``cmd``.
"""
