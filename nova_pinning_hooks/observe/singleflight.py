"""One call in flight, its result shared by everyone who asks meanwhile.

``SingleFlight().do(fn)`` runs ``fn`` unless a call of it is already in
flight; then it waits for that call and returns its result (or raises its
exception). The endpoint's scrapes use it (``metrics.LiveCollector``):
concurrent scrapes end together after one read of the host, instead of
queuing behind a lock, one read each.

Invariants:

* at most one call of ``fn`` runs at a time, and its caller runs it (no
  thread of its own);
* a caller that joins a call in flight gets that call's result: read at
  most one call's time before it asked, never older;
* a joining caller waits at most ``wait`` seconds (``TimeoutError``); the
  call itself is bounded by what ``fn`` does (the metrics' reads are).
"""

import threading
import typing

T = typing.TypeVar('T')

WAIT = 300.0  # seconds a joining caller waits for the call in flight


class _Call(typing.Generic[T]):

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: typing.Optional[T] = None
        self.error: typing.Optional[BaseException] = None


class SingleFlight(typing.Generic[T]):

    def __init__(self, wait: float = WAIT) -> None:
        self.wait = wait
        self._lock = threading.Lock()
        self._call: typing.Optional[_Call[T]] = None
        self.calls = 0   # calls of fn made
        self.shared = 0  # callers that took a call in flight's result

    def do(self, fn: typing.Callable[[], T]) -> T:
        with self._lock:
            call = self._call
            leader = call is None
            if call is None:
                call = self._call = _Call()
                self.calls += 1
            else:
                self.shared += 1
        if leader:
            try:
                call.result = fn()
            except BaseException as exc:
                call.error = exc
            finally:
                with self._lock:
                    self._call = None
                call.done.set()
        elif not call.done.wait(self.wait):
            raise TimeoutError('the read in flight did not end within '
                               '%g s' % self.wait)
        if call.error is not None:
            raise call.error
        return typing.cast(T, call.result)
