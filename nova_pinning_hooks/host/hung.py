"""One abandoned libvirt call per daemon: fail fast while it hangs.

A libvirt call that overran its time bound is left blocked on its own
thread, with its connection (``timedcall``): nothing can interrupt it.
Before this module every later pass or scrape opened a new connection on
a new thread, and each of those blocked too: against a daemon that
accepts and never answers, 21 scrapes left 42 threads and 40 sockets,
and the agent grew by a thread and two descriptors a second.

Invariants:

* process-wide and keyed by the connection URI, because the exporter and
  the commands make a new ``virt.Host`` per scrape or pass;
* at most one abandoned call per URI: while it is still blocked,
  ``check`` raises at once, so no new thread and no new connection are
  made for that daemon;
* an entry lives only while its worker's thread does: once the blocked
  call returns (the daemon answers again, or its socket closes) and the
  worker has closed its connection, the next ``check`` forgets it, and
  calls go to the daemon again. Nothing has to be reset by hand.
"""

import threading
import time

from nova_pinning_hooks.host import timedcall

_lock = threading.Lock()
# uri -> (timedcall.Worker, monotonic time it was abandoned)
_hung: dict[str, tuple[timedcall.Worker, float]] = {}


class DoesNotAnswer(Exception):
    """A call to this daemon is still blocked: do not make another."""


def check(uri: str) -> None:
    """Raise ``DoesNotAnswer`` while a call to ``uri`` is blocked."""
    with _lock:
        entry = _hung.get(uri)
        if entry is None:
            return
        worker, since = entry
        if not worker.alive():
            del _hung[uri]
            return
    raise DoesNotAnswer('libvirtd does not answer on %s: a call has been '
                        'blocked for %.0f s' % (uri,
                                                time.monotonic() - since))


def abandoned(uri: str, worker: timedcall.Worker) -> None:
    """``worker`` was left with a blocked call to ``uri``."""
    with _lock:
        _hung[uri] = (worker, time.monotonic())


def forget(uri: str) -> None:
    """Forget an abandoned call to ``uri`` (tests: a new fake daemon)."""
    with _lock:
        _hung.pop(uri, None)
