"""nova-pinning-hooks: re-bind the vCPUs of a compute node's live guests.

Layout (one capability a module): ``cpuset``, ``topology``, ``guest``,
``policy``, ``assign`` and ``plan`` are the pure engine (no I/O);
``virt`` is the only module that imports libvirt; ``reconciler`` runs a
pass (read, plan, diff, apply); ``nova`` plugs it into nova-compute;
``isolation`` keeps host processes off the guests' CPUs.
"""
