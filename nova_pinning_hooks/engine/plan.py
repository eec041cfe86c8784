"""The plan of a pass, and its diff against the pins in force.

A ``Plan`` says, for every guest the pass saw, how its threads should be
bound. ``changes`` turns a plan into the list of ``PinChange`` the adapter
applies: exactly the pins that differ, nothing else, so a second pass over
an unchanged host yields an empty list and makes no libvirt write.
"""

import dataclasses
import typing

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import names
from nova_pinning_hooks.engine import topology



class Mode(names.Name):
    """How a guest's threads are bound (``GuestPlan.mode``): the JSON of
    a plan and the metrics' labels carry the value."""
    DEDICATED = 'dedicated'  # one-to-one: one pCPU a vCPU
    NODE_RANGE = 'node-range'
    CROSS_NODE_RANGE = 'cross-node-range'
    HOST_RANGE = 'host-range'
    UNTOUCHED = 'untouched'
    RELEASED = 'released'  # only in release plans: back on nova's own CPUs


class HomeSource(names.Name):
    """Where a guest's home node came from (``GuestPlan.home_source``)."""
    MEMORY = 'memory'  # where its memory is
    NUMATUNE = 'numatune'  # its memory policy's nodeset
    PINS = 'pins'  # where its vCPUs are pinned
    CHOSEN = 'chosen'  # chosen by the policy (no fact yet)
    # arrived (migrated in, restored) with its memory split where qemu's
    # incoming copy put it: the node with most of it if it has room,
    # else chosen as for a new guest (``policy.homes``)
    ARRIVED = 'arrived'
    NONE = 'none'  # no home (untouched, or memory on several nodes)


class Rule(names.Name):
    """Which rule made a guest's plan (``GuestPlan.rule``): the seed's
    rules (doc/source/reference/policy.rst) and why a guest is left
    untouched or released."""
    NOT_RUNNING = 'not-running'
    NOVA_PLACED = 'nova-placed'
    FOREIGN = 'foreign'  # foreign_domains = ignore
    NO_VCPUS = 'no-vcpus'
    EMPTY_POOL = 'empty-pool'
    HOST_OVERSUBSCRIBED = 'rule-1-host-range'
    NODE_OVERSUBSCRIBED = 'rule-2-host-range'
    CROSS_OVERSUBSCRIBED = 'rule-3-host-range'
    ONE_TO_ONE = 'rule-2-one-to-one'
    NODE_RANGE = 'rule-2-node-range'
    CROSS_NODE_RANGE = 'rule-3'
    RELEASE = 'release'  # nova-pinning release: back on nova's CPUs


# The short names the rules and the views compare with.
DEDICATED = Mode.DEDICATED
NODE_RANGE = Mode.NODE_RANGE
CROSS_NODE_RANGE = Mode.CROSS_NODE_RANGE
HOST_RANGE = Mode.HOST_RANGE
UNTOUCHED = Mode.UNTOUCHED
RELEASED = Mode.RELEASED

# Modes in which every vCPU of a guest is pinned to one set of pCPUs, its
# emulator's (``GuestPlan``).
SHARED = frozenset((NODE_RANGE, CROSS_NODE_RANGE, HOST_RANGE, RELEASED))


class GuestPlan(typing.NamedTuple):
    """How one guest's threads are to be bound. In the ``SHARED`` modes
    every vCPU pin is the emulator pin; ``dedicated``: one pCPU each."""

    uuid: str
    name: str
    mode: Mode
    home_node: typing.Optional[int]
    home_source: HomeSource
    vcpu_pins: dict[int, frozenset[int]]  # vCPU -> its CPUs; {} untouched
    emulator_pin: typing.Optional[frozenset[int]]  # None when untouched
    iothread_pins: dict[int, frozenset[int]]  # iothread id -> its CPUs
    rule: Rule
    reason: str
    # Node ids to set (home node chosen)
    numa_nodeset: typing.Optional[frozenset[int]] = None
    # Why the emulator and I/O threads are on ``emulator_pin``
    # (``emuthreads``); None when untouched or released.
    emulator_rule: typing.Optional[emuthreads.Rule] = None
    emulator_reason: typing.Optional[str] = None


class ChangeKind(names.Name):
    """What a ``PinChange`` writes: a vCPU's pin, the emulator's, an
    IOThread's, or the memory nodeset.

    Each kind carries its facts: ``thread_pin``, whether it pins a
    thread's CPUs (counted as a pin change, and pending until written)
    or sets something else (the memory nodeset). The libvirt call that
    writes each kind is ``host.virtwrite.WRITES``'s (the engine does not
    know libvirt).
    """
    _value_: str
    thread_pin: bool

    def __new__(cls, value: str, thread_pin: bool) -> 'ChangeKind':
        kind = str.__new__(cls, value)
        kind._value_ = value
        kind.thread_pin = thread_pin
        return kind

    VCPU = ('vcpu', True)
    EMULATOR = ('emulator', True)
    IOTHREAD = ('iothread', True)
    NUMA = ('numa', False)


class PinChange(typing.NamedTuple):
    uuid: str
    name: str
    kind: ChangeKind
    # vCPU or iothread id; None for emulator and numa. The name shadows
    # tuple.index, but plans and snapshots are read by it.
    index: typing.Optional[int]  # type: ignore[assignment]
    old: typing.Optional[frozenset[int]]  # None: unpinned
    new: frozenset[int]


@dataclasses.dataclass(frozen=True)
class Plan:
    # in the order the guests were given
    guests: tuple[GuestPlan, ...]
    pool: frozenset[int]  # the guest pool P
    pool_by_node: dict[int, frozenset[int]]  # node id -> P_n
    allocation_ratio: float
    total_vcpus: int  # vCPUs of managed guests
    # node id -> V_n (single-node managed guests)
    node_vcpus: dict[int, int]
    cross_node_vcpus: int  # V_X
    # ``[nova_pinning] emulator_threads``: ``guest`` plans print as they
    # did before the option (no ``emulator_threads`` fields).
    emulator_threads: str = emuthreads.Setting.GUEST


def changes(plan: Plan, guests: typing.Iterable[guest_mod.Guest],
            enforced: typing.Optional[typing.Mapping[
                str, typing.Mapping[int, frozenset[int]]]] = None,
            pairs: typing.Optional[typing.Iterable[
                tuple[GuestPlan, guest_mod.Guest]]] = None
            ) -> list[PinChange]:
    """The pin writes that turn the guests' current pins into ``plan``.

    ``guests`` are the ``Guest`` objects the plan was made from (matched by
    uuid). Untouched guests yield nothing. A pin the guest does not have
    (``None``, unpinned) differs from any planned set.

    ``pairs``: the (GuestPlan, Guest) to compare when only those can
    differ (an incremental plan's scope, ``replan``); by default every
    guest of the plan.

    ``enforced``: {uuid: {vCPU: frozenset}}, where the kernel lets each
    vCPU thread run. A vCPU whose libvirt pin already matches the plan
    but whose thread the kernel runs elsewhere (its cgroup changed behind
    libvirt's back) is written again, with the kernel's set as ``old``.
    """
    if pairs is None:
        by_uuid = {g.uuid: g for g in guests}
        pairs = [(gp, by_uuid[gp.uuid]) for gp in plan.guests]
    enforced = enforced or {}
    result = []
    # Comparing two host-wide sets walks hundreds of CPUs, and a full host
    # compares the same two objects thousands of times (one pool, one
    # parsed text shared by every guest): each pair is compared once.
    known: dict[tuple[int, int], bool] = {}

    def differ(a: typing.Optional[frozenset[int]],
               b: typing.Optional[frozenset[int]]) -> bool:
        if a is b:
            return False
        if a is None or b is None:  # unpinned
            return True
        key = (id(a), id(b))
        found = known.get(key)
        if found is None:
            found = known[key] = a != b
        return found
    change = PinChange
    for gp, guest in pairs:
        if gp.mode == UNTOUCHED:
            continue
        uuid, name = gp.uuid, gp.name
        kernel = enforced.get(uuid)
        pins, default = guest.vcpu_pins, guest.default_cpuset
        for vcpu, new in gp.vcpu_pins.items():
            old = pins.get(vcpu, default)
            if differ(old, new):
                result.append(change(uuid, name, ChangeKind.VCPU, vcpu,
                                     old, new))
            elif kernel and differ(kernel.get(vcpu, new), new):
                result.append(change(uuid, name, ChangeKind.VCPU, vcpu,
                                     kernel[vcpu], new))
        if gp.emulator_pin is not None and \
                differ(guest.emulator_pin, gp.emulator_pin):
            result.append(change(uuid, name, ChangeKind.EMULATOR, None,
                                 guest.emulator_pin, gp.emulator_pin))
        for thread, new in gp.iothread_pins.items():
            old = guest.iothread_pins.get(thread)
            if differ(old, new):
                result.append(change(uuid, name, ChangeKind.IOTHREAD,
                                     thread, old, new))
        if gp.numa_nodeset is not None and \
                guest.numa_nodeset != gp.numa_nodeset:
            result.append(change(uuid, name, ChangeKind.NUMA, None,
                                 guest.numa_nodeset, gp.numa_nodeset))
    return result


def pin_changes(change_list: typing.Iterable[PinChange]) -> int:
    """How many of ``change_list`` are thread pins (not memory policy)."""
    return sum(1 for c in change_list if c.kind.thread_pin)


def pending_pins(change_list: typing.Iterable[PinChange]) -> dict[str, int]:
    """uuid -> how many thread pins of the guest ``change_list`` has yet
    to write, in the order of its first one: a guest here does not run
    where its plan says (a memory nodeset alone does not count)."""
    pending: dict[str, int] = {}
    for c in change_list:
        if c.kind.thread_pin:
            pending[c.uuid] = pending.get(c.uuid, 0) + 1
    return pending


def to_json(plan: Plan, change_list: typing.Iterable[PinChange],
            host: typing.Optional[topology.HostTopology] = None
            ) -> dict[str, typing.Any]:
    """The documented JSON form of a plan (``plan --format json``).
    With the ``host`` and its L3 banks, each guest also gets
    ``l3_domains``: the L3 domains its pins touch (a host without banks
    gives exactly the form it gave before banks were read)."""
    fmt = cpuset.format
    banks = host is not None and bool(host.l3_of)
    shared = plan.emulator_threads != emuthreads.Setting.GUEST
    # A thousand host-range guests share one pin set: its L3 domains
    # (a walk over every pCPU, and a format of each domain) once.
    l3_text: dict[frozenset[int], list[str]] = {}
    guests = []
    for gp in plan.guests:
        pins = gp.vcpu_pins
        if gp.mode in SHARED:  # every vCPU on the emulator's set
            vcpu_pins = dict.fromkeys(map(str, pins), fmt(gp.emulator_pin))
        else:
            vcpu_pins = {str(v): fmt(c) for v, c in pins.items()}
        entry: dict[str, object] = {
            'uuid': gp.uuid, 'name': gp.name, 'mode': gp.mode,
            'home_node': gp.home_node, 'home_source': gp.home_source,
            'vcpu_pins': vcpu_pins,
            'emulator_pin': (fmt(gp.emulator_pin)
                             if gp.emulator_pin is not None else None),
            'iothread_pins': {str(t): fmt(c)
                              for t, c in gp.iothread_pins.items()},
            'rule': gp.rule, 'reason': gp.reason,
        }
        if gp.numa_nodeset is not None:
            entry['numa_nodeset'] = fmt(gp.numa_nodeset)
        if shared and gp.emulator_rule is not None:
            entry['emulator_threads'] = {'rule': gp.emulator_rule,
                                         'reason': gp.emulator_reason}
        if banks:
            cpus = gp.emulator_pin or frozenset()
            if shared and gp.mode == DEDICATED:  # its vCPUs' pCPUs
                cpus = frozenset().union(*pins.values())
            text = l3_text.get(cpus)
            if text is None:
                assert host is not None  # ``banks``: a host with banks
                text = l3_text[cpus] = [fmt(d) for d in host.l3_domains(
                    cpus)]
            entry['l3_domains'] = list(text)
        guests.append(entry)
    result = {
        'version': 1,
        'guests': guests,
        'changes': pin_changes(change_list),
        'pool': fmt(plan.pool),
        'pool_by_node': {str(n): fmt(c)
                         for n, c in plan.pool_by_node.items()},
        'allocation_ratio': plan.allocation_ratio,
        'total_vcpus': plan.total_vcpus,
        'node_vcpus': {str(n): v for n, v in plan.node_vcpus.items()},
        'cross_node_vcpus': plan.cross_node_vcpus,
    }
    if shared:
        result['emulator_threads'] = plan.emulator_threads
    return result
