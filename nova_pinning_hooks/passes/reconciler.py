"""Rebinding passes: read, plan, diff, apply.

A pass reads the live host once (capabilities, active domains, their live
XML and memory placement), plans with ``policy.make_plan``, diffs the plan
against the pins in force and writes only the differences.

Invariants:

* a reconciler is handed its configuration once, as a
  ``settings.PassSettings`` (read at the edge by ``settings.read``);
* passes on one host never overlap: ``passlock.PassLock`` on
  ``[nova_pinning] lock_path`` serialises them across threads, processes
  and users (hooks and periodic passes as the nova user, the CLI as
  root), waiting at most ``lock_timeout`` seconds;
* a pass is bounded in time: every libvirt call gets at most
  ``libvirt_call_timeout`` seconds and none starts after ``pass_timeout``
  seconds from taking the lock (``virt.Host.set_deadline``); an overrun
  ends the pass with an error, the rest of its writes skipped, and the
  lock is released;
* ``run_pass`` never raises: every failure (libvirt down or hung, missing
  or corrupt overcommit file, bad configuration) ends the pass with one
  logged error in ``PassResult.error``; ``error_kind`` says whether the
  input was refused (``input``: nothing written) or the pass failed
  (``failed``: some writes may have been made, see ``applied``);
* a second pass over an unchanged host makes zero libvirt writes;
* with a ``model.HostModel`` (long-lived reconcilers: the agent, the nova
  plugin) a pass reads only what the model cannot vouch for, and when
  the model's generation and the settings equal those of the last
  complete pass it reuses that pass's plan: no parsing, no planning, no
  changes; otherwise it parses only the domains whose XML changed
  (``snapshot.Loader``), plans again only what they can affect and
  compares only those guests' pins (``replan.Planner``: the same plan
  as the whole host's; after a dry run, or a pass that left a guest with
  a change unmarked, the next plan is the whole host's). The domains a
  pass wrote to (or tried to) are marked in the model, so the next pass
  reads them back; a domain the adapter left alone because a job of
  libvirt's holds it (``virt.Host.apply``: starting up...) is not, and
  the pass is not complete, so the next one plans the whole host again
  and writes it once it is free; every ``resync_interval`` seconds a
  pass reads everything (what no event tells: a cgroup changed behind
  libvirt's back).

Who asks for a pass, and how bursts of asking become few passes, is the
``coalescer``'s.
"""

import dataclasses
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import names
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import replan
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.passes import hostport
from nova_pinning_hooks.passes import passlock
from nova_pinning_hooks.passes import settings as settings_mod

LOG = logging.getLogger(__name__)


class ErrorKind(names.Name):
    """Why a pass ended with an error (``PassResult.error_kind``)."""
    INPUT = 'input'  # its input was refused: nothing written
    FAILED = 'failed'  # it failed: some writes may have been made


@dataclasses.dataclass
class PassResult:
    changes: list[plan_mod.PinChange] = dataclasses.field(
        default_factory=list)
    applied: list[plan_mod.PinChange] = dataclasses.field(
        default_factory=list)
    # (PinChange, or a guest's name, and why)
    skipped: list[tuple[
        typing.Union[plan_mod.PinChange, str], str]] = dataclasses.field(
            default_factory=list)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)
    error: typing.Optional[str] = None  # one-line message, or None
    error_kind: typing.Optional['ErrorKind'] = None
    plan: typing.Optional[plan_mod.Plan] = None
    # the validated snapshot.Snapshot
    snapshot: typing.Optional[snapshot_mod.Snapshot] = None
    dry_run: bool = False
    release: bool = False  # the pass put guests back on every CPU
    seconds: float = 0.0
    compared: int = 0  # guests whose live pins were compared with the plan
    # the settings.HostSettings the pass read
    settings: typing.Optional[settings_mod.HostSettings] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def complete(self) -> bool:
        """Every planned change was written (or none was needed)."""
        return self.error is None and not self.skipped


def calls_since(host: typing.Optional[hostport.PassHost],
                before: typing.Mapping[str, int]) -> dict[str, int]:
    """The libvirt calls ``host`` (None: no connection, no calls) made
    since its counts were ``before`` (a copy of ``host.calls``), by
    kind: ``{'read': n, 'write': n}``."""
    after = host.calls if host is not None else {}
    return {k: after.get(k, 0) - before.get(k, 0) for k in ('read', 'write')}


RESYNC_SLACK = 1.0  # seconds a resync pass may come early, at most

# What a plan was made from: (model generation, settings, overrides).
_PlanKey = tuple[int, str, str]


class Reconciler:
    """Runs passes against one libvirt connection, kept between passes."""

    def __init__(self, config: settings_mod.PassSettings,
                 connect: typing.Optional[hostport.Connect] = None,
                 model: typing.Optional[model_mod.HostModel] = None
                 ) -> None:
        self.config = config
        self._connect = connect
        self._host: typing.Optional[hostport.PassHost] = None
        self.model = model
        self._next_resync: typing.Optional[float] = None
        # what the plan just made was made from
        self._plan_key: typing.Optional[_PlanKey] = None
        # (key, snapshot, plan) of the last complete pass
        self._last: typing.Optional[tuple[
            _PlanKey, snapshot_mod.Snapshot, plan_mod.Plan]] = None
        self._l3_ignored_logged: typing.Optional[str] = None
        # With a model: domains parsed and planned again only as they
        # change (snapshot.Loader, replan.Planner).
        self._loader = snapshot_mod.Loader()
        self._planner = replan.Planner()
        self.compared = 0  # guests the last plan compared with live pins
        # settings.HostSettings of the last read
        self.settings: typing.Optional[settings_mod.HostSettings] = None

    def _adapter(self) -> hostport.PassHost:
        if self._host is None:
            connect = self._connect or virt.connect
            self._host = connect(self.config.connection_uri,
                                 self.config.host)
        return self._host

    def host(self) -> hostport.PassHost:
        """The libvirt adapter (``virt.Host``) passes use."""
        return self._adapter()

    def read(self,
             settings: typing.Optional[settings_mod.HostSettings] = None
             ) -> snapshot_mod.LiveSnapshot:
        """The live host with its ratio and CPU sets (the ``snapshot``
        command writes its ``to_json``); ``settings`` (a
        ``settings.HostSettings``) read now if not given."""
        if self.model is None:
            raw = self._adapter().read_snapshot()
        else:
            interval = self.config.times.resync_interval
            now = time.monotonic()
            # The agent asks for its resync pass every ``interval``
            # seconds, and its first pass started a coalescing delay after
            # its timer: a pass that comes up to a tenth of the interval
            # (at most a second) early is the resync, not one period late.
            if interval and (self._next_resync is None or
                             now >= self._next_resync -
                             min(RESYNC_SLACK, interval / 10.0)):
                if self._next_resync is not None:
                    self.model.invalidate('periodic resync')
                self._next_resync = now + interval
            raw = self._adapter().read_snapshot(self.model)
        if settings is None:
            settings = settings_mod.load(self.config.ratio)
        self.settings = settings  # the last read: a pass hands them on
        return raw.with_settings(settings)

    def vcpu_stats(self) -> hostport.VcpuStats:
        """One reading of every running guest's vCPU counters
        (``virt.Host.vcpu_stats``): one libvirt call, no lock."""
        return self._adapter().vcpu_stats()

    def plan(self, release: bool = False,
             settings: typing.Optional[settings_mod.HostSettings] = None
             ) -> tuple[snapshot_mod.Snapshot, plan_mod.Plan,
                               list[plan_mod.PinChange]]:
        """Read and plan without writing: (snapshot, plan, changes).
        ``release``: the plan that puts managed guests on every CPU;
        ``settings``: as ``read``."""
        raw = self.read(settings)
        overrides = self.config.policy_overrides()
        self._plan_key = None
        if self.model is not None and not release:
            assert raw.settings is not None  # ``read`` put them there
            # What the plan depends on besides the domains: the host's
            # capabilities, the ratio and CPU sets (not when the file
            # was written), the policy's options.
            self._plan_key = (self.model.generation, repr((
                raw.capabilities,
                sorted(raw.settings.snapshot_fields().items()))),
                repr(sorted(overrides.items())))
            if self._last is not None and self._last[0] == self._plan_key:
                self.compared = 0
                return self._last[1], self._last[2], []
        scope = None
        if self.model is None:
            snap = snapshot_mod.load(raw, from_libvirt=True, **overrides)
        else:
            snap, changed, removed = self._loader.load(raw, **overrides)
        if snap.host.l3_ignored and \
                snap.host.l3_ignored != self._l3_ignored_logged:
            # Once per reason: the capabilities are parsed again only
            # when they change.
            self._l3_ignored_logged = snap.host.l3_ignored
            LOG.warning('L3 cache banks ignored, one domain per node: %s',
                        snap.host.l3_ignored)
        if release:
            self._planner.reset()
            p = policy.release_plan(snap.host, snap.guests, snap.options)
        elif self.model is None:
            p = policy.make_plan(snap.host, snap.guests, snap.options)
        else:
            p, scope = self._planner.plan(snap.host, snap.guests,
                                          snap.options, changed, removed)
        self.compared = len(p.guests) if scope is None else len(scope)
        return snap, p, plan_mod.changes(p, snap.guests,
                                         enforced=snap.kernel_affinity,
                                         pairs=scope)

    def run_pass(self, dry_run: bool = False, log_errors: bool = True,
                 release: bool = False) -> PassResult:
        """One pass under the host-wide lock. Never raises.

        ``log_errors=False`` leaves reporting a refused or failed pass to
        the caller, so the CLI prints one message (an unexpected failure
        is still logged with its traceback)."""
        start = time.monotonic()
        result = PassResult(dry_run=dry_run, release=release)
        try:
            # ``release`` is how a switched-off host gives its guests
            # back to nova's CPUs: it runs whatever the switch says.
            if not self.config.enabled and not release:
                result.error = 'disabled ([nova_pinning] enabled = false)'
                return result
            times = self.config.times
            # Each pass opens the lock afresh, so this also serialises
            # threads sharing self._host.
            with passlock.PassLock(self.config.lock_path,
                                   times.lock_timeout):
                self._pass(result, time.monotonic() + times.pass_timeout)
        except (settings_mod.SettingsError, snapshot_mod.SnapshotError,
                policy.PolicyError) as exc:
            result.error, result.error_kind = str(exc), ErrorKind.INPUT
            if log_errors:
                LOG.error('rebinding pass not run: %s', exc)
        except (passlock.LockTimeout, OSError) as exc:
            result.error, result.error_kind = str(exc), ErrorKind.FAILED
            if log_errors:
                LOG.error('rebinding pass not run: %s', exc)
        except Exception as exc:
            if libvirtapi.is_host_error(exc):
                result.error = 'libvirt: %s' % exc
                if log_errors:
                    LOG.error('rebinding pass failed: %s', result.error)
            else:
                result.error = '%s: %s' % (type(exc).__name__, exc)
                LOG.exception('rebinding pass failed')
            result.error_kind = ErrorKind.FAILED
        finally:
            result.seconds = time.monotonic() - start
            self._log(result)
        return result

    def _pass(self, result: PassResult, deadline: float) -> None:
        host = self._adapter()
        before = dict(host.calls)
        host.set_deadline(deadline)
        try:
            snap, p, changes = self.plan(release=result.release)
            result.snapshot, result.plan, result.changes = snap, p, changes
            result.settings = self.settings
            result.compared = self.compared
            marked: set[str] = set()  # guests to be read again next pass
            if changes and not result.dry_run:
                outcome = host.apply(changes)
                result.applied = list(outcome.applied)
                result.skipped = list(outcome.skipped)
                if outcome.error:
                    result.error = 'libvirt: %s' % outcome.error[0]
                    result.error_kind = ErrorKind.FAILED
                if self.model is not None:
                    # Their XML changed: read it back next pass. A domain
                    # libvirt held (starting up...) was not written to:
                    # the event of its job's end marks it, and it may
                    # read as it did, so it is left out of ``marked``:
                    # the next plan is the whole host's and compares it.
                    held = outcome.held
                    for change in result.applied + [
                            c for c, _ in result.skipped
                            if isinstance(c, plan_mod.PinChange)]:
                        if change.uuid not in held:
                            self.model.written(change.uuid)
                            marked.add(change.uuid)
            self._last = None
            if self._plan_key is not None and not result.dry_run:
                if result.complete:
                    self._last = (self._plan_key, snap, p)
                if {c.uuid for c in changes} <= marked:
                    # Every guest whose pins were to change, written or
                    # not, is read again, and so planned and compared
                    # again: the next plan may build on this one.
                    self._planner.confirm()
        finally:
            host.set_deadline(None)
            result.calls = calls_since(host, before)

    def _log(self, result: PassResult) -> None:
        if result.error and result.plan is None:
            return
        LOG.info('rebinding pass%s: %d guests, %d compared, %d changes, '
                 '%d applied, %d skipped; libvirt calls: %d reads, %d '
                 'writes; %.3f s', ' (dry run)' if result.dry_run else '',
                 len(result.plan.guests) if result.plan else 0,
                 result.compared, len(result.changes), len(result.applied),
                 len(result.skipped), result.calls.get('read', 0),
                 result.calls.get('write', 0), result.seconds)

    def close(self) -> None:
        host, self._host = self._host, None
        if host is not None:
            host.close()

