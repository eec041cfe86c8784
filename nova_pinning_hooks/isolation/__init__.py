"""Keeping host processes off the guests' CPUs (``nova-pinning-isolate``).

One capability per module:

* ``config``: validate the configuration into ``Settings`` (or refuse);
* ``procfs``: read processes from /proc;
* ``classify``: which processes may be moved, and why not;
* ``cgroupv1`` / ``systemd``: the two backends, same small interface;
* ``systemdbus``: systemd's D-Bus API, where there is no systemctl;
* ``pidwatch``: follow daemon restarts through pid files (inotify);
* ``state``: the state file that makes every change undoable;
* ``backends``: which of the two a settings' mode uses;
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
