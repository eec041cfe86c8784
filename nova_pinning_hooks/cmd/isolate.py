"""``nova-pinning-isolate``: keep host processes on the reserved CPUs.

    nova-pinning-isolate apply    # confine now (cgroup v1: one sweep)
    nova-pinning-isolate watch    # apply, then follow daemon restarts
    nova-pinning-isolate status [--format text|json]
    nova-pinning-isolate undo     # put back everything apply changed

Exit status: 0 done; 1 failed (cgroupfs or systemctl refused, another
agent holds the lock, undo incomplete, ``status`` could not learn
what systemd or cgroupfs has, or the state is unknown, or applied while
the configuration is refused: it prints what it knows, then one line on
stderr); 2 configuration refused (one message on stderr, nothing
changed). ``status`` asks systemd each unit within one bound
(``[nova_pinning_isolation] status_timeout``), none after one that was
not answered in time, and shows the status the
agent last published (its age). ``undo`` and ``status`` work when
the isolation settings are refused (``reserved_cpus`` unset, say): they
read the state file. A configuration file with a value of the wrong type
or out of bounds, an option this package does not have in one of its
sections, or a section named like one of its own and misspelt
(``[isolation]``) is refused by every sub-command (exit 2, naming it), as
by ``nova-pinning``.
"""

import argparse
import json
import signal
import sys
import threading
import typing

from oslo_config import cfg

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.cmd import confcheck
from nova_pinning_hooks.isolation import isolator
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import restore
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile

PROG = 'nova-pinning-isolate'


def _add_parsers(
        subparsers: 'argparse._SubParsersAction[argparse.ArgumentParser]'
) -> None:
    subparsers.add_parser('apply', help='confine host processes now')
    subparsers.add_parser('watch', help='apply, then keep them confined '
                          'as daemons restart (the service)')
    subparsers.add_parser('undo', help='put back everything apply changed')
    sp = subparsers.add_parser('status', help='what is confined')
    sp.add_argument('--format', choices=('text', 'json'), default='text')


def status_text(st: statusfile.Status) -> str:
    """The status dict as lines for people."""
    lines = ['state: %s' % st.get('state')]
    if st.get('earlier_boot'):
        lines[0] += (' (applied before the last reboot, which undid it; '
                     '"undo" removes its state file)')
    for key in ('why', 'error', 'backend_error'):
        if st.get(key):
            lines.append('%s: %s' % (key.replace('_', ' '), st[key]))
    if 'mode' in st:
        lines.append('mode: %s' % st['mode'] + (
            ' (through %s)' % st['systemd_through']
            if st.get('systemd_through') else ''))
        lines.append('reserved CPUs: %s' % st['reserved_cpus'])
    if st.get('applied_mode'):
        lines.append('applied: %s on CPUs %s, %d processes recorded'
                     % (st['applied_mode'], st.get('applied_cpus'),
                        st.get('recorded_processes', 0)))
    if 'group' in st:
        lines.append('group: %s (%s)' % (
            st['group'], 'CPUs %s' % st['group_cpus']
            if st.get('group_exists') else 'absent'))
    for unit, props in sorted(st.get('slices', {}).items()):
        lines.append('%s: %s' % (unit, ' '.join(
            '%s=%s' % kv for kv in sorted(props.items()))))
    if 'confined' in st:
        what = 'units' if 'slices' in st else 'processes'
        lines.append('%s confined: %d, not confined: %d'
                     % (what, st['confined'], st['not_confined']))
    lines.extend(_pins_text(st))
    if st.get('kept'):
        lines.append('never moved: %s' % ', '.join(
            '%s %d' % kv for kv in sorted(st['kept'].items())))
    if isinstance(st.get('agent'), dict):
        lines.append(_agent_text(st['agent']))
    return '\n'.join(lines) + '\n'


def _agent_text(agent: statusfile.Status) -> str:
    """The status the agent published, in one line."""
    if not agent.get('status_written'):
        return 'agent status: %s' % (agent.get('error') or agent.get('why')
                                     or 'none published')
    text = 'agent status: %s, published %s s ago' % (
        agent.get('state'), agent.get('status_age', '?'))
    if agent.get('earlier_boot'):
        return text + ' (before the last reboot)'
    interval = agent.get('status_sweep_interval')
    if agent.get('status_stale'):
        return text + (' (stale: older than %d sweeps of %s s; is "watch" '
                       'running?)' % (statusfile.STALE_SWEEPS, interval))
    return text + ' (a sweep every %s s)' % interval


def _pins_text(st: statusfile.Status) -> list[str]:
    """Interrupts, workqueues and irqbalance (``kernelwork.status``)."""
    if 'one_to_one_cpus' not in st:
        return []
    lines = ['one-to-one CPUs: %s' % (st['one_to_one_cpus'] or '(none)'),
             'interrupts: %d moved, %d refused by the kernel, %d still '
             'allowed on one-to-one CPUs' % (
                 st['irqs_moved'], st['irqs_refused'],
                 st['irqs_on_one_to_one'])]
    firing = st.get('irqs_firing_on_one_to_one')
    if firing is not None:
        lines.append('interrupts firing on one-to-one CPUs in %.1f s: %d%s'
                     % (st['irq_sample_seconds'], len(firing), (
                         ' (%s)' % ', '.join('%s: %d' % kv for kv in
                                             sorted(firing.items(),
                                                    key=lambda kv:
                                                    int(kv[0]))))
                        if firing else ''))
    if 'workqueue_cpus' in st:
        lines.append('unbound workqueues on CPUs %s' % st['workqueue_cpus'])
    if st.get('irqbalance'):
        told = st['irqbalance'].get('told')
        lines.append('irqbalance (pid %d): %s' % (
            st['irqbalance']['pid'], 'told to keep off CPUs %s' % told
            if told else 'not told anything'))
    return lines


def _watch(conf: cfg.ConfigOpts) -> str:
    iso = isolator.Isolator(config.read(conf))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    iso.watch(stop)
    return 'stopped; host processes stay confined (undo to release)\n'


def _apply(conf: cfg.ConfigOpts) -> str:
    iso = isolator.Isolator(config.read(conf))
    moved = iso.apply()
    # The CPUs as configured (the text), as before the records.
    return '%s: host processes confined to CPUs %s; %d moved now\n' % (
        iso.settings.mode, iso.options.reserved_cpus, moved)


def _undo(conf: cfg.ConfigOpts) -> str:
    result = restore.undo(config.read(conf))
    if result.mode is None and not result.failures:
        return 'nothing to undo\n'
    if result.earlier_boot:
        return ('nothing to undo: isolation was applied before the last '
                'reboot, which undid it (its state file is removed)\n')
    text = '%s: %d restored, %d others released\n' % (
        result.mode, result.restored, result.others)
    if result.failures:
        raise BackendError('undo incomplete: %s' % '; '.join(
            result.failures))
    return text


AGENT_KEYS = ('state', 'earlier_boot', 'error', 'why', 'status_written',
              'status_age', 'status_stale', 'status_sweep_interval')


def _unknown(st: statusfile.Status) -> typing.Optional[str]:
    """Why ``st`` says less than it should (the state not read, the
    backend not asked or not read, or some units not), or None."""
    if st.get('state') == 'unknown':
        return 'isolation state unknown: %s' % st.get('error')
    if st.get('state') == 'applied' and 'mode' not in st:
        # Applied, but the configuration is refused (no systemctl and no
        # bus, say): nothing of the host was asked.
        return 'isolation is applied, but the host was not asked: %s' % (
            st.get('why') or 'no backend')
    if st.get('backend_error'):
        return str(st['backend_error'])
    slices = st.get('slices')
    unknown = st.get('units_unknown')
    if isinstance(slices, dict) and isinstance(unknown, int) and unknown:
        first = next((v['error'] for v in slices.values()
                      if isinstance(v, dict) and 'error' in v), '')
        return 'systemd answered for %d of %d units: %s' % (
            len(slices) - unknown, len(slices), first)
    return None


def _status(conf: cfg.ConfigOpts) -> common.CommandOutput:
    options = config.read(conf)
    st = report.status(options)
    agent = report.published(options)
    st['agent'] = typing.cast(statusfile.Status, {
        k: v for k, v in agent.items() if k in AGENT_KEYS})
    if conf.command.format == 'json':
        text = json.dumps(st, indent=1, sort_keys=True) + '\n'
    else:
        text = status_text(st)
    why = _unknown(st)
    if why:
        return text, 1, why
    return text


COMMANDS: dict[str, typing.Callable[[cfg.ConfigOpts],
                                   common.CommandOutput]] = {
    'apply': _apply, 'watch': _watch, 'undo': _undo, 'status': _status}


def _new_conf() -> cfg.ConfigOpts:
    conf = common.new_conf()
    conf.register_cli_opt(cfg.SubCommandOpt('command', handler=_add_parsers))
    return conf


def argument_parser() -> argparse.ArgumentParser:
    """The command line's parser, as ``main`` parses it
    (doc/source/cli/ is generated from it)."""
    return common.argument_parser(_new_conf(), PROG)


def main(argv: typing.Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    conf = _new_conf()
    try:
        confcheck.check_config_files(argv, common.PROJECT, PROG)
        common.parse(conf, argv, common.PROJECT, PROG)
        confcheck.check_known_options(conf)
        confcheck.validate_options(conf)
    except common.UsageError as exc:
        return common.error(PROG, exc, common.EXIT_USAGE)
    common.setup_logging(conf, PROG)
    return common.run(PROG, conf,
                      lambda: COMMANDS[conf.command.name](conf),
                      usage=(config.ConfigError,),
                      failed=(BackendError, state.StateError, OSError))


if __name__ == '__main__':
    sys.exit(main())
