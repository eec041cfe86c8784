"""Keeping host processes off the guests' CPUs (``nova-pinning-isolate``).

One capability per module, in three groups.

Host processes, confined to the reserved CPUs:

* ``procfs``: read processes from /proc;
* ``classify``: which processes may be moved, and why not;
* ``cgroupv1`` / ``systemd``: the two backends, same small interface;
  ``systemdbus``: systemd's D-Bus API, where there is no systemctl;
  ``backends``: which of the two a settings' mode uses;
* ``pidwatch``: follow daemon restarts through pid files (inotify).

The kernel's own work, kept off the one-to-one CPUs:

* ``pinmap``: which CPUs are one-to-one now (from the vCPU threads);
* ``interrupts``, ``workqueue``, ``irqbalance`` (``cpumask``: the
  kernel's masks): each part; ``kernelwork``: all three following the
  pin map, restored and reported together.

The agent that holds both:

* ``config``: validate the configuration into ``Settings`` (or refuse);
* ``state``: the state file that makes every change undoable;
* ``isolator``: apply, sweep and the ``watch`` loop;
* ``restore``: ``undo``;
* ``report``: ``status`` (``report.status(conf)`` is what
  ``nova-pinning status`` shows).

Rule: a sibling of ``passes`` above ``host`` (it reads nova's CPU sets
from the overcommit file, ``host.overcommitfile``): imports ``engine``
and ``host``; never ``passes``, ``observe``, ``runtime``, ``nova``,
``cmd``. Beside ``host``, the one layer that
touches /proc and /sys: the host's own processes and their cgroups.
"""


class BackendError(Exception):
    """The cgroup tree or systemd refused a change."""
