"""Rebinding passes: read, plan, diff, apply; and the coalescing of bursts.

A pass reads the live host once (capabilities, active domains, their live
XML and memory placement), plans with ``policy.make_plan``, diffs the plan
against the pins in force and writes only the differences.

Invariants:

* passes on one host never overlap: an oslo.concurrency external lock in
  ``[nova_pinning] lock_path`` serialises them across threads and
  processes (hooks, periodic passes, the CLI);
* ``run_pass`` never raises: every failure (libvirt down, missing or
  corrupt overcommit file, bad configuration) ends the pass with one
  logged error in ``PassResult.error`` and no write;
* a second pass over an unchanged host makes zero libvirt writes;
* ``Coalescer.request`` returns at once (unless asked to wait): a burst of
  requests arriving while a pass runs is served by exactly one more pass,
  which starts after the last of them.
"""

import dataclasses
import os
import threading
import time

from oslo_concurrency import lockutils
from oslo_log import log as logging

from nova_pinning_hooks import cpuset
from nova_pinning_hooks import plan as plan_mod
from nova_pinning_hooks import policy
from nova_pinning_hooks import snapshot as snapshot_mod

LOG = logging.getLogger(__name__)
LOCK_NAME = 'nova-pinning-hooks-pass'


class SettingsError(Exception):
    """The ratio or CPU sets a pass needs are missing or invalid."""


@dataclasses.dataclass
class PassResult:
    changes: list = dataclasses.field(default_factory=list)
    applied: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    calls: dict = dataclasses.field(default_factory=dict)
    error: object = None  # one-line message, or None
    plan: object = None
    snapshot: object = None  # the validated snapshot.Snapshot
    dry_run: bool = False
    release: bool = False  # the pass put guests back on every CPU
    seconds: float = 0.0

    @property
    def ok(self):
        return self.error is None


def host_settings(conf):
    """Ratio and CPU sets for the snapshot, from configuration.

    ``[nova_pinning] allocation_ratio`` wins when set; otherwise the
    overcommit file that the nova plugin writes at service start supplies
    the ratio and nova's CPU sets. Raises SettingsError with one message.
    """
    group = conf.nova_pinning
    settings = {'reserved_cpus': group.reserved_cpus or None,
                'shared_cpus': None, 'dedicated_cpus': None}
    if group.allocation_ratio is not None:
        if group.allocation_ratio <= 0:
            raise SettingsError('[nova_pinning] allocation_ratio must be '
                                '> 0, not %s' % group.allocation_ratio)
        settings['allocation_ratio'] = group.allocation_ratio
        return settings
    from nova_pinning_hooks import overcommit
    try:
        info = overcommit.read(group.overcommit_file)
    except overcommit.OvercommitError as exc:
        raise SettingsError(str(exc)) from None
    settings.update(allocation_ratio=info.allocation_ratio,
                    shared_cpus=info.shared_cpus,
                    dedicated_cpus=info.dedicated_cpus)
    return settings


def policy_overrides(conf):
    """Policy options that come from configuration, not the snapshot."""
    group = conf.nova_pinning
    return {'foreign_domains': group.foreign_domains,
            'home_node_min_fraction': group.home_node_min_fraction,
            'set_home_node': group.set_home_node}


def _cpuset_text(value):
    if value is None or isinstance(value, str):
        return value
    return cpuset.format(frozenset(value))


class Reconciler:
    """Runs passes against one libvirt connection, kept between passes."""

    def __init__(self, conf, connect=None):
        self._conf = conf
        self._connect = connect
        self._host = None

    def _adapter(self):
        if self._host is None:
            connect = self._connect
            if connect is None:
                from nova_pinning_hooks import virt
                connect = virt.connect
            self._host = connect(self._conf.nova_pinning.connection_uri,
                                 conf=self._conf)
        return self._host

    def read(self):
        """The live host as a snapshot dict (the ``snapshot`` command)."""
        raw = self._adapter().read_snapshot()
        settings = host_settings(self._conf)
        for key in ('reserved_cpus', 'shared_cpus', 'dedicated_cpus'):
            settings[key] = _cpuset_text(settings[key])
        raw.update(settings)
        return raw

    def plan(self, release=False):
        """Read and plan without writing: (snapshot, plan, changes).
        ``release``: the plan that puts managed guests on every CPU."""
        snap = snapshot_mod.load(self.read(), from_libvirt=True,
                                 **policy_overrides(self._conf))
        make = policy.release_plan if release else policy.make_plan
        p = make(snap.host, snap.guests, snap.options)
        return snap, p, plan_mod.changes(p, snap.guests)

    def run_pass(self, dry_run=False, log_errors=True, release=False):
        """One pass under the host-wide lock. Never raises.

        ``log_errors=False`` leaves reporting a refused pass (bad settings
        or snapshot) to the caller, so the CLI prints one message."""
        start = time.monotonic()
        result = PassResult(dry_run=dry_run, release=release)
        try:
            if not self._conf.nova_pinning.enabled:
                result.error = 'disabled ([nova_pinning] enabled = false)'
                return result
            lock_path = self._conf.nova_pinning.lock_path
            os.makedirs(lock_path, mode=0o755, exist_ok=True)
            # lockutils takes a per-process semaphore before the file
            # lock, so this also serialises threads sharing self._host.
            with lockutils.lock(LOCK_NAME, external=True,
                                lock_path=lock_path):
                self._pass(result)
        except (SettingsError, snapshot_mod.SnapshotError,
                policy.PolicyError) as exc:
            result.error = str(exc)
            if log_errors:
                LOG.error('rebinding pass not run: %s', exc)
        except Exception as exc:
            result.error = '%s: %s' % (type(exc).__name__, exc)
            LOG.exception('rebinding pass failed')
        finally:
            result.seconds = time.monotonic() - start
            self._log(result)
        return result

    def _pass(self, result):
        host = self._adapter()
        before = dict(getattr(host, 'calls', {}))
        snap, p, changes = self.plan(release=result.release)
        result.snapshot, result.plan, result.changes = snap, p, changes
        if changes and not result.dry_run:
            outcome = host.apply(changes)
            result.applied = list(outcome.applied)
            result.skipped = list(outcome.skipped)
        after = getattr(host, 'calls', {})
        result.calls = {k: after.get(k, 0) - before.get(k, 0)
                        for k in ('read', 'write')}

    def _log(self, result):
        if result.error:
            return
        LOG.info('rebinding pass%s: %d guests, %d changes, %d applied, '
                 '%d skipped; libvirt calls: %d reads, %d writes; %.3f s',
                 ' (dry run)' if result.dry_run else '',
                 len(result.plan.guests) if result.plan else 0,
                 len(result.changes), len(result.applied),
                 len(result.skipped), result.calls.get('read', 0),
                 result.calls.get('write', 0), result.seconds)

    def close(self):
        host, self._host = self._host, None
        if host is not None and hasattr(host, 'close'):
            host.close()


class Coalescer:
    """Collapse bursts of pass requests into few passes on one worker.

    ``request`` bumps a generation counter and wakes the worker; it holds a
    lock for microseconds only. The worker waits ``delay`` seconds so the
    rest of a burst arrives, notes the newest generation, runs one pass and
    marks every generation up to that one served. Requests made while the
    pass runs have a newer generation, so they get exactly one more pass.
    """

    def __init__(self, run_fn, delay=0.2, name='nova-pinning-pass'):
        self._run_fn = run_fn
        self._delay = delay
        self._name = name
        self._cond = threading.Condition()
        self._requested = 0
        self._served = 0
        self._stopped = False
        self._thread = None
        self.passes = 0

    def request(self, reason='', wait=False, timeout=None):
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

    def _loop(self):
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

    def stop(self, timeout=5.0):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
