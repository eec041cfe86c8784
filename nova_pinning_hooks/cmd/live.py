"""The live sub-commands of ``nova-pinning``: snapshot, status, rebind.

Thin callers of the reconciler; each one reads the host once.
"""

import json

from nova_pinning_hooks.cmd import pinning
from nova_pinning_hooks import cpuset
from nova_pinning_hooks import plan as plan_mod
from nova_pinning_hooks import reconciler
from nova_pinning_hooks import render
from nova_pinning_hooks import snapshot as snapshot_mod


def _reconciler(conf):
    uri = getattr(conf.command, 'connection', None)
    if uri:
        conf.set_override('connection_uri', uri, group='nova_pinning')
    return reconciler.Reconciler(conf)


def _guard(func):
    """Turn the failures an operator can fix into one-line errors."""
    def wrapper(conf, **kwargs):
        try:
            return func(conf, **kwargs)
        except (reconciler.SettingsError, snapshot_mod.SnapshotError) as exc:
            raise pinning.UsageError(str(exc)) from None
        except Exception as exc:
            if type(exc).__name__ == 'libvirtError':
                raise pinning.UsageError('libvirt: %s' % exc) from None
            raise
    return wrapper


@_guard
def cmd_snapshot(conf):
    rec = _reconciler(conf)
    try:
        return json.dumps(rec.read(), indent=1) + '\n'
    finally:
        rec.close()


def _isolation_status(conf):
    """The host isolation agent's view, if that part is installed."""
    try:
        from nova_pinning_hooks import isolation
        return isolation.status(conf)
    except Exception as exc:  # isolation is optional for binding
        return {'error': '%s: %s' % (type(exc).__name__, exc)}


@_guard
def cmd_status(conf):
    rec = _reconciler(conf)
    try:
        snap, p, changes = rec.plan()
    finally:
        rec.close()
    iso = _isolation_status(conf)
    if conf.command.format == 'json':
        data = plan_mod.to_json(p, changes)
        pending = {c.uuid for c in changes if c.kind != 'numa'}
        for entry in data['guests']:
            entry['live_matches_plan'] = (entry['mode'] == 'untouched' or
                                          entry['uuid'] not in pending)
        data['isolation'] = iso
        return json.dumps(data, indent=1, default=str) + '\n'
    text = render.plan_table(p, snap.host, snap.guests, changes,
                             title='status of %s' %
                             conf.nova_pinning.connection_uri)
    return text + '\n' + _isolation_text(iso)


def _isolation_text(iso):
    if not isinstance(iso, dict):
        return 'host isolation: %s\n' % (iso,)
    if 'error' in iso:
        return 'host isolation: unknown (%s)\n' % iso['error']
    parts = ['%s=%s' % (k, v) for k, v in sorted(iso.items())
             if not isinstance(v, (dict, list))]
    return 'host isolation: %s\n' % ', '.join(parts)


@_guard
def cmd_rebind(conf, release=False):
    rec = _reconciler(conf)
    try:
        result = rec.run_pass(dry_run=conf.command.dry_run,
                              log_errors=False, release=release)
    finally:
        rec.close()
    if result.error:
        raise pinning.UsageError('pass failed: %s' % result.error)
    lines = []
    skipped = {id(c) for c, _ in result.skipped if not isinstance(c, str)}
    for c in result.changes:
        state = 'would set' if result.dry_run else (
            'skipped' if id(c) in skipped else 'set')
        what = c.kind if c.index is None else '%s %d' % (c.kind, c.index)
        lines.append('%-9s %s %s: %s -> %s' % (
            state, c.name, what,
            'unpinned' if c.old is None else cpuset.format(c.old),
            cpuset.format(c.new)))
    for item, why in result.skipped:
        name = item if isinstance(item, str) else item.name
        lines.append('skipped   %s: %s' % (name, why))
    lines.append('%d changes, %d applied, %d skipped; libvirt calls: '
                 '%d reads, %d writes; %.3f s%s' % (
                     len(result.changes), len(result.applied),
                     len(result.skipped), result.calls.get('read', 0),
                     result.calls.get('write', 0), result.seconds,
                     ' (dry run)' if result.dry_run else ''))
    return '\n'.join(lines) + '\n'


def cmd_release(conf):
    """Undo the binding of every managed guest, in one locked pass."""
    return cmd_rebind(conf, release=True)
