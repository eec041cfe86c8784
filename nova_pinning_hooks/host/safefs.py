"""How the package touches files: safely as root, boundedly always.

The CLI and the isolation agent run as root; nova-compute runs the same
code as the nova user; both meet in the state directories. Every file the
package reads or writes goes through this module.

Invariants:

* Reading (``read_file``): only a regular file, opened with
  ``O_NOFOLLOW | O_NONBLOCK`` (a link, a FIFO or a device is refused before
  a byte is read, and opening a FIFO never blocks), at most ``limit``
  bytes (a larger file is refused, never read whole).
* Writing (``write_atomic``): the directory is reached by ``open_dir``,
  one component at a time with ``O_NOFOLLOW | O_DIRECTORY`` from ``/``;
  for root, every component must be owned by root and writable by nobody
  else (a world-writable directory counts only with the sticky bit, as
  ``/tmp``); other users write wherever the kernel lets them. Then
  everything happens relative to that directory's descriptor: the
  temporary file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, given
  its mode with ``fchmod`` on the descriptor (never by path, never
  through the umask), fsync'd, renamed over the old file and the
  directory fsync'd. So a less-privileged user
  can neither redirect a write nor make root change another file.
* Directories this module creates get their mode by ``fchmod`` too: the
  umask never makes anything group- or world-writable.
* Every failure is ``UnsafeFileError`` (an ``OSError``) with one message
  naming the path.
"""

import errno
import os
import secrets
import stat
import typing

# Limits for the package's own small files; callers may pass others.
STATE_LIMIT = 1 << 20        # overcommit file, isolation state
PIDFILE_LIMIT = 4096
DIR_MODE = 0o755


class UnsafeFileError(OSError):
    """A file or directory that cannot be used safely."""


def _error(path: str, why: str,
           err: typing.Optional[int] = errno.EPERM) -> UnsafeFileError:
    return UnsafeFileError(err, '%s: %s' % (path, why))


def _trusted(st: os.stat_result, uid: int) -> bool:
    """A directory only root or ``uid`` can change (sticky root-owned
    world-writable directories such as /tmp included). The rule protects
    root: a less-privileged writer (nova-compute) writes wherever the
    kernel lets it, such as a node_exporter textfile directory its group
    may write, since nobody can make it act beyond its own rights."""
    if uid != 0:
        return True
    if st.st_uid not in (0, uid):
        return False
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return bool(st.st_mode & stat.S_ISVTX) and st.st_uid == 0
    return True


def open_dir(path: str, create: bool = False, mode: int = DIR_MODE) -> int:
    """A descriptor of directory ``path``, reached without following a
    link and through directories only root or this user controls.

    ``create``: make missing components (mode ``mode``, set by fchmod).
    Raises ``UnsafeFileError``."""
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    uid = os.geteuid()
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open('/', flags)
    walked = '/'
    try:
        for part in [p for p in path.split('/') if p and p != '.']:
            if part == '..':
                raise _error(path, 'must not contain ".."')
            walked = os.path.join(walked, part)
            try:
                nfd = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise _error(walked, 'no such directory',
                                 errno.ENOENT) from None
                try:
                    os.mkdir(part, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: checked below like any other
                nfd = os.open(part, flags, dir_fd=fd)
                st = os.fstat(nfd)
                if st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o700:
                    os.fchmod(nfd, mode)
            except OSError as exc:
                if isinstance(exc, UnsafeFileError):
                    raise
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _error(walked, 'not a directory (or a link)',
                                 exc.errno) from None
                raise _error(walked, exc.strerror or str(exc),
                             exc.errno) from None
            os.close(fd)
            fd = nfd
            if not _trusted(os.fstat(fd), uid):
                raise _error(walked, 'writable by a user other than root '
                             'or uid %d: not used' % uid)
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_atomic(path: str, data: bytes, mode: int = 0o644,
                 create_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` (bytes) atomically; see above."""
    directory, name = os.path.split(os.path.abspath(path))
    dfd = open_dir(directory, create=create_dir)
    try:
        tmp = '.%s.%s.tmp' % (name, secrets.token_hex(6))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            try:
                os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass  # already renamed
            raise
        os.fsync(dfd)
    finally:
        os.close(dfd)


def remove_stale_temporaries(path: str) -> int:
    """Remove temporary files a crashed ``write_atomic`` of ``path`` left
    (only ours: ``.<name>.<hex>.tmp`` regular files). Returns how many."""
    directory, name = os.path.split(os.path.abspath(path))
    try:
        dfd = open_dir(directory)
    except UnsafeFileError:
        return 0
    removed = 0
    try:
        prefix = '.%s.' % name
        for entry in os.listdir(dfd):
            if not (entry.startswith(prefix) and entry.endswith('.tmp')):
                continue
            try:
                st = os.stat(entry, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                    os.unlink(entry, dir_fd=dfd)
                    removed += 1
            except OSError:
                continue
    finally:
        os.close(dfd)
    return removed


def read_file(path: str, limit: int, what: str = 'file',
              private: bool = False, root_written: bool = False) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit``).

    ``private``: the file must also be owned by this user and writable by
    nobody else (a file root acts on, such as the isolation state).
    ``root_written``: owned by root (or this user) and writable by nobody
    else (a file root writes for other users to read, such as the
    isolation agent's status).
    Raises ``FileNotFoundError`` if it does not exist and
    ``UnsafeFileError`` if it is a link, not a regular file, too large,
    not private enough or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     os.O_CLOEXEC | getattr(os, 'O_NOCTTY', 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _error(path, '%s is a symbolic link: not followed'
                         % what, exc.errno) from None
        raise _error(path, exc.strerror or str(exc), exc.errno) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _error(path, '%s is not a regular file' % what)
        if private and (st.st_uid != os.geteuid() or
                        st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            raise _error(path, '%s is writable by others or not owned by '
                         'this user: not trusted' % what)
        if root_written and (st.st_uid not in (0, os.geteuid()) or
                             st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            raise _error(path, '%s is writable by others or not owned by '
                         'root: not trusted' % what)
        if st.st_size > limit:
            raise _error(path, '%s is larger than %d bytes' % (what, limit),
                         errno.EFBIG)
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(65536, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise _error(path, '%s is larger than %d bytes'
                             % (what, limit), errno.EFBIG)
        return b''.join(chunks)
    finally:
        os.close(fd)


def read_stream(stream: typing.BinaryIO, limit: int,
                what: str = 'input') -> bytes:
    """At most ``limit`` bytes of a binary stream (standard input)."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFileError(errno.EFBIG, '%s is larger than %d bytes'
                              % (what, limit))
    return data


def check_readable_config(path: str, limit: int) -> None:
    """Refuse a configuration file that is not a regular file of at most
    ``limit`` bytes, before oslo.config opens it (it follows links, as
    operators expect of /etc, and would block on a FIFO or read a device
    or a huge file whole). Only looked at, never opened here."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _error(path, exc.strerror or str(exc), exc.errno) from None
    if not stat.S_ISREG(st.st_mode):
        raise _error(path, 'configuration file is not a regular file')
    if st.st_size > limit:
        raise _error(path, 'configuration file is larger than %d bytes'
                     % limit, errno.EFBIG)
