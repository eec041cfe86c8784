"""Following daemon restarts through their pid files, with inotify.

/proc cannot be watched with inotify, but daemons record their pid in
files under /run (or /var/run), directly or one directory down
(/run/sshd.pid, /run/libvirt/libvirtd.pid). ``PidWatcher`` watches those
directories and their subdirectories (also ones made later) for pid files
written in place (IN_CLOSE_WRITE), renamed into place (IN_MOVED_TO),
created (IN_CREATE) or deleted (IN_DELETE), through libc's inotify by
ctypes (no third-party dependency).

``identity_of_file`` checks that the pid still belongs to the process the
file named: a process that started after the file was last written
cannot be the one it names (the daemon died without removing its file
and the pid was reused). The watcher reports ``procfs.Proc`` identities
(pid + start time), so that whoever acts on them later can check the pid
was not reused meanwhile (``procfs.same``).
"""

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import typing

from oslo_log import log as logging

from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.host import safefs

LOG = logging.getLogger(__name__)

IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
EVENT = struct.Struct('iIII')
# A pid file's mtime and a process's start time come from different
# clocks (wall clock vs ticks after boot); allow this much disagreement.
START_SLACK = 2.0
SUFFIX = '.pid'


class WatchError(OSError):
    pass


def read_pid(path: str) -> typing.Optional[int]:
    """The pid on the first line of a pid file, or None.

    Pid files live in world-writable places (/run/lock): only a regular
    file is read, without following a link, never blocking (a FIFO named
    ``x.pid`` would otherwise hang the agent), at most 64 bytes."""
    try:
        data = safefs.read_file(path, safefs.PIDFILE_LIMIT, 'pid file')
    except OSError:
        return None
    first = data.split(b'\n', 1)[0].strip()
    if not (first.isdigit() and first.isascii()) or len(first) > 10:
        return None
    pid = int(first)
    return pid if pid > 1 else None


def identity_of_file(path: str,
                     proc: str = '/proc') -> typing.Optional[procfs.Proc]:
    """The process a pid file names (``procfs.Proc``), if it is alive and
    is the one the file was written for; else None."""
    pid = read_pid(path)
    if pid is None:
        return None
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    p = procfs.read(pid, proc)
    if p is None:
        return None
    try:
        if procfs.started_at(p, proc) > mtime + START_SLACK:
            LOG.debug('isolation: %s names pid %d, reused by a younger '
                      'process %s', path, pid, p.comm)
            return None
    except OSError:
        return None
    return p


class _Libc:
    """inotify_init1 and inotify_add_watch from libc."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6',
                           use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes = (ctypes.c_int,)
        self.add = libc.inotify_add_watch
        self.add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)


class PidWatcher:
    """inotify on the pid-file directories and one level below them.

    ``wait(timeout)`` returns the identities named by pid files that
    appeared or changed; ``files`` maps each pid file seen to the
    identity last read from it (deleted files are forgotten).
    ``overflowed`` is set when the kernel dropped events: the caller
    should rescan (``rescan``).
    """

    def __init__(self, directories: typing.Iterable[str],
                 proc: str = '/proc') -> None:
        self.proc = proc
        self._libc = _Libc()
        self.fd: int = self._libc.init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise WatchError(ctypes.get_errno(), 'inotify_init1 failed')
        # watch descriptor -> (directory, depth)
        self.dirs: dict[int, tuple[str, int]] = {}
        # pid file -> procfs.Proc last read from it
        self.files: dict[str, procfs.Proc] = {}
        self.overflowed = False
        for directory in dict.fromkeys(os.path.realpath(d)
                                       for d in directories):
            self._watch_tree(directory, 0)

    def _watch_tree(self, directory: str, depth: int) -> None:
        if self.watch(directory, depth) is None or depth:
            return
        try:
            subdirs = [e.path for e in os.scandir(directory)
                       if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for sub in subdirs:
            self.watch(sub, depth + 1)

    def watch(self, directory: str, depth: int = 0) -> typing.Optional[int]:
        wd: int = self._libc.add(self.fd, os.fsencode(directory), MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                LOG.debug('isolation: not watching %s: %s', directory,
                          os.strerror(err))
                return None
            raise WatchError(err, 'cannot watch %s' % directory)
        self.dirs[wd] = (directory, depth)
        return wd

    def pid_files(self) -> list[str]:
        """Every pid file now in the watched directories."""
        found: list[str] = []
        for directory, _ in list(self.dirs.values()):
            try:
                found += [e.path for e in os.scandir(directory)
                          if e.name.endswith(SUFFIX) and
                          e.is_file(follow_symlinks=False)]
            except OSError:
                continue
        return sorted(found)

    def rescan(self) -> list[procfs.Proc]:
        """Identities of every pid file now present (after an overflow)."""
        self.overflowed = False
        return self._identities(self.pid_files())

    def _events(self, data: bytes
                ) -> typing.Iterator[tuple[int, int, str]]:
        offset = 0
        while offset + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            offset += EVENT.size
            name = data[offset:offset + length].rstrip(b'\0')
            offset += length
            yield wd, mask, os.fsdecode(name)

    def wait(self, timeout: typing.Optional[float]) -> list[procfs.Proc]:
        """Identities named by pid files written in the next ``timeout``
        seconds (at most one batch of events)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        changed: list[str] = []
        for wd, mask, name in self._events(data):
            if mask & IN_Q_OVERFLOW:
                LOG.warning('isolation: inotify queue overflowed; '
                            'rescanning pid files')
                self.overflowed = True
                continue
            if mask & IN_IGNORED:
                self.dirs.pop(wd, None)  # the directory was removed
                continue
            directory, depth = self.dirs.get(wd, (None, None))
            if directory is None or not name:
                continue
            path = os.path.join(directory, name)
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO) and depth == 0:
                    self._watch_tree(path, 1)  # /run/<daemon>/ made now
                    changed += self.pid_files_in(path)
            elif name.endswith(SUFFIX):
                if mask & IN_DELETE:
                    self.files.pop(path, None)
                else:
                    changed.append(path)
        if self.overflowed:
            return self.rescan()
        return self._identities(dict.fromkeys(changed))

    def pid_files_in(self, directory: str) -> list[str]:
        try:
            return [e.path for e in os.scandir(directory)
                    if e.name.endswith(SUFFIX)]
        except OSError:
            return []

    def _identities(self, paths: typing.Iterable[str]
                    ) -> list[procfs.Proc]:
        found: list[procfs.Proc] = []
        for path in paths:
            p = identity_of_file(path, self.proc)
            if p is None:
                continue
            known = self.files.get(path)
            # A file re-written for the same process is not reported twice.
            if known is None or (known.pid, known.start) != (p.pid,
                                                              p.start):
                found.append(p)
            self.files[path] = p
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
