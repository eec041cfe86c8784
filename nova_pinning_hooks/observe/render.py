"""Tables for people: the CPU map of a plan, node by node.

Each node is drawn as a grid, one column per core and one row per
hyperthread, so an operator sees at a glance which guest holds which pCPU
and which pCPUs are shared. Pure: returns text.
"""

import string
import typing

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.engine import topology

KEYS = string.ascii_lowercase + string.ascii_uppercase + string.digits
MARK_NOT_POOL = '#'
MARK_FREE = '.'
MARK_NOVA = 'N'
RANGE_MARKS = {plan_mod.NODE_RANGE: '~', plan_mod.CROSS_NODE_RANGE: '+',
               plan_mod.HOST_RANGE: '='}
COLUMNS = 16  # cores per grid row: keeps lines under 80 characters
# Characters that would move the cursor or start a new line on a
# terminal: C0 and C1 controls, DEL, and Unicode's line and paragraph
# separators. libvirt accepts them in a domain name (``&#10;``), and a
# name printed raw forged a row in ``status`` and ``top``.
_CONTROL = {c: '\\x%02x' % c for c in list(range(0x20)) +
            list(range(0x7f, 0xa0))}
_CONTROL.update({0x2028: '\\u2028', 0x2029: '\\u2029',
                 ord('\\'): '\\\\'})


def printable(text: str) -> str:
    """``text`` for a table people read: control characters (and the
    backslash) escaped, so one name stays one cell of one row."""
    return text.translate(_CONTROL)


def plan_table(p: plan_mod.Plan, host: topology.HostTopology,
               guests: typing.Iterable[guest_mod.Guest],
               change_list: typing.Iterable[plan_mod.PinChange] = (),
               title: typing.Optional[str] = None) -> str:
    """The plan as text; ``change_list`` marks guests whose pins differ."""
    lines = []
    if title:
        lines.append(title)
    keys = _keys(p)
    owner = _owners(p, keys, guests)
    lines.append(_summary(p, host))
    if host.l3_ignored:
        lines.append('L3 cache banks ignored (one domain per node): %s'
                     % host.l3_ignored)
    for node_id, node in host.nodes.items():
        lines.append('')
        lines.extend(_node(p, host, node_id, node, owner))
    lines.append('')
    lines.append('legend: %s not in pool   %s free   %s nova-placed   '
                 '%s node range   %s cross-node range   %s host range'
                 % (MARK_NOT_POOL, MARK_FREE, MARK_NOVA,
                    RANGE_MARKS[plan_mod.NODE_RANGE],
                    RANGE_MARKS[plan_mod.CROSS_NODE_RANGE],
                    RANGE_MARKS[plan_mod.HOST_RANGE]))
    lines.append('')
    lines.extend(_guest_rows(p, keys, change_list))
    return '\n'.join(lines) + '\n'


def _by_name(p: plan_mod.Plan) -> list[plan_mod.GuestPlan]:
    return sorted(p.guests, key=lambda gp: (gp.name, gp.uuid))


def _keys(p: plan_mod.Plan) -> dict[str, str]:
    keys: dict[str, str] = {}
    i = 0
    for gp in _by_name(p):
        if gp.mode == plan_mod.DEDICATED:
            keys[gp.uuid] = KEYS[i] if i < len(KEYS) else '*'
            i += 1
    return keys


def _owners(p: plan_mod.Plan, keys: typing.Mapping[str, str],
            guests: typing.Iterable[guest_mod.Guest]) -> dict[int, str]:
    """pCPU -> mark: the one-to-one guest's key or a range mark."""
    owner: dict[int, str] = {}
    for g in guests:
        if g.active and g.nova_placed:
            # Outside the pool: a one-CPU pin of nova's that stayed in
            # it is a shared-policy guest's (policy.guest_pool).
            for cpu in g.exclusive_cpus() - p.pool:
                owner[cpu] = MARK_NOVA
    for gp in p.guests:
        if gp.mode == plan_mod.DEDICATED:
            for cpus in gp.vcpu_pins.values():
                for cpu in cpus:
                    owner[cpu] = keys[gp.uuid]
        elif gp.mode in RANGE_MARKS:
            for cpu in gp.emulator_pin or ():
                owner.setdefault(cpu, RANGE_MARKS[gp.mode])
    return owner


def _summary(p: plan_mod.Plan, host: topology.HostTopology) -> str:
    allocatable = len(p.pool) * p.allocation_ratio
    return ('host: %d online pCPUs in %d NUMA node(s); guest pool %d pCPUs '
            '(%s); ratio %g; %d managed vCPUs of %g allocatable; '
            '%d cross-node' % (len(host.cpus), len(host.nodes), len(p.pool),
                               cpuset.format(p.pool) or 'empty',
                               p.allocation_ratio, p.total_vcpus,
                               allocatable, p.cross_node_vcpus))


def _node(p: plan_mod.Plan, host: topology.HostTopology, node_id: int,
          node: topology.Node, owner: typing.Mapping[int, str]
          ) -> list[str]:
    pool = p.pool_by_node.get(node_id, frozenset())
    v_n = p.node_vcpus.get(node_id, 0)
    modes = sorted({gp.mode for gp in p.guests
                    if gp.home_node == node_id and
                    gp.mode != plan_mod.UNTOUCHED})
    head = ('node %d: %d pCPUs, pool %d (%s), %d single-node vCPUs%s'
            % (node_id, len(node.cpus), len(pool),
               cpuset.format(pool) or 'empty', v_n,
               ', ' + '/'.join(modes) if modes else ''))
    out = [head]
    cores = host.cores(node.cpus)
    if not cores:
        out.append('  (no online CPU; memory %d MiB)'
                   % (node.memory_kib // 1024))
        return out
    threads = max(len(c) for c in cores)
    domains = host.l3_domains(node.cpus) if host.l3_of else []
    if len(domains) > 1:
        # Cores grouped by L3 domain (cache banks): one grid each.
        for domain in domains:
            out.append('  L3 %s' % cpuset.format(domain))
            out.extend(_grid(host.cores(domain), threads, pool, owner))
        return out
    out.extend(_grid(cores, threads, pool, owner))
    return out


def _grid(cores: typing.Sequence[frozenset[int]], threads: int,
          pool: typing.AbstractSet[int], owner: typing.Mapping[int, str]
          ) -> list[str]:
    out = []
    for start in range(0, len(cores), COLUMNS):
        chunk = cores[start:start + COLUMNS]
        out.append('  core  ' + ''.join('%4d' % min(c) for c in chunk))
        for t in range(threads):
            cells = []
            for core in chunk:
                members = sorted(core)
                if t >= len(members):
                    cells.append('    ')
                    continue
                cpu = members[t]
                mark = owner.get(cpu)
                if mark is None:
                    mark = MARK_FREE if cpu in pool else MARK_NOT_POOL
                cells.append('%4s' % mark)
            out.append('  thr%-2d ' % t + ''.join(cells))
    return out


def _guest_rows(p: plan_mod.Plan, keys: typing.Mapping[str, str],
                change_list: typing.Iterable[plan_mod.PinChange]
                ) -> list[str]:
    pending = plan_mod.pending_pins(change_list)
    rows = [('key', 'guest', 'mode', 'home', 'vCPUs', 'pins', 'live',
             'rule: reason')]
    apart = p.emulator_threads != emuthreads.Setting.GUEST
    for gp in _by_name(p):
        rows.append((
            keys.get(gp.uuid, RANGE_MARKS.get(gp.mode, '-')),
            printable(gp.name), gp.mode,
            '-' if gp.home_node is None else
            '%d(%s)' % (gp.home_node, gp.home_source),
            str(len(gp.vcpu_pins)) if gp.vcpu_pins else '-',
            pins_text(gp) + (emulator_text(gp) if apart else ''),
            '-' if gp.mode == plan_mod.UNTOUCHED else
            ('%d to change' % pending[gp.uuid] if gp.uuid in pending
             else 'ok'),
            '%s: %s' % (gp.rule, gp.reason) +
            ('; %s: %s' % (gp.emulator_rule, gp.emulator_reason)
             if apart and gp.mode == plan_mod.DEDICATED else '')))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ['  '.join(cell.ljust(w) for cell, w in zip(r, widths)) + '  ' +
            r[-1] for r in rows]


def pins_text(gp: plan_mod.GuestPlan) -> str:
    if gp.mode == plan_mod.UNTOUCHED:
        return '-'
    if gp.mode == plan_mod.DEDICATED:
        return ' '.join('%d:%s' % (v, cpuset.format(c))
                        for v, c in gp.vcpu_pins.items())
    return 'all:' + cpuset.format(gp.emulator_pin)


def emulator_text(gp: plan_mod.GuestPlan) -> str:
    """Where a one-to-one guest's emulator and I/O threads run, after
    its vCPU pins (``emulator_threads = shared``); the other modes put
    them with the vCPUs, as ``all:`` says."""
    if gp.mode != plan_mod.DEDICATED:
        return ''
    return ' emu:' + cpuset.format(gp.emulator_pin)


def summary_lines(s: summary_mod.Summary, text: str) -> list[str]:
    """``nova-pinning status``'s view of what the host reports to nova's
    scheduler: the summary ``s`` and its stats value ``text``."""
    modes = s.modes()
    total = sum(n.vcpus for n in s.nodes) + s.cross
    lines = ['scheduler summary (compute node stats %s, %d characters): '
             '%d of %d vCPUs one-to-one, %d cross-node, ratio %g' % (
                 summary_mod.KEY, len(text), s.one_to_one, total, s.cross,
                 s.ratio)]
    for n in s.nodes:
        lines.append('  node %d: pool %d pCPUs, %d vCPUs homed (%s)%s, '
                     '%.1f of %.1f GiB homed' % (
                         n.id, n.pool, n.vcpus, modes[n.id],
                         ', guests nova placed float over it'
                         if n.shared else '', n.homed_kib / 1048576.0,
                         n.memory_kib / 1048576.0))
    lines.append('  reported as: %s' % printable(text))
    return lines
