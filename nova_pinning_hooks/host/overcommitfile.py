"""The overcommit file: nova's CPU allocation ratio and CPU sets, on disk.

nova never writes its overcommit ratio anywhere a pass could read it, so
the nova plugin writes it (``nova.ratiofile``, with nova's ratio rule) and
every pass, the isolation agent and the metrics read it (``read``). This
module is the file's format alone, beside ``statefile``.

Invariants:

* ``write`` is atomic: a temporary file in the same directory, fsync'd,
  renamed over the old one; readers see the old file or the new one,
  never half of one. The file is 0644 and a directory made for it 0755,
  whatever the umask; nothing here is world-writable, and a directory
  another user could change is refused (``safefs``).
* A file that does not hold this nova-compute's configuration is never
  used: when nova-compute cannot rewrite it (a full or read-only state
  filesystem) and what is there differs from what it computed, it is
  renamed to ``<file>.stale`` (``set_aside``), ``read`` refuses with a
  message that says so, and nova-compute runs no pass until its write
  succeeds (``nova.ratiofile``).
* ``read`` accepts only a complete, valid file: a missing, unreadable or
  corrupt file, a ratio that is not a number > 0, or a CPU set that does
  not parse raises ``OvercommitError`` with one message naming the file.
  Only a regular file of at most 1 MiB is read, never through a link and
  never blocking on a FIFO (``safefs.read_file``): root's commands read
  this file from the nova user's directory.
* A file on a filesystem that is read-only as a whole (its superblock:
  ext4's ``errors=remount-ro`` after an I/O error, ``mount -o
  remount,ro``) is refused by every reader, nova-compute's passes
  included: nova-compute can neither rewrite it nor set it aside there,
  so nobody can tell whether it still holds nova-compute's configuration
  (issue 40, L-2: nova-compute refused its passes while the root agent,
  ``rebind``, the exporter and the isolation agent used the old CPU
  sets). A read-only mount of a writable filesystem (a reader's
  container given the state directory ``:ro``) is not that: there
  nova-compute still keeps the file.
"""

import os
import typing

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.host import statefile

VERSION = 1


class OvercommitError(Exception):
    """The overcommit file is missing or unusable."""


def to_json(content: hostsettings.HostSettings) -> dict[str, object]:
    """The file's JSON of ``content`` (its ``reserved_cpus`` is not the
    file's)."""
    return {'version': VERSION, 'host': content.host or '',
            'written_at': content.written_at or '',
            'allocation_ratio': content.allocation_ratio,
            'ratio_source': content.ratio_source,
            'shared_cpus': content.shared_cpus,
            'dedicated_cpus': content.dedicated_cpus}


def from_json(data: object, path: str) -> hostsettings.HostSettings:
    """The content of a file of a version this release reads, every
    shape of it (1.0.0's had no host, time or source);
    ``OvercommitError`` naming ``path`` if it is not one."""
    _check(data, path)
    content = typing.cast(dict[str, typing.Any], data)
    return hostsettings.HostSettings(
        allocation_ratio=float(content['allocation_ratio']),
        ratio_source=str(content.get('ratio_source') or ''),
        shared_cpus=content.get('shared_cpus'),
        dedicated_cpus=content.get('dedicated_cpus'),
        written_at=str(content.get('written_at') or ''),
        host=str(content.get('host') or ''))


def write(path: str, content: hostsettings.HostSettings) -> None:
    """Atomically replace ``path`` with ``content`` as JSON; a file set
    aside as stale (``set_aside``) is superseded and removed."""
    data = to_json(content)
    _check(data, path)
    statefile.write_json(path, data)
    try:
        os.unlink(stale_path(path))
    except FileNotFoundError:
        pass


def stale_path(path: str) -> str:
    """Where ``set_aside`` moves a file nova-compute could not rewrite."""
    return path + '.stale'


def matches(path: str, content: hostsettings.HostSettings) -> bool:
    """True if the file at ``path`` holds the ratio and CPU sets of
    ``content`` (what nova-compute computed): a file it could not
    rewrite is still right then. False if it differs or is unusable."""
    try:
        return read(path).binding() == content.binding()
    except OvercommitError:
        return False


def set_aside(path: str) -> bool:
    """Move the file nova-compute could not rewrite out of the passes'
    way (a rename within its directory: it needs no free space) to
    ``stale_path``, where ``read`` finds it and says so. Returns False if
    there was no file; OSError if it could not be moved."""
    try:
        os.replace(path, stale_path(path))
    except FileNotFoundError:
        return False
    return True


def superblock_read_only(mountinfo: str, mount_id: int) -> bool:
    """Whether the mount ``mount_id`` of ``mountinfo`` (the text of
    /proc/self/mountinfo) is of a filesystem read-only as a whole: its
    super options (after the `` - `` separator: type, source, options)
    say ``ro``. A mount not found counts as read-only."""
    for line in mountinfo.splitlines():
        fields = line.split(' ')
        if not fields or fields[0] != str(mount_id):
            continue
        try:
            sep = fields.index('-', 6)
            return 'ro' in fields[sep + 3].split(',')
        except (ValueError, IndexError):
            return True
    return True


def _read_only_filesystem(path: str) -> bool:
    """Whether ``path`` is on a filesystem read-only as a whole (not
    merely mounted read-only here): first ``fstatvfs`` (nothing more is
    read when the mount is writable), then the kernel's mount id of the
    descriptor (/proc/self/fdinfo) and that mount's super options
    (/proc/self/mountinfo). Unknown counts as read-only."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # gone meanwhile: read() said what it read
    try:
        if not os.fstatvfs(fd).f_flag & os.ST_RDONLY:
            return False
        mount_id = None
        with open('/proc/self/fdinfo/%d' % fd, encoding='ascii') as f:
            for line in f:
                if line.startswith('mnt_id:'):
                    mount_id = int(line.split()[1])
        with open('/proc/self/mountinfo', encoding='utf-8',
                  errors='replace') as f:
            mountinfo = f.read(4 << 20)
    except (OSError, ValueError):
        return True
    finally:
        os.close(fd)
    return mount_id is None or superblock_read_only(mountinfo, mount_id)


def read(path: str) -> hostsettings.HostSettings:
    """The validated content of the file (one of the ratio's two
    edges); OvercommitError if unusable."""
    try:
        content = statefile.read_json(path, what='overcommit file')
    except FileNotFoundError:
        if os.path.lexists(stale_path(path)):
            raise OvercommitError(
                'overcommit file %s is stale: nova-compute could not '
                'rewrite it with its configuration and set it aside as %s '
                '(its log says why); passes do not run until nova-compute '
                'writes it' % (path, stale_path(path))) from None
        raise OvercommitError(
            'overcommit file %s does not exist: start nova-compute with '
            'the nova-pinning-hooks plugin enabled, or set [nova_pinning] '
            'allocation_ratio' % path) from None
    except OSError as exc:
        raise OvercommitError('overcommit file %s cannot be read: %s'
                              % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise OvercommitError('overcommit file %s is corrupt: not UTF-8'
                              % path) from None
    except ValueError as exc:
        raise OvercommitError('overcommit file %s is corrupt: %s'
                              % (path, exc)) from None
    record = from_json(content, path)
    if _read_only_filesystem(path):
        raise OvercommitError(
            'overcommit file %s is on a read-only filesystem: nova-compute '
            'cannot rewrite it there, so nothing tells that it still holds '
            'nova-compute\'s configuration; passes do not run until the '
            'filesystem is writable again' % path)
    return record


def _check(content: object, path: str) -> None:
    if not isinstance(content, dict):
        raise OvercommitError('overcommit file %s is corrupt: not a JSON '
                              'object' % path)
    version = content.get('version')
    if type(version) is not int or version != VERSION:  # not true, 1.0
        raise OvercommitError('overcommit file %s has unknown version %.32r'
                              % (path, version))
    ratio = content.get('allocation_ratio')
    if not policy.ratio_ok(ratio):
        raise OvercommitError('overcommit file %s: allocation_ratio must be '
                              'a number > 0 and at most %g, not %.32r'
                              % (path, policy.MAX_RATIO, ratio))
    for key in ('shared_cpus', 'dedicated_cpus'):
        value = content.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise OvercommitError('overcommit file %s: %s must be a CPU set '
                                  'string' % (path, key))
        try:
            cpuset.parse(value)
        except cpuset.CpusetError as exc:
            raise OvercommitError('overcommit file %s: %s: %s'
                                  % (path, key, exc)) from None
