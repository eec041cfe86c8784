"""Keeping host processes off the guests' CPUs (``nova-pinning-isolate``).

One capability per module, in two rooms.

This folder: the host's processes, confined to the reserved CPUs, and
the agent that holds everything:

* ``classify``: which processes may be moved, and why not (processes
  read through ``host.procfs``);
* ``cgroupv1`` / ``systemd``: the two backends, same small interface;
  ``systemdbus``: systemd's D-Bus API, where there is no systemctl;
  ``backends``: which of the two a settings' mode uses;
* ``pidwatch``: follow daemon restarts through pid files (inotify);
* ``config``: the configuration edge, ``read(conf)`` into ``Options``
  (the one place here that sees oslo.config), and ``load``, which
  checks ``Options`` into ``Settings`` (or refuses);
* ``state``: the state file that makes every change undoable;
* ``kernelwork``: the kernel's work (below) following the pin map,
  recorded in the state, restored and reported together;
* ``isolator``: apply, sweep and the ``watch`` loop;
* ``restore``: ``undo``;
* ``report``: ``status`` (``report.status(options)`` asks the backend,
  each unit within one bound, for ``nova-pinning-isolate status``;
  ``report.published(options)`` is what the agent published, which the
  metrics, nova-compute and ``nova-pinning status`` show);
* ``statusfile``: the status the agent publishes after every sweep,
  beside its state file (readers never ask systemd).

``kernel/``: the kernel's own work, kept off the one-to-one CPUs, one
part per module, each taking and returning its part of the state
(imports ``engine`` and ``host`` only, never this folder):

* ``pinmap``: which CPUs are one-to-one now (from the vCPU threads);
* ``interrupts``, ``workqueue``, ``irqbalance``.

Rule: a sibling of ``passes`` above ``host`` (it reads nova's CPU sets
from the overcommit file, ``host.overcommitfile``): imports ``engine``
and ``host``; never ``passes``, ``observe``, ``runtime``, ``nova``,
``cmd``. Beside ``host``, the one layer that
touches /proc and /sys: the host's own processes and their cgroups.
"""


class BackendError(Exception):
    """The cgroup tree or systemd refused a change."""


class BackendUnreachable(BackendError):
    """systemd (or its bus) did not answer in time, or the connection
    broke: asking it anything more now would wait as long again."""
