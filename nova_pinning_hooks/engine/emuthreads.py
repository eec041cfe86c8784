"""Where a managed guest's emulator and I/O threads run.

``[nova_pinning] emulator_threads`` chooses the rule for one-to-one
guests; every other mode keeps the rule of the seed:

* ``guest``: the emulator thread and the IOThreads (and with them the
  vhost workers, which run in the emulator's cgroup) run on the pCPUs of
  the guest's own vCPUs. A one-to-one guest then pays for its own disk
  and network requests with its own vCPUs' time: it shows as steal.
* ``shared``: a one-to-one guest's emulator and I/O threads float over
  the pCPUs of its home node's pool that no one-to-one vCPU holds (the
  pCPUs the node range and cross-node guests may use too). When every
  pool pCPU of the node holds a one-to-one vCPU, they float over the
  node's whole pool (``FALLBACK``): every pin stays in the guest pool P
  (reserved CPUs are the host daemons', sized for them, and may be
  unset; nova's ``cpu_shared_set`` already bounds P), stays on the home
  node with the guest's memory, and the emulator's work is spread over
  the node's one-to-one vCPUs instead of falling on the guest's own.

Invariants:

* pure: no I/O; the answer depends only on the setting, the guest's mode,
  its vCPUs' pCPUs, its home node's pool and the pCPUs one-to-one vCPUs
  hold on that node. ``policy`` plans a one-to-one node's guests
  together, so ``replan`` (which plans a one-to-one node again whenever
  its guests change) keeps the answer up to date;
* every answer lies in the guest pool: the vCPUs' pCPUs, or a part of
  the home node's pool;
* with ``guest`` the answer is the vCPUs' pCPUs, for every mode, as it
  was before the option existed: plans stay what they were;
* reasons name the rule and the node, never a count (``policy``'s rule
  for reasons, which ``replan`` relies on).
"""

import typing

from nova_pinning_hooks.engine import names


class Setting(names.Name):
    """``[nova_pinning] emulator_threads``."""
    GUEST = 'guest'
    SHARED = 'shared'


class Rule(names.Name):
    """Why the threads are where they are (``GuestPlan.emulator_rule``)."""
    WITH_VCPUS = 'with-vcpus'
    POOL_FREE = 'pool-free'
    FALLBACK = 'node-pool-fallback'


class Placement(typing.NamedTuple):
    """The pCPUs of a guest's emulator and I/O threads, and why."""

    cpus: frozenset[int]
    rule: Rule
    reason: str


_WITH_VCPUS: dict[str, tuple[Rule, str]] = {
    Setting.GUEST: (Rule.WITH_VCPUS, 'emulator and I/O threads follow the '
                    'vCPUs (emulator_threads = guest)'),
    Setting.SHARED: (Rule.WITH_VCPUS, 'emulator and I/O threads share the '
                     'guest\'s range, as its vCPUs do'),
}


def with_vcpus(setting: str) -> tuple[Rule, str]:
    """(rule, reason) of a guest whose emulator and I/O threads run on
    its vCPUs' pCPUs: every guest with ``guest``, the range guests with
    ``shared``. One lookup: a host range of thousands of guests asks it
    for each."""
    try:
        return _WITH_VCPUS[setting]
    except KeyError:
        Setting.check('emulator_threads', setting)
        raise


def place(setting: str, one_to_one: bool, vcpu_cpus: frozenset[int],
          node: typing.Optional[int] = None,
          node_pool: typing.Collection[int] = (),
          held: typing.Iterable[int] = ()) -> Placement:
    """The ``Placement`` of a guest's emulator and I/O threads.

    ``setting``: ``guest`` or ``shared``; ``one_to_one``: the guest is
    bound one-to-one (then ``node`` is its home node, ``node_pool`` that
    node's pool and ``held`` the pCPUs of the node that one-to-one vCPUs
    hold, the guest's own included); ``vcpu_cpus``: the pCPUs of the
    guest's vCPUs (its range, or the union of its one-to-one pCPUs).
    """
    why = with_vcpus(setting)
    if setting == Setting.GUEST or not one_to_one:
        return Placement(vcpu_cpus, *why)
    home = typing.cast(int, node)  # one-to-one: always given
    free = frozenset(node_pool).difference(held)
    if free:
        return Placement(free, Rule.POOL_FREE,
                         'emulator and I/O threads on the pCPUs of node '
                         '%d\'s pool that no one-to-one vCPU holds' % home)
    return Placement(frozenset(node_pool), Rule.FALLBACK,
                     'emulator and I/O threads on node %d\'s pool: every '
                     'pCPU of it holds a one-to-one vCPU' % home)
