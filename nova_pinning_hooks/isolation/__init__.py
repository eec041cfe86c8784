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
* ``config``: validate the configuration into ``Settings`` (or refuse);
* ``state``: the state file that makes every change undoable;
* ``kernelwork``: the kernel's work (below) following the pin map,
  recorded in the state, restored and reported together;
* ``isolator``: apply, sweep and the ``watch`` loop;
* ``restore``: ``undo``;
* ``report``: ``status`` (``report.status(conf)`` is what
  ``nova-pinning status`` shows).

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
