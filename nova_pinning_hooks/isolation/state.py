"""The isolation state file: what the agent changed, so ``undo`` can put
it back, even after the agent crashed or the configuration changed.

Content (JSON, version 1)::

    {"version": 1, "mode": "v1" | "systemd", "cpus": "0",
     "v1": {"cpuset_root": ..., "memory_root": ..., "group": "name",
            "created": {"cpuset": true, "memory": false},
            "previous": {"cpuset.cpus": ..., "cpuset.mems": ...}},
     "systemd": {"previous": {"system.slice": {"AllowedCPUs": "", ...}}},
     "moved": {"<pid>": {"comm": "sshd", "start": 1234,
                         "cpuset": "/", "memory": "/",
                         "affinity": {"<tid>": "1"}}}}

Invariants:

* written atomically (temporary file, fsync, rename, directory fsync),
  mode 0600, owned by the agent's user; a file that others could have
  written is refused rather than trusted (undo writes pids to the cgroup
  paths it names);
* entries are written *before* the change they describe (write-ahead), so
  a crash between the two leaves an entry for a change that may not have
  happened; undo checks where each process is before acting on it;
* one agent at a time: ``Lock`` (flock on ``<state_file>.lock``) is held
  by ``apply``, ``watch`` and ``undo``.
"""

import errno
import fcntl
import json
import os
import stat

from nova_pinning_hooks import statefile

VERSION = 1


class StateError(Exception):
    """The state file cannot be trusted or read."""


def _check_path(value, where):
    if not isinstance(value, str) or not value.startswith('/') or \
            '..' in value.split('/'):
        raise StateError('%s: %r is not an absolute cgroup path'
                         % (where, value))


def _validate(state, path):
    if not isinstance(state, dict) or state.get('version') != VERSION:
        raise StateError('%s: not a version %d isolation state'
                         % (path, VERSION))
    if state.get('mode') not in ('v1', 'systemd'):
        raise StateError('%s: unknown mode %r' % (path, state.get('mode')))
    moved = state.setdefault('moved', {})
    if not isinstance(moved, dict):
        raise StateError('%s: "moved" is not a mapping' % path)
    for pid, info in moved.items():
        if not pid.isdigit() or not isinstance(info, dict) or \
                not isinstance(info.get('start'), int):
            raise StateError('%s: bad entry for pid %r' % (path, pid))
        for key in ('cpuset', 'memory'):
            if info.get(key) is not None:
                _check_path(info[key], '%s: pid %s' % (path, pid))
    group = state.get('v1', {}).get('group')
    if group is not None and (not isinstance(group, str) or '/' in group
                              or group in ('', '.', '..')):
        raise StateError('%s: %r is not a cgroup name' % (path, group))
    for key, tail in (('cpuset_root', 'cpuset'), ('memory_root', 'memory')):
        root = state.get('v1', {}).get(key)
        if root is not None and (not os.path.isabs(root) or
                                 os.path.basename(root) != tail):
            raise StateError('%s: %s %r is not a %s hierarchy'
                             % (path, key, root, tail))
    return state


def load(path):
    """The recorded state, or None if there is none; StateError if the
    file is corrupt or could have been written by someone else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError('cannot read %s: %s' % (path, exc)) from None
    with os.fdopen(fd, encoding='utf-8') as f:
        info = os.fstat(f.fileno())
        if info.st_uid != os.geteuid() or \
                info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise StateError('%s is writable by others or not owned by '
                             'this user: not trusted' % path)
        try:
            state = json.load(f)
        except ValueError as exc:
            raise StateError('%s is corrupt: %s' % (path, exc)) from None
    return _validate(state, path)


def save(path, state):
    statefile.write_json(path, state, mode=0o600)


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Lock:
    """An exclusive, non-blocking lock beside the state file."""

    def __init__(self, state_path):
        self.path = state_path + '.lock'
        self.fd = None

    def acquire(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)),
                    mode=0o755, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise StateError('another nova-pinning-isolate holds %s '
                                 '(is the watch service running? stop it '
                                 'first)' % self.path) from None
            raise
        self.fd = fd
        return self

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
