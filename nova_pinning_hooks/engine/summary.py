"""The scheduler's view of a host: its plan summed up NUMA node by NUMA
node, and what the next pass would give one more guest there.

nova's scheduler chooses the host and the package binds on it, blind to
each other. A compute host reports a ``Summary`` of its last pass's plan
(``of_plan``) in its compute node's ``stats`` (``encode``: one compact
JSON text, ``KEY``); nova's scheduler reads it back (``decode``) and the
weigher asks ``forecast`` what the host's next pass would give a guest of
a flavor there (one-to-one, a node range, the cross-node range or the
host range, and who would lose one-to-one binding for it), and ``score``
turns that into a weight.

Per node the summary holds what the rules read: the node's pool pCPUs
(|P_n|), the vCPUs homed there (V_n, nova's own floating vCPUs
included), its memory and the memory of the guests homed there (a new
guest's home is chosen among the nodes its memory fits), and whether
guests nova placed float over it (then it is never one-to-one); for the
host, the cross-node vCPUs (V_X), the ratio, the vCPUs of every nova
domain the pass read (``seen``: what nova's resource tracker counts in
``vcpus_used``, so that the scheduler can tell the vCPUs placed since)
and the pass's wall time.

Invariants:

* pure: no I/O, no clock (the caller gives the pass's time), no nova;
* one source of rules: ``forecast`` applies ``policy.homes.choose_node``
  and ``policy.layout.decide_sizes``, the functions a pass applies; for
  a host whose guests' homes come from facts (memory, numatune), the
  forecast is the plan ``policy.make_plan`` makes with the guest added
  (``tests/unit/engine/test_summary.py`` checks it over random hosts);
  an arrived guest (migrated in, restored: ``policy.homes``) counts on
  the home its plan gives it, one-to-one there while the node has room,
  as the destination's next pass binds it, never as cross-node vCPUs for
  where qemu's incoming copy put its memory
  (``tests/unit/engine/test_arrivals.py``);
* bounded: at most ``MAX_NODES`` nodes, every number within
  ``MAX_COUNT``/``MAX_KIB``; ``encode`` gives at most ``MAX_TEXT``
  characters (about 60 a node) or None for a host beyond those bounds,
  and ``decode`` refuses anything else with ``SummaryError`` (one line);
* ``score`` lies in [-1, 1]: ``FIT_FLOOR`` to 1 when the guest would be
  one-to-one (the fuller its node then, the higher), 0 when nobody gains
  or loses one-to-one binding (and the neutral weight of a host without
  a summary), below 0 when guests already one-to-one would lose it, the
  more the lower.
"""

import json
import typing

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine.policy import homes as homes_mod
from nova_pinning_hooks.engine.policy import layout as layout_mod
from nova_pinning_hooks.engine.policy import options as options_mod
from nova_pinning_hooks.engine import strict
from nova_pinning_hooks.engine import topology

VERSION = 1
# A later version that readers of this one read correctly (its keys of
# version 1 unchanged, new ones added) says so under this key: the
# oldest version whose readers read it. Such a summary is read as this
# version; any other version is refused (the weigher is then neutral:
# nova's own weighers decide, as without the package). A version that
# readers of 1 would misread leaves out ``COMPAT_KEY``; it reaches the
# schedulers of this release as no summary: upgrade the schedulers
# first (doc/source/admin/upgrades.rst, "The weigher's summary").
COMPAT_KEY = 'c'
# The key of the compute node's stats (``ComputeNode.stats``).
KEY = 'nova_pinning_numa'
# ``encode`` writes the pass time first (``TIME_PREFIX``, digits, a
# comma): the rest of the text is the same for as long as the plan's
# counts are, which is what the weigher keys its decoded summaries by.
TIME_PREFIX = '{"t":'
MAX_NODES = 64
MAX_COUNT = 1 << 24  # pCPUs or vCPUs of one host, at most
MAX_KIB = 10 ** 15   # KiB of one node (topology.MAX_MEMORY)
MAX_TEXT = 4096      # characters of an encoded summary
# The weight of the worst loss (``score``): every one-to-one vCPU of
# the host lost.
LOSS_FLOOR = 0.2
# The weight of a one-to-one guest on an empty node (``score``): on a
# full one, 1.
FIT_FLOOR = 0.6


class SummaryError(ValueError):
    """A summary that cannot be read (one line)."""


class Node(typing.NamedTuple):
    """One NUMA node as the rules see it."""

    id: int
    pool: int        # |P_n|: pool pCPUs
    vcpus: int       # V_n: vCPUs homed here (nova's floating ones too)
    memory_kib: int  # the node's memory
    homed_kib: int   # memory of the managed guests homed here
    shared: bool     # guests nova placed float over it: never one-to-one


def _ratio(value: object) -> float:
    if not options_mod.ratio_ok(value):
        raise SummaryError('bad ratio %s' % strict.show(value))
    return float(typing.cast(float, value))


# Each field of ``policy.options.Rules`` on the wire: its key, and how a
# value is read (``SummaryError`` if bad). A field without a key fails
# ``tests/unit/engine/test_summary.py``; a field added is a new version,
# which readers of the last one may misread (``COMPAT_KEY``).
RULE_KEYS: dict[str, tuple[str, typing.Callable[[object], typing.Any]]] = {
    'ratio': ('r', _ratio),
}


class Summary(typing.NamedTuple):
    rules: options_mod.Rules  # what the counting rules read
    nodes: tuple[Node, ...]  # in node order
    cross: int  # V_X: cross-node vCPUs
    seen: int   # vCPUs of every nova domain read, running or not
    at: int     # the pass's wall time, seconds since the epoch

    @property
    def ratio(self) -> float:
        return self.rules.ratio

    @property
    def pool(self) -> int:
        return sum(n.pool for n in self.nodes)

    @property
    def one_to_one(self) -> int:
        """vCPUs one-to-one under this summary's layout."""
        return _layout(self.rules, self.nodes, self.cross)[1]

    def modes(self) -> dict[int, plan_mod.Mode]:
        """node -> how its guests are bound under this summary's layout
        (one-to-one, node range, host range; untouched: empty pool)."""
        layout = _layout(self.rules, self.nodes, self.cross)[0]
        return {n.id: layout.mode_of(n.id) for n in self.nodes}


class Forecast(typing.NamedTuple):
    """What the next pass would give one more guest."""

    mode: str  # plan_mod's: dedicated, node-range, ... or untouched
    home: typing.Optional[int]
    before: int  # one-to-one vCPUs of the host before it came
    after: int   # and after (its own included)
    vcpus: int   # the guest's
    pool: int    # the host's pool pCPUs
    home_vcpus: int = 0  # V_n of its home node, with it (0: no home)
    home_pool: int = 0   # |P_n| of its home node

    @property
    def lost(self) -> int:
        """One-to-one vCPUs other guests lose to it."""
        own = self.vcpus if self.mode == plan_mod.DEDICATED else 0
        return max(0, self.before - (self.after - own))


def of_plan(host: topology.HostTopology,
            guests: typing.Iterable[guest_mod.Guest], plan: plan_mod.Plan,
            options: options_mod.Options, at: float) -> Summary:
    """The summary of ``plan`` (``policy.make_plan`` of ``guests`` on
    ``host`` with ``options``), made at ``at`` (seconds)."""
    guests = list(guests)
    nova_nodes = layout_mod.nova_load(host, guests, plan.pool,
                                  options).nova_nodes
    by_uuid = {g.uuid: g for g in guests}
    homed = dict.fromkeys(host.nodes, 0)
    for gp in plan.guests:
        if gp.mode != plan_mod.UNTOUCHED and gp.home_node is not None:
            homed[gp.home_node] += by_uuid[gp.uuid].memory_kib
    nodes = tuple(Node(n, len(plan.pool_by_node.get(n, ())),
                       plan.node_vcpus.get(n, 0), node.memory_kib,
                       homed[n], n in nova_nodes)
                  for n, node in host.nodes.items())
    return Summary(options.rules(), nodes,
                   plan.cross_node_vcpus,
                   sum(g.vcpu_count for g in guests if g.nova), int(at))


# ``Entry.home`` of a guest that spans nodes (V_X), and of one that only
# counts in ``seen`` (not running, or placed by nova itself).
CROSS = -1
NO_LOAD = -2


class Entry(typing.NamedTuple):
    """What one nova guest adds to a summary (``entries``)."""

    vcpus: int
    home: int  # node id, CROSS or NO_LOAD
    memory_kib: int  # counted in the home's homed memory


def entries(guests: typing.Iterable[guest_mod.Guest], plan: plan_mod.Plan
            ) -> dict[str, Entry]:
    """uuid -> ``Entry`` of every nova guest of ``plan``: what ``without``
    takes out of the summary once nova no longer counts the guest on this
    host (deleted, migrated away), before the next pass saw it go."""
    plans = {gp.uuid: gp for gp in plan.guests}
    out = {}
    for g in guests:
        if not g.nova:
            continue
        gp = plans[g.uuid]
        # A managed guest on a host without a pool is untouched, but
        # counted (cross-node: no node without pool CPUs is a home).
        if gp.mode == plan_mod.UNTOUCHED and \
                gp.rule != plan_mod.Rule.EMPTY_POOL:
            home, kib = NO_LOAD, 0
        elif gp.home_node is None:
            home, kib = CROSS, 0
        else:
            home, kib = gp.home_node, g.memory_kib
        out[g.uuid] = Entry(g.vcpu_count, home, kib)
    return out


def without(summary: Summary, gone: typing.Iterable[Entry]) -> Summary:
    """``summary`` less the guests of ``gone``. A guest nova placed
    itself (``NO_LOAD``) stays in the nodes' counts (its pCPUs left the
    pool: only the next pass can tell), as does whatever would take a
    count below zero."""
    load = {n.id: [n.vcpus, n.homed_kib] for n in summary.nodes}
    cross, seen = summary.cross, summary.seen
    for e in gone:
        seen -= e.vcpus
        if e.home == CROSS:
            cross -= e.vcpus
        elif e.home in load:
            load[e.home][0] -= e.vcpus
            load[e.home][1] -= e.memory_kib
    return summary._replace(
        nodes=tuple(n._replace(vcpus=max(0, load[n.id][0]),
                               homed_kib=max(0, load[n.id][1]))
                    for n in summary.nodes),
        cross=max(0, cross), seen=max(0, seen))


class Basis(typing.NamedTuple):
    """What nova-compute reports from: the summary of the last pass's
    plan and each nova guest's part of it (``report``)."""

    summary: Summary
    entries: dict[str, Entry]  # uuid -> Entry, nova guests only


def basis(host: topology.HostTopology,
          guests: typing.Sequence[guest_mod.Guest], plan: plan_mod.Plan,
          options: options_mod.Options, at: float) -> Basis:
    """The ``Basis`` of a pass: ``of_plan`` and ``entries``."""
    return Basis(of_plan(host, guests, plan, options, at),
                 entries(guests, plan))


def report(b: Basis, tracked: typing.Optional[typing.Collection[str]]
           ) -> Summary:
    """The summary nova-compute reports: ``b`` less the guests nova's
    resource tracker no longer counts here (``tracked``: the uuids it
    counts; None or empty: it tells nothing, and nothing is taken out).
    The guests it counts that the pass did not see are the scheduler's
    to add (``vcpus_used`` above ``seen``: ``forecast``'s ``pending``)."""
    if not tracked:
        return b.summary
    return without(b.summary, [e for uuid, e in b.entries.items()
                               if uuid not in tracked])


# Guests a basis file may list (a host with more is not one-to-one).
MAX_GUESTS = 100000


def basis_to_json(b: Basis) -> dict[str, typing.Any]:
    """The basis file's content (the pass worker under eventlet writes
    it, nova-compute reads it: ``basis_from_json``)."""
    return {'version': VERSION, 'summary': encode(b.summary),
            'guests': {u: list(e) for u, e in b.entries.items()}}


def basis_from_json(data: object) -> Basis:
    """A ``Basis`` from ``basis_to_json``'s form; ``SummaryError`` if it
    is not one, within the bounds."""
    if not isinstance(data, dict) or data.get('version') != VERSION or \
            isinstance(data.get('version'), bool):
        raise SummaryError('not a version %d basis' % VERSION)
    s = decode(data.get('summary'))
    guests = data.get('guests')
    if not isinstance(guests, dict) or len(guests) > MAX_GUESTS:
        raise SummaryError('guests: an object of at most %d guests'
                           % MAX_GUESTS)
    nodes = {n.id for n in s.nodes}
    out = {}
    for uuid, row in guests.items():
        if not isinstance(row, list) or len(row) != 3 or \
                isinstance(row[1], bool) or not isinstance(row[1], int) or \
                (row[1] not in nodes and row[1] not in (CROSS, NO_LOAD)):
            raise SummaryError('bad guest %s' % strict.show(uuid))
        out[uuid] = Entry(_count(row[0], 'vcpus'), row[1],
                          _count(row[2], 'memory', MAX_KIB))
    return Basis(s, out)


def encode(summary: Summary) -> typing.Optional[str]:
    """The stats value: compact JSON, at most ``MAX_TEXT`` characters;
    None for a host beyond the bounds (no summary is better than one the
    scheduler refuses)."""
    if len(summary.nodes) > MAX_NODES:
        return None
    data: dict[str, object] = {'t': summary.at, 'v': VERSION}
    for name, (key, _) in RULE_KEYS.items():
        data[key] = getattr(summary.rules, name)
    text = json.dumps(dict(
        data, x=summary.cross, s=summary.seen,
        n=[[n.id, n.pool, n.vcpus, n.memory_kib, n.homed_kib,
            int(n.shared)] for n in summary.nodes]),
        separators=(',', ':'))
    try:
        decode(text)
    except SummaryError:
        return None
    return text


def _count(value: object, what: str, maximum: int = MAX_COUNT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or \
            not 0 <= value <= maximum:
        raise SummaryError('%s: %s is not a count of at most %d'
                           % (what, strict.show(value), maximum))
    return value


def decode(text: object) -> Summary:
    """The ``Summary`` of a stats value; ``SummaryError`` if it is not
    one this version reads, within its bounds."""
    if not isinstance(text, str):
        raise SummaryError('not text: %s' % strict.show(text))
    if len(text) > MAX_TEXT:
        raise SummaryError('longer than %d characters' % MAX_TEXT)
    try:
        data = strict.loads_json(text, 'summary', MAX_TEXT)
    except strict.InputError as exc:
        raise SummaryError(str(exc)) from None
    if not isinstance(data, dict) or not readable(data.get('v'),
                                                  data.get(COMPAT_KEY)):
        raise SummaryError('not a version %d summary' % VERSION)
    rules = {name: read(data.get(key))
             for name, (key, read) in RULE_KEYS.items()}
    rows = data.get('n')
    if not isinstance(rows, list) or not rows or len(rows) > MAX_NODES:
        raise SummaryError('nodes: a list of 1 to %d nodes' % MAX_NODES)
    nodes, last = [], -1
    for row in rows:
        if not isinstance(row, list) or len(row) != 6 or \
                row[5] not in (0, 1) or isinstance(row[5], bool):
            raise SummaryError('bad node %s' % strict.show(row))
        node = Node(_count(row[0], 'node id', topology.MAX_NODE_ID),
                    _count(row[1], 'pool'), _count(row[2], 'vcpus'),
                    _count(row[3], 'memory', MAX_KIB),
                    _count(row[4], 'homed memory', MAX_KIB),
                    bool(row[5]))
        if node.id <= last:
            raise SummaryError('nodes out of order')
        last = node.id
        nodes.append(node)
    at = data.get('t')
    if isinstance(at, bool) or not isinstance(at, int) or \
            not 0 <= at < 1 << 40:
        raise SummaryError('bad time %s' % strict.show(at))
    return Summary(options_mod.Rules(**rules), tuple(nodes),
                   _count(data.get('x'), 'cross'),
                   _count(data.get('s'), 'seen'), at)


def _version(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        1 <= value < 1 << 16


def readable(version: object, compat: object) -> bool:
    """Whether this release reads a summary of ``version`` that says
    its readers from ``compat`` on read it (``COMPAT_KEY``; None: not
    said). Every version up to this one is read (a rule's reader in
    ``RULE_KEYS`` gives an older version's value for a key it lacks)."""
    if _version(version) and typing.cast(int, version) <= VERSION:
        return True  # this version or one before it: its keys known
    return _version(version) and _version(compat) and \
        typing.cast(int, compat) <= VERSION < typing.cast(int, version)


def _totals(nodes: typing.Iterable[Node], load: typing.Mapping[int, int],
            cross: int) -> layout_mod.Totals:
    node_vcpus = {n.id: load[n.id] for n in nodes}
    return layout_mod.Totals(sum(node_vcpus.values()) + cross, node_vcpus,
                         cross, frozenset(n.id for n in nodes if n.shared))


def _layout(rules: options_mod.Rules, nodes: typing.Sequence[Node],
            cross: int,
            load: typing.Optional[typing.Mapping[int, int]] = None
            ) -> tuple[layout_mod.Layout, int]:
    """(layout, one-to-one vCPUs) of these counts."""
    load = load if load is not None else {n.id: n.vcpus for n in nodes}
    totals = _totals(nodes, load, cross)
    # One managed guest at least: a summary of no guest plans nobody, but
    # its counts are all zero, and one-to-one vCPUs are 0 either way.
    layout = layout_mod.decide_sizes(sum(n.pool for n in nodes),
                                 {n.id: n.pool for n in nodes}, rules,
                                 totals, 1)
    if layout.kind != layout_mod.Kind.NODES:
        return layout, 0
    return layout, sum(load[node] for node, mode in layout.modes
                       if mode == plan_mod.DEDICATED)


def forecast(summary: Summary, vcpus: int, memory_kib: int,
             pending: int = 0) -> Forecast:
    """What the host's next pass would give a guest of ``vcpus`` and
    ``memory_kib`` with no memory facts yet (a new guest: its home is
    chosen), after ``pending`` vCPUs nova placed on the host since the
    summary. Those are homed as one guest would be: the scheduler sees
    their sum (``vcpus_used``), not their guests, and the usual case, one
    guest since the last audit, is then exact; several count as the
    largest they could be (the host looks fuller on one node than it is,
    never emptier)."""
    rules, nodes = summary.rules, summary.nodes
    load = {n.id: n.vcpus for n in nodes}
    used = {n.id: n.homed_kib for n in nodes}
    rows = [(n.id, n.pool, n.memory_kib) for n in nodes]
    cross = summary.cross
    if pending > 0:
        node = homes_mod.choose_node(pending, 0, rows, load, used, rules)
        if node is None:
            cross += pending
        else:
            load[node] += pending
    before = _layout(rules, nodes, cross, load)[1]
    home = homes_mod.choose_node(vcpus, memory_kib, rows, load, used, rules)
    if home is None:
        cross += vcpus
    else:
        load[home] += vcpus
    layout, after = _layout(rules, nodes, cross, load)
    mode = layout.mode_of(home)
    home_pool = next((n.pool for n in nodes if n.id == home), 0)
    return Forecast(mode, home, before, after, vcpus, summary.pool,
                    load[home] if home is not None else 0, home_pool)


def score(f: Forecast) -> float:
    """The weight of a forecast, in [-1, 1]:

    * one-to-one: from ``FIT_FLOOR`` to 1 as its home node fills (the
      node's one-to-one vCPUs, its own included, over the node's pool):
      a guest that fits where little room is left keeps the larger
      holes for larger guests (best fit; ``benchmarks/fleet.py``: 100 %
      one-to-one at load 0.8 against 93 % without it);
    * 0: nobody gains or loses one-to-one binding (a node range or the
      host range that already were, an empty pool);
    * below 0: guests one-to-one before lose it, from -``LOSS_FLOOR`` for
      one vCPU to -1 when the host's whole pool was one-to-one.

    The three bands never overlap, so that with a multiplier large enough
    (``conf``'s default) the band decides and nova's own weighers choose
    within it."""
    if f.mode == plan_mod.DEDICATED:
        fill = min(1.0, f.home_vcpus / max(f.home_pool, 1))
        return FIT_FLOOR + (1 - FIT_FLOOR) * fill
    lost = f.lost
    if not lost:
        return 0.0
    return -min(1.0, LOSS_FLOOR + (1 - LOSS_FLOOR) * lost / max(f.pool, 1))
