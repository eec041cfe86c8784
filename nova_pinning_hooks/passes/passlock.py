"""The host-wide pass lock: one rebinding pass at a time on a host.

Passes run in nova-compute (as the nova user), from the CLI and from the
agent (as root). They share one lock, and it must never become a way for
one of them to lock the other out or to steer the other's writes.

The lock is an ``flock`` on the lock *directory* itself, opened read-only
with ``O_NOFOLLOW | O_DIRECTORY``: nothing is created, written or chmod'ed
to take it, so there is no lock file whose owner or mode could lock the
other user out, and no path a planted link could redirect a write through.

Invariants:

* every holder opens the directory afresh, so two holders in one process
  exclude each other as two processes do (flock belongs to the open file
  description);
* waiting is bounded: ``acquire(timeout)`` gives up with ``LockTimeout``
  after ``timeout`` seconds; the holder's own time is bounded by the pass
  deadline (``reconciler``), so a waiter never waits for ever;
* a missing directory is made only through ``safefs.open_dir`` (every
  component trusted, mode 0755 whatever the umask).
"""

import errno
import fcntl
import os
import time
import typing

from nova_pinning_hooks.host import safefs

POLL = 0.05


class LockTimeout(Exception):
    """The lock was not free within the time allowed."""


class PassLock:

    def __init__(self, directory: str, timeout: float) -> None:
        self.directory = directory
        self.timeout = timeout
        self.fd: typing.Optional[int] = None

    def _open(self) -> int:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(self.directory, flags)
        except FileNotFoundError:
            os.close(safefs.open_dir(self.directory, create=True))
            return os.open(self.directory, flags)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise safefs.UnsafeFileError(
                    exc.errno, 'lock directory %s is not a directory (or '
                    'is a link)' % self.directory) from None
            raise

    def acquire(self) -> 'PassLock':
        fd = self._open()
        end = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= end:
                        raise LockTimeout(
                            'another pass held the lock on %s for more '
                            'than %g s' % (self.directory, self.timeout)
                        ) from None
                    time.sleep(POLL)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return self

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)  # closing the description drops the flock

    def __enter__(self) -> 'PassLock':
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
