"""The isolation state file: what the agent changed, so ``undo`` can put
it back, even after the agent crashed or the configuration changed.

Content (JSON, version 1; ``State``, read by ``from_json`` and written by
``to_json``)::

    {"version": 1, "mode": "v1" | "systemd", "cpus": "0",
     "boot_id": "<the kernel's boot id when it was applied>",
     "v1": {"cpuset_root": ..., "memory_root": ..., "group": "name",
            "created": {"cpuset": true, "memory": false},
            "previous": {"cpuset.cpus": ..., "cpuset.mems": ...}},
     "systemd": {"previous": {"system.slice": {"AllowedCPUs": "", ...}}},
     "moved": {"<pid>": {"comm": "sshd", "start": 1234,
                         "cpuset": "/", "memory": "/",
                         "affinity": {"<tid>": "1"}}},
     "one_to_one": "4-5",
     "interrupts": {"moved": {"<irq>": {"original": "0-7", "set": "0-3"}},
                    "refused": {"<irq>": "Input/output error"}},
     "workqueue": {"original": "000000ff", "set": "0000000f"},
     "irqbalance": {"pid": 812, "start": 99, "original": "",
                    "told": "4-5"},
     "irqbalance_retry": {"retry_at": 1764150030.0, "retries": 1}}

(``irqbalance_retry`` only while irqbalance did not answer in time; the
agent holds it in the ``irqbalance`` record: ``RETRY_KEY``.)

Invariants:

* written atomically (``safefs.write_atomic``: no link followed, mode
  0600 set on the descriptor, a directory others could change refused),
  owned by the agent's user; a file that others could have written, a
  link, a FIFO or a file over 1 MiB is refused rather than trusted or
  waited on (undo writes pids to the cgroup paths it names);
* every field is checked for its type before anything acts on it: a file
  that parses but lacks a key or has a wrong type is ``StateError``
  (``undo`` sets it aside), never a crash half-way through an undo;
* temporary files that a crash left beside it are removed on the next
  save, under the lock;
* entries are written *before* the change they describe (write-ahead), so
  a crash between the two leaves an entry for a change that may not have
  happened; undo checks where each process is before acting on it;
* one agent at a time: ``Lock`` (flock on ``<state_file>.lock``) is held
  by ``apply``, ``watch`` and ``undo``;
* nothing the agent changes survives a reboot (runtime unit properties,
  cgroupfs, processes), but the state file does: a state whose
  ``boot_id`` is not the running kernel's describes nothing in force
  (``from_earlier_boot``). States without a boot id (written before it
  was recorded) are taken as this boot's.
"""

import errno
import fcntl
import os
import stat
import typing

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import names
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.isolation.kernel import interrupts
from nova_pinning_hooks.isolation.kernel import irqbalance
from nova_pinning_hooks.isolation.kernel import workqueue

VERSION = 1
# Every version ``from_json`` reads (tests/unit/isolation/test_state.py
# reads one of each).
VERSIONS = (1,)


class CgroupMode(names.Name):
    """``[nova_pinning_isolation] cgroup_mode``; a state records the mode
    ``AUTO`` resolved to (``RECORDED``)."""
    AUTO = 'auto'
    SYSTEMD = 'systemd'
    V1 = 'v1'


RECORDED = (CgroupMode.V1, CgroupMode.SYSTEMD)
BOOT_ID_LIMIT = 64


class V1Record(typing.TypedDict, total=False):
    """The cgroup v1 backend's group, and what was there before it."""

    cpuset_root: str
    memory_root: str
    group: str
    created: dict[str, typing.Optional[bool]]  # by controller
    previous: dict[str, str]  # by cgroup file


class SystemdRecord(typing.TypedDict, total=False):
    """The systemd backend's slices, and their properties before."""

    slices: list[str]
    previous: dict[str, dict[str, str]]  # unit -> property -> value


BackendRecord = typing.Union[V1Record, SystemdRecord]


class Moved(typing.TypedDict, total=False):
    """A process moved into the host group (cgroup v1), and from where."""

    comm: str
    start: int  # with the pid, which process it is
    cpuset: typing.Optional[str]
    memory: typing.Optional[str]
    affinity: dict[str, str]  # thread -> its CPU list before


class State(typing.TypedDict, total=False):
    """The file's content (the module's docstring)."""

    version: int
    mode: str  # one of RECORDED
    cpus: typing.Optional[str]
    boot_id: typing.Optional[str]
    v1: V1Record
    systemd: SystemdRecord
    moved: dict[str, Moved]  # by pid
    one_to_one: str
    interrupts: interrupts.Record
    workqueue: workqueue.Record
    irqbalance: irqbalance.Record


class StateError(Exception):
    """The state file cannot be trusted or read."""


def _check_path(value: object, where: str) -> None:
    if not isinstance(value, str) or not value.startswith('/') or \
            '..' in value.split('/'):
        raise StateError('%s: %r is not an absolute cgroup path'
                         % (where, value))


def _number(text: object) -> bool:
    return isinstance(text, str) and text.isascii() and text.isdigit() \
        and len(text) <= 10


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        value >= 0


def _strings(value: object,
             keys: typing.Optional[tuple[str, ...]] = None) -> bool:
    """A mapping of str to str (keys in ``keys`` if given)."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) and
        (keys is None or k in keys) for k, v in value.items())


def _require(ok: bool, path: str, what: str) -> None:
    if not ok:
        raise StateError('%s: %s' % (path, what))


def _validate_v1(record: object, path: str) -> None:
    if not isinstance(record, dict):  # raised here: the rest reads it
        raise StateError('%s: "v1" is not a mapping' % path)
    group = record.get('group')
    _require(isinstance(group, str) and '/' not in group and
             group not in ('', '.', '..') and len(group) < 256,
             path, '%r is not a cgroup name' % (group,))
    for key, tail in (('cpuset_root', 'cpuset'), ('memory_root', 'memory')):
        root = record.get(key)
        _require(isinstance(root, str) and os.path.isabs(root) and
                 '..' not in root.split('/') and
                 os.path.basename(root) == tail, path,
                 '%s %r is not a %s hierarchy' % (key, root, tail))
    created = record.get('created', {})
    _require(isinstance(created, dict) and all(
        k in ('cpuset', 'memory') and (v is None or isinstance(v, bool))
        for k, v in created.items()), path, 'bad "created"')
    _require(_strings(record.get('previous', {}), (
        'cpuset.cpus', 'cpuset.mems', 'memory.limit_in_bytes')),
        path, 'bad "previous"')


def _validate_systemd(record: object, path: str) -> None:
    if not isinstance(record, dict):  # raised here: the rest reads it
        raise StateError('%s: "systemd" is not a mapping' % path)
    previous = record.get('previous', {})
    _require(isinstance(previous, dict) and all(
        isinstance(unit, str) and unit and '/' not in unit and
        _strings(props, ('AllowedCPUs', 'AllowedMemoryNodes'))
        for unit, props in previous.items()), path, 'bad "previous"')
    slices = record.get('slices', [])
    _require(isinstance(slices, list) and
             all(isinstance(x, str) for x in slices), path, 'bad "slices"')


def from_json(doc: object, path: str) -> State:
    """The state in a file's JSON (``doc``, ``RETRY_KEY`` at the top
    level) of any version of ``VERSIONS``, every field checked;
    ``StateError`` naming ``path``."""
    state = _from_disk(doc)
    if not isinstance(state, dict) or \
            state.get('version') not in VERSIONS or \
            isinstance(state.get('version'), bool):
        raise StateError('%s: not a version %s isolation state'
                         % (path, ' or '.join(map(str, VERSIONS))))
    # From here on its keys are checked one by one (a file, not yet a
    # State until the end).
    state = typing.cast(dict[str, typing.Any], state)
    mode = state.get('mode')
    if mode not in RECORDED:
        raise StateError('%s: unknown mode %r' % (path, mode))
    _require(mode in state, path, 'no "%s" record' % mode)
    if mode == CgroupMode.V1:
        _validate_v1(state['v1'], path)
    else:
        _validate_systemd(state['systemd'], path)
    _require(state.get('cpus') is None or (
        isinstance(state['cpus'], str) and _cpus(state['cpus'])),
        path, 'bad "cpus"')
    _require(state.get('boot_id') is None or
             isinstance(state['boot_id'], str), path, 'bad "boot_id"')
    _validate_pins(state, path)
    moved = state.setdefault('moved', {})
    _require(isinstance(moved, dict), path, '"moved" is not a mapping')
    for pid, info in moved.items():
        if not _number(pid) or int(pid) < 2 or not isinstance(info, dict) \
                or not _int(info.get('start')) or \
                not isinstance(info.get('comm', ''), str) or \
                not _strings(info.get('affinity') or {}) or \
                not all(_number(t) for t in info.get('affinity') or {}):
            raise StateError('%s: bad entry for pid %r' % (path, pid))
        for key in ('cpuset', 'memory'):
            if info.get(key) is not None:
                _check_path(info[key], '%s: pid %s' % (path, pid))
    return typing.cast(State, state)


def _validate_pins(state: dict[str, typing.Any], path: str) -> None:
    """The parts kept by ``kernelwork``: undo writes their values to
    /proc/irq/<key>/ and the workqueue mask, so keys are numbers and
    values CPU sets."""
    def cpus(text: str) -> bool:
        try:
            cpuset.parse(text, allow_empty=True)
            return True
        except cpuset.CpusetError:
            return False
    _require(state.get('one_to_one') is None or
             isinstance(state['one_to_one'], str), path,
             'bad "one_to_one"')
    irq = state.get('interrupts', {})
    _require(isinstance(irq, dict) and set(irq) <= {'moved', 'refused'},
             path, 'bad "interrupts"')
    moved, refused = irq.get('moved', {}), irq.get('refused', {})
    _require(isinstance(moved, dict) and all(
        _number(k) and _strings(v, ('original', 'set')) and
        len(v) == 2 and cpus(v['original']) and cpus(v['set'])
        for k, v in moved.items()), path, 'bad "interrupts" "moved"')
    _require(_strings(refused) and all(_number(k) for k in refused),
             path, 'bad "interrupts" "refused"')
    wq = state.get('workqueue', {})
    _require(isinstance(wq, dict) and set(wq) <= {
        'original', 'set', 'refused'} and all(
        isinstance(wq.get(k, ''), str) and
        _mask(wq.get(k, '0')) for k in ('original', 'set')) and
        isinstance(wq.get('refused', []), list) and
        all(_int(c) for c in wq.get('refused', [])), path,
        'bad "workqueue"')
    ib = state.get('irqbalance', {})
    _require(isinstance(ib, dict) and set(ib) <= {
        'pid', 'start', 'original', 'told', 'failed', 'retry_at',
        'retries'} and all(
        _int(ib.get(k, 0)) for k in ('pid', 'start', 'retries')) and
        _seconds(ib.get('retry_at', 0)) and all(
        isinstance(ib.get(k, ''), str) for k in
        ('original', 'told', 'failed')), path, 'bad "irqbalance"')


def _seconds(value: object) -> bool:
    """A wall-clock time in seconds (irqbalance's ``retry_at``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and 0 <= value < 1e12


def _cpus(text: str) -> bool:
    """A CPU set (``undo`` checks recorded unit values against it)."""
    try:
        return bool(cpuset.parse(text))
    except cpuset.CpusetError:
        return False


def _mask(text: str) -> bool:
    try:
        cpumask.parse(text)
        return True
    except cpuset.CpusetError:
        return False


def boot_id(proc: str = '/proc') -> typing.Optional[str]:
    """The running kernel's boot id, or None if it cannot be read."""
    try:
        text = safefs.read_file(
            os.path.join(proc, 'sys', 'kernel', 'random', 'boot_id'),
            BOOT_ID_LIMIT, 'boot id')
    except OSError:
        return None
    return text.decode('ascii', 'replace').strip() or None


def from_earlier_boot(st: State,
                      proc: str = '/proc') -> bool:
    """True if ``st`` was written before the last reboot."""
    recorded = st.get('boot_id')
    if not recorded:
        return False
    current = boot_id(proc)
    return current is not None and current != recorded


# irqbalance's retry after a timeout (``retry_at``, ``retries``) is kept
# in its record while the agent runs, but written at the top level of the
# file, under this key: 1.0.0 refuses unknown keys inside the
# ``irqbalance`` record (its ``undo`` would set the whole state aside
# after a rollback) and ignores unknown top-level keys.
RETRY_KEY = 'irqbalance_retry'
_RETRY_FIELDS = ('retry_at', 'retries')


def _from_disk(state: object) -> object:
    """The file's ``RETRY_KEY`` back into the irqbalance record."""
    if not isinstance(state, dict) or RETRY_KEY not in state:
        return state
    state = dict(state)
    retry = state.pop(RETRY_KEY)
    ib = state.get('irqbalance', {})
    if isinstance(retry, dict) and isinstance(ib, dict):
        ib = dict(ib)
        ib.update(retry)  # the record's validation checks each field
        state['irqbalance'] = ib
    elif retry is not None:
        state['irqbalance'] = {'bad': retry}  # refused by from_json
    return state


def to_json(state: State) -> dict[str, object]:
    """The file's JSON of a state: the irqbalance record's retry fields
    under ``RETRY_KEY``."""
    out: dict[str, object] = dict(state)
    ib = state.get('irqbalance')
    if ib is None or not any(k in ib for k in _RETRY_FIELDS):
        return out
    out['irqbalance'] = {k: v for k, v in ib.items()
                         if k not in _RETRY_FIELDS}
    out[RETRY_KEY] = {k: v for k, v in ib.items() if k in _RETRY_FIELDS}
    return out


def load(path: str) -> typing.Optional[State]:
    """The recorded state, or None if there is none; StateError if the
    file is corrupt or could have been written by someone else."""
    try:
        state = statefile.read_json(path, what='isolation state',
                                    private=True)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError('cannot read %s: %s'
                         % (path, exc.strerror or exc)) from None
    except (ValueError, RecursionError) as exc:
        raise StateError('%s is corrupt: %s' % (path, exc)) from None
    return from_json(state, path)


def save(path: str, state: State) -> None:
    """Write the state (under the lock: stale temporaries go first)."""
    safefs.remove_stale_temporaries(path)
    statefile.write_json(path, to_json(state), mode=0o600)


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Lock:
    """An exclusive, non-blocking lock beside the state file."""

    def __init__(self, state_path: str) -> None:
        self.path = state_path + '.lock'
        self.fd: typing.Optional[int] = None

    def acquire(self) -> 'Lock':
        directory, name = os.path.split(os.path.abspath(self.path))
        try:
            dfd = safefs.open_dir(directory, create=True)
        except OSError as exc:
            raise StateError('cannot use %s: %s'
                             % (directory, exc.strerror or exc)) from None
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW |
                         os.O_NONBLOCK | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        except OSError as exc:
            raise StateError('cannot open %s: %s'
                             % (self.path, exc.strerror or exc)) from None
        finally:
            os.close(dfd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StateError('%s is not a regular file' % self.path)
            os.fchmod(fd, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except StateError:
            os.close(fd)
            raise
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise StateError('another nova-pinning-isolate holds %s '
                                 '(is the watch service running? stop it '
                                 'first)' % self.path) from None
            raise
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> 'Lock':
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
