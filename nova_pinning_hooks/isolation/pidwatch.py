"""Following daemon restarts through their pid files, with inotify.

/proc cannot be watched with inotify, but daemons record their pid in
files under /run (or /var/run), directly or one directory down
(/run/sshd.pid, /run/libvirt/libvirtd.pid). ``PidWatcher`` watches those
directories and reports the pids named by files that were written in
place (IN_CLOSE_WRITE), renamed into place (IN_MOVED_TO) or created.

``pid_of_file`` checks that the pid still belongs to the process the file
named: a process that started after the file was last written cannot be
the one it names (the pid was reused), and is not reported.
"""

import ctypes
import ctypes.util
import errno
import os
import select
import struct

from nova_pinning_hooks.isolation import procfs

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
EVENT = struct.Struct('iIII')
START_SLACK = 2.0  # seconds: clock granularity between mtime and start


class WatchError(OSError):
    pass


def pid_of_file(path, proc='/proc'):
    """The pid a pid file names, if that process is alive and is the one
    the file was written for; else None."""
    try:
        with open(path, encoding='ascii', errors='replace') as f:
            text = f.read(64).strip()
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    if not text.isdigit():
        return None
    p = procfs.read(int(text), proc)
    if p is None:
        return None
    try:
        if procfs.started_at(p, proc) > mtime + START_SLACK:
            return None  # pid reused by a younger process
    except OSError:
        return None
    return p.pid


class PidWatcher:
    """inotify on the pid-file directories and their subdirectories."""

    def __init__(self, directories, proc='/proc'):
        self.proc = proc
        libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise WatchError(ctypes.get_errno(), 'inotify_init1 failed')
        self.dirs = {}  # watch descriptor -> directory
        for directory in directories:
            self.watch(directory)
            try:
                for entry in os.scandir(directory):
                    if entry.is_dir(follow_symlinks=False):
                        self.watch(entry.path)
            except OSError:
                continue

    def watch(self, directory):
        wd = self._add(self.fd, os.fsencode(directory), MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                return None
            raise WatchError(err, 'cannot watch %s' % directory)
        self.dirs[wd] = directory
        return wd

    def pid_files(self):
        """Every *.pid file now in the watched directories."""
        found = []
        for directory in self.dirs.values():
            try:
                found += [e.path for e in os.scandir(directory)
                          if e.name.endswith('.pid') and e.is_file()]
            except OSError:
                continue
        return found

    def wait(self, timeout):
        """Pids named by pid files written in the next ``timeout`` s."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        paths, offset = [], 0
        while offset + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            offset += EVENT.size
            name = data[offset:offset + length].rstrip(b'\0').decode(
                'utf-8', 'replace')
            offset += length
            directory = self.dirs.get(wd)
            if directory is None or not name:
                continue
            path = os.path.join(directory, name)
            if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                self.watch(path)  # /run/<daemon>/ made after we started
            elif name.endswith('.pid') and not mask & IN_DELETE:
                paths.append(path)
        pids = []
        for path in dict.fromkeys(paths):
            pid = pid_of_file(path, self.proc)
            if pid is not None:
                pids.append(pid)
        return pids

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
