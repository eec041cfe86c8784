"""The live sub-commands of ``nova-pinning``: snapshot, status, rebind.

Thin callers of the reconciler; each one reads the host once. Exit
status as in ``cmd.common``: a refused input or configuration is a
``UsageError`` (2), libvirt unreachable or hung, a failed or partial pass
is 1.
"""

import json
import time
import types
import typing

from oslo_config import cfg

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.observe import endpoint
from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import render
from nova_pinning_hooks.observe import stealview
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.runtime import settings as runtime_settings
from nova_pinning_hooks.runtime import service

_T = typing.TypeVar('_T')


def _settings(conf: cfg.ConfigOpts) -> runtime_settings.RuntimeSettings:
    """The configuration's records (``runtime.settings.read``), with
    ``--connection`` when the command has it."""
    uri = getattr(conf.command, 'connection', None)
    if uri:
        conf.set_override('connection_uri', uri, group='nova_pinning')
    return runtime_settings.read(conf)


def _reconciler(conf: cfg.ConfigOpts) -> reconciler.Reconciler:
    return reconciler.Reconciler(_settings(conf).passes)


def _guard(func: typing.Callable[..., _T]) -> typing.Callable[..., _T]:
    """Turn failures into one-line errors: bad settings exit 2, a libvirt
    that cannot be reached (or answers too late) exits 1."""
    def wrapper(conf: cfg.ConfigOpts, **kwargs: typing.Any) -> _T:
        try:
            return func(conf, **kwargs)
        except (settings_mod.SettingsError,
                snapshot_mod.SnapshotError) as exc:
            raise common.UsageError(str(exc)) from None
        except Exception as exc:
            if libvirtapi.is_host_error(exc):
                raise common.CommandFailed('libvirt: %s' % exc) from None
            raise
    return wrapper


@_guard
def cmd_snapshot(conf: cfg.ConfigOpts) -> str:
    rec = _reconciler(conf)
    try:
        return json.dumps(rec.read().to_json(), indent=1) + '\n'
    finally:
        rec.close()


def _isolation_status(conf: cfg.ConfigOpts) -> statusfile.Status:
    """The host isolation agent's view, as it published it after its
    last sweep (never asks systemd: ``nova-pinning-isolate status``
    does)."""
    try:
        return report.published_in(conf.nova_pinning_isolation.state_file)
    except Exception as exc:  # isolation is optional for binding
        return {'error': '%s: %s' % (type(exc).__name__, exc)}


_sleep = time.sleep  # tests replace it


def plan_and_sample(rec: reconciler.Reconciler, interval: float
                    ) -> tuple[snapshot_mod.Snapshot, plan_mod.Plan,
                               list[plan_mod.PinChange],
                               typing.Optional[stealview.Measurement]]:
    """(snapshot, plan, changes, Measurement or None): the host read and
    planned between two samples of vCPU counters ``interval`` seconds
    apart (no sample for 0). Three reads of the host in all."""
    start = time.monotonic()
    first = rec.vcpu_stats() if interval else None
    snap, p, changes = rec.plan()
    if not interval:
        return snap, p, changes, None
    assert first is not None  # read above: ``interval`` is set
    left = start + interval - time.monotonic()
    if left > 0:
        _sleep(left)
    second = rec.vcpu_stats()
    return snap, p, changes, stealview.measure(p, first[1], second[1],
                                               second[0] - first[0],
                                               changes)


@_guard
def cmd_status(conf: cfg.ConfigOpts) -> str:
    rec = _reconciler(conf)
    try:
        snap, p, changes, measured = plan_and_sample(
            rec, conf.command.interval)
        # What the plan was made with: the file is read once.
        settings = rec.settings
        unknown = rec.host().unknown_facts()
    finally:
        rec.close()
    threshold = conf.nova_pinning.steal_warning_percent
    iso = _isolation_status(conf)
    drift = snap.drift()
    assert settings is not None  # read by ``plan``
    source = settings.ratio_source
    fmt = cpuset.format
    report = summary_mod.of_plan(snap.host, snap.guests, p, snap.options,
                                 time.time())
    reported = summary_mod.encode(report)
    if conf.command.format == 'json':
        data = plan_mod.to_json(p, changes, host=snap.host)
        data['scheduler_summary'] = {
            'key': summary_mod.KEY, 'value': reported,
            'one_to_one_vcpus': report.one_to_one}
        pending = plan_mod.pending_pins(changes)
        for entry in data['guests']:
            entry['live_matches_plan'] = (entry['mode'] == 'untouched' or
                                          entry['uuid'] not in pending)
            entry['kernel_drift'] = {
                str(v): {'libvirt': fmt(pin), 'kernel': fmt(cpus)}
                for v, (pin, cpus) in
                sorted(drift.get(entry['uuid'], {}).items())}
            entry['kernel_facts'] = ('unknown' if entry['name'] in unknown
                                     else 'read')
        data['kernel_facts_unknown'] = unknown
        data['isolation'] = iso
        data['allocation_ratio_source'] = source
        if measured is not None:
            data['steal'] = stealview.to_json(measured)
            data['steal']['warning_percent'] = threshold
        return json.dumps(data, indent=1, default=str) + '\n'
    text = render.plan_table(p, snap.host, snap.guests, changes,
                             title='status of %s' %
                             conf.nova_pinning.connection_uri)
    text += 'allocation ratio %g, from %s\n' % (p.allocation_ratio, source)
    names = {g.uuid: g.name for g in snap.guests}
    for uuid, vcpus in sorted(drift.items(), key=lambda i: names[i[0]]):
        for v, (pin, cpus) in sorted(vcpus.items()):
            text += ('kernel drift: %s vCPU %d runs on %s, libvirt says %s '
                     '(a pass repairs it)\n' % (render.printable(names[uuid]),
                                                v, fmt(cpus),
                                                fmt(pin)))
    for name, why in unknown.items():
        text += ('kernel facts unknown: %s: %s (memory placement from '
                 'libvirt, no drift check)\n' % (name, why))
    if reported is not None:
        text += '\n'.join(render.summary_lines(report, reported)) + '\n'
    if measured is not None:
        text += '\n' + '\n'.join(stealview.lines(measured,
                                                 threshold)) + '\n'
    return text + '\n' + _isolation_text(iso)


def _isolation_text(iso: object) -> str:
    if not isinstance(iso, dict):
        return 'host isolation: %s\n' % (iso,)
    if 'error' in iso:
        return 'host isolation: unknown (%s)\n' % iso['error']
    parts = ['%s=%s' % (k, v) for k, v in sorted(iso.items())
             if not isinstance(v, (dict, list))]
    return 'host isolation: %s\n' % ', '.join(parts)


@_guard
def cmd_metrics(conf: cfg.ConfigOpts) -> common.CommandOutput:
    """The exposition; exit 1 (after printing it, ``nova_pinning_up``
    0) when part of the host could not be read."""
    config = _settings(conf)
    rec = reconciler.Reconciler(config.passes)
    try:
        view = metrics.read_view(rec, config.observe)
    finally:
        rec.close()
    text = metrics.exposition(view)
    if view.errors:
        return text, 1, view.errors[0]
    return text


def cmd_exporter(conf: cfg.ConfigOpts) -> str:
    """Serve the metrics on ``--listen`` until Ctrl-C (exit 0)."""
    import threading

    address, port = conf.command.listen
    config = _settings(conf)
    rec = reconciler.Reconciler(config.passes)
    try:
        endpoint.serve(rec, config.observe, address, port,
                       threading.Event())
    except OSError as exc:
        raise common.CommandFailed('cannot listen on %s port %d: %s' % (
            address, port, exc.strerror or exc)) from None
    except KeyboardInterrupt:
        return ''
    finally:
        rec.close()
    return ''


@_guard
def cmd_rebind(conf: cfg.ConfigOpts,
               release: bool = False) -> common.CommandOutput:
    rec = _reconciler(conf)
    try:
        result = rec.run_pass(dry_run=conf.command.dry_run,
                              log_errors=False, release=release)
    finally:
        rec.close()
    if result.error and result.error_kind == reconciler.ErrorKind.INPUT:
        raise common.UsageError(result.error)
    if result.error and result.plan is None:
        raise common.CommandFailed('pass failed: %s' % result.error)
    lines = []
    skipped = {id(c): why for c, why in result.skipped
               if not isinstance(c, str)}
    for c in result.changes:
        state = 'would set' if result.dry_run else (
            'skipped' if id(c) in skipped else
            'set' if result.error is None or c in result.applied
            else 'not set')
        what = c.kind if c.index is None else '%s %d' % (c.kind, c.index)
        lines.append('%-9s %s %s: %s -> %s%s' % (
            state, render.printable(c.name), what,
            'unpinned' if c.old is None else cpuset.format(c.old),
            cpuset.format(c.new),
            ' (%s)' % skipped[id(c)] if id(c) in skipped else ''))
    for item, why in result.skipped:
        if isinstance(item, str):
            lines.append('skipped   %s: %s' % (render.printable(item), why))
    lines.append('%d changes, %d applied, %d skipped; libvirt calls: '
                 '%d reads, %d writes; %.3f s%s' % (
                     len(result.changes), len(result.applied),
                     len(result.skipped), result.calls.get('read', 0),
                     result.calls.get('write', 0), result.seconds,
                     ' (dry run)' if result.dry_run else ''))
    text = '\n'.join(lines) + '\n'
    if result.error:
        return text, 1, 'pass failed: %s' % result.error
    if result.skipped:
        return text, 1, '%d change(s) skipped' % len(result.skipped)
    return text


def cmd_release(conf: cfg.ConfigOpts) -> common.CommandOutput:
    """Undo the binding of every managed guest, in one locked pass."""
    return cmd_rebind(conf, release=True)


CLEAR = '\x1b[H\x1b[2J'
HIDE_CURSOR, SHOW_CURSOR = '\x1b[?25l', '\x1b[?25h'
# The terminal's alternate screen: what was on screen before comes back.
ALT_SCREEN, MAIN_SCREEN = '\x1b[?1049h', '\x1b[?1049l'


def _frame(conf: cfg.ConfigOpts, p: plan_mod.Plan, m: stealview.Measurement,
           threshold: float, when: time.struct_time) -> list[str]:
    head = 'nova-pinning top  %s  %s  every %gs  (q or Ctrl-C quits)' % (
        conf.nova_pinning.connection_uri, time.strftime('%H:%M:%S', when),
        conf.command.interval)
    host = ('host: ratio %g; %d managed vCPUs of %g allocatable on a pool '
            'of %d pCPUs' % (p.allocation_ratio, p.total_vcpus,
                             len(p.pool) * p.allocation_ratio, len(p.pool)))
    return [head, host] + stealview.lines(m, threshold)


class _Terminal:
    """Keys without Enter, no echo, the cursor hidden, drawn on the
    alternate screen; all restored on leaving, whatever ends the loop."""

    def __init__(self, stdin: typing.TextIO, stdout: typing.TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout
        self.fd = stdin.fileno() if stdin.isatty() else None
        # termios.tcgetattr's attributes, while changed
        self.saved: typing.Optional[list[typing.Any]] = None

    def __enter__(self) -> '_Terminal':
        if self.fd is not None:
            import termios
            import tty
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        self.stdout.write(ALT_SCREEN + HIDE_CURSOR)
        self.stdout.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved is not None:
            import termios
            assert self.fd is not None  # saved from it (``__enter__``)
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        self.stdout.write(SHOW_CURSOR + MAIN_SCREEN)
        self.stdout.flush()

    def wait_for_quit(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True if ``q`` was pressed."""
        import select
        if self.fd is None:
            time.sleep(seconds)
            return False
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                import os
                data = os.read(self.fd, 64)
                if not data or b'q' in data.lower():
                    return True


TOP_MIN_INTERVAL = 0.5


@_guard
def cmd_top(conf: cfg.ConfigOpts) -> str:
    """Steal per guest, worst first, refreshed every ``--interval``."""
    import shutil
    import sys
    interval = conf.command.interval
    if not interval >= TOP_MIN_INTERVAL:
        # Each frame is a plan and a libvirt call: 0.001 s drew 381
        # frames in 5 s.
        raise common.UsageError('top: --interval must be at least %g s'
                                % TOP_MIN_INTERVAL)
    threshold = conf.command.threshold
    if threshold is None:
        threshold = conf.nova_pinning.steal_warning_percent
    rec = _reconciler(conf)
    try:
        if conf.command.once:
            _, p, _, m = plan_and_sample(rec, interval)
            assert m is not None  # sampled: ``interval`` is not 0
            return '\n'.join(_frame(conf, p, m, threshold,
                                    time.localtime())) + '\n'
        out = sys.stdout
        with _Terminal(sys.stdin, out) as term:
            try:
                taken, before = rec.vcpu_stats()
                while not term.wait_for_quit(
                        max(0.0, taken + interval - time.monotonic())):
                    _, p, changes = rec.plan()
                    now, after = rec.vcpu_stats()
                    m = stealview.measure(p, before, after, now - taken,
                                          changes)
                    taken, before = now, after
                    width = shutil.get_terminal_size((100, 40)).columns
                    out.write(CLEAR + '\n'.join(
                        line[:width] for line in
                        _frame(conf, p, m, threshold, time.localtime())))
                    out.flush()
            except KeyboardInterrupt:
                pass  # Ctrl-C is how a person leaves top: not an error
        return ''
    finally:
        rec.close()


def cmd_agent(conf: cfg.ConfigOpts) -> str:
    """Run the binding agent until SIGTERM/SIGINT (exit 0)."""
    import signal
    import sys
    import threading

    config = _settings(conf)
    # Settings are checked once up front, so a broken configuration is
    # exit 2 and not a stream of failing passes.
    try:
        settings_mod.load(config.passes.ratio)
    except settings_mod.SettingsError as exc:
        raise common.UsageError(str(exc)) from None
    listen = conf.command.listen
    if listen is None and conf.nova_pinning.metrics_listen:
        listen = httpserve.parse_listen(conf.nova_pinning.metrics_listen)
    stop = threading.Event()

    def on_signal(signum: int,
                  frame: typing.Optional[types.FrameType]) -> None:
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    agent = service.BindingService(config, service.Role(
        summary_file=conf.command.summary_file))
    if listen is not None:
        try:
            agent.pass_metrics.start_endpoint(listen)
        except OSError as exc:
            raise common.CommandFailed('cannot listen on %s port %d: %s' % (
                listen[0], listen[1], exc.strerror or exc)) from None
    agent.run(stop, requests=sys.stdin if conf.command.requests_on_stdin
              else None)
    return ''
