"""Calls with a time bound, for a library that offers none (libvirt).

A libvirt call blocks until the daemon answers; a hung libvirtd would
block it, and the pass that holds the host-wide lock, for ever.
``Worker.call(timeout, func, *args)`` runs ``func`` on the worker's own
daemon thread and waits at most ``timeout`` seconds for it.

Invariants:

* calls run one at a time, in order, on one thread (a libvirt connection
  is used by one thread at a time, as before);
* after a timeout the worker is *retired*: its thread stays with the
  blocked call and ends when (if ever) the call returns; every later
  ``call`` raises ``CallTimeout`` at once, so the owner makes a new
  worker and a new connection. What the blocked call returns is
  discarded; cleanup queued with ``retire`` runs on that thread after it,
  never on the caller's (closing a connection to a hung daemon blocks
  too);
* the thread is a daemon: an abandoned call never keeps a process from
  exiting.
"""

import queue
import threading
import typing

_T = typing.TypeVar('_T')


class CallTimeout(Exception):
    """A call did not return within its time bound."""


class _Job:
    __slots__ = ('func', 'args', 'done', 'result', 'error')
    result: typing.Any  # what ``func`` returned
    error: typing.Optional[BaseException]  # what it raised

    def __init__(self, func: typing.Callable[..., typing.Any],
                 args: tuple[typing.Any, ...]) -> None:
        self.func, self.args = func, args
        self.done = threading.Event()
        self.result = self.error = None


class Worker:

    def __init__(self, name: str = 'timed-call') -> None:
        self._jobs: queue.SimpleQueue[typing.Optional[_Job]] = \
            queue.SimpleQueue()
        self.retired = False
        self._thread = threading.Thread(target=self._loop, name=name,
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job.result = job.func(*job.args)
            except BaseException as exc:  # handed to the caller
                job.error = exc
            job.done.set()

    def call(self, timeout: float, func: typing.Callable[..., _T],
             *args: typing.Any) -> _T:
        if self.retired:
            raise CallTimeout('worker retired after an earlier timeout')
        job = _Job(func, args)
        self._jobs.put(job)
        if not job.done.wait(max(timeout, 0.0)):
            self.retired = True
            raise CallTimeout('%s did not return within %.3g s'
                              % (getattr(func, '__name__', 'call'),
                                 timeout))
        if job.error is not None:
            raise job.error
        result: _T = job.result  # what ``func`` returned
        return result

    def alive(self) -> bool:
        """True while the worker's thread runs: after a timeout, while
        the abandoned call (or the cleanup after it) is still blocked."""
        return self._thread.is_alive()

    def retire(self, cleanup: typing.Optional[
            typing.Callable[[], object]] = None) -> None:
        """Stop after the call in progress, running ``cleanup`` first."""
        self.retired = True
        if cleanup is not None:
            self._jobs.put(_Job(cleanup, ()))
        self._jobs.put(None)
