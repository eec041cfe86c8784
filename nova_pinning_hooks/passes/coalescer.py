"""The coalescing of bursts of pass requests into few passes.

Hooks, libvirt's events, vCPU count polls and the periodic safety net all
ask for a pass (``reconciler.Reconciler.run_pass``, or the caller's own
pass function); ``Coalescer`` runs them on one worker thread.

Invariants:

* ``Coalescer.request`` returns at once (unless asked to wait): a burst of
  requests arriving while a pass runs is served by exactly one more pass,
  which starts after the last of them;
* passes run one at a time, on the coalescer's own thread; a pass that
  raises is logged and the worker goes on.
"""

import threading
import time
import typing

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class Coalescer:
    """Collapse bursts of pass requests into few passes on one worker.

    ``request`` bumps a generation counter and wakes the worker; it holds a
    lock for microseconds only. The worker waits ``delay`` seconds so the
    rest of a burst arrives, notes the newest generation, runs one pass and
    marks every generation up to that one served. Requests made while the
    pass runs have a newer generation, so they get exactly one more pass.
    """

    def __init__(self, run_fn: typing.Callable[[], object],
                 delay: float = 0.2,
                 name: str = 'nova-pinning-pass') -> None:
        self._run_fn = run_fn
        self._delay = delay
        self._name = name
        self._cond = threading.Condition()
        self._requested = 0
        self._served = 0
        self._stopped = False
        self._thread: typing.Optional[threading.Thread] = None
        self.passes = 0

    def request(self, reason: str = '', wait: bool = False,
                timeout: typing.Optional[float] = None) -> bool:
        """Ask for a pass. Returns True once queued (or, with ``wait``,
        once served); False if stopped or the wait timed out. Never
        raises."""
        try:
            with self._cond:
                if self._stopped:
                    return False
                self._requested += 1
                generation = self._requested
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._loop, name=self._name, daemon=True)
                    self._thread.start()
                self._cond.notify_all()
                LOG.debug('pass requested (%s), generation %d', reason,
                          generation)
                if not wait:
                    return True
                return self._cond.wait_for(
                    lambda: self._served >= generation or self._stopped,
                    timeout) and self._served >= generation
        except Exception:
            LOG.exception('could not request a rebinding pass')
            return False

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._served < self._requested or self._stopped)
                if self._stopped:
                    return
            if self._delay:
                time.sleep(self._delay)
            with self._cond:
                target = self._requested
            try:
                self._run_fn()
            except Exception:
                LOG.exception('rebinding pass raised')
            with self._cond:
                self._served = target
                self.passes += 1
                self._cond.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
