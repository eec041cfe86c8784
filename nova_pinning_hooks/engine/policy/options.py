"""The policy's options: what a plan is made with, and their check.

Invariants:

* ``Options`` is frozen: a plan's inputs cannot change under it;
* ``validate`` is the one check of options against a host's topology:
  the ratio (``ratio_ok``), the CPU sets (every CPU online on the host),
  ``foreign_domains`` and ``emulator_threads``; every plan entry point
  calls it first, and it raises ``PolicyError`` alone;
* ``EPSILON`` is the one tolerance the rules compare a ratio product
  with, so a count exactly at pool x ratio fits wherever it is compared.
"""

import dataclasses
import math
import typing

from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import names
from nova_pinning_hooks.engine import topology

EPSILON = 1e-9

# nova sets no upper bound; ours keeps every product with a CPU count a
# finite float (an int ratio of 400 digits overflows one).
MAX_RATIO = 1e6


class PolicyError(ValueError):
    """Inputs the policy refuses (bad ratio, CPU sets outside the host)."""


class ForeignDomains(names.Name):
    """``[nova_pinning] foreign_domains``: what the policy does with
    live domains nova did not create."""
    MANAGE = 'manage'
    IGNORE = 'ignore'


class Rules(typing.NamedTuple):
    """What the counting rules read besides the counts: the stages the
    scheduler's forecast applies as a pass does (``homes.choose_node``,
    ``layout.decide_sizes``) take this record, never ``Options``, and a
    summary carries it (``summary.Summary.rules``: each field on the wire
    under its ``summary.RULE_KEYS`` key). An option one of them reads is
    a field here."""
    ratio: float  # allocation_ratio


@dataclasses.dataclass(frozen=True)
class Options:
    allocation_ratio: float
    reserved_cpus: typing.Optional[frozenset[int]] = None
    # nova's cpu_shared_set
    shared_cpus: typing.Optional[frozenset[int]] = None
    # nova's cpu_dedicated_set
    dedicated_cpus: typing.Optional[frozenset[int]] = None
    foreign_domains: str = ForeignDomains.MANAGE
    home_node_min_fraction: float = 0.9
    set_home_node: bool = False  # emit numa nodesets for chosen homes
    # ``emuthreads``; the engine's default plans as before the option,
    # the configuration's (conf.py) is SHARED.
    emulator_threads: str = emuthreads.Setting.GUEST

    def rules(self) -> Rules:
        """What the counting rules read of these options."""
        return Rules(float(self.allocation_ratio))


def ratio_ok(ratio: object) -> bool:
    """A number > 0 and at most ``MAX_RATIO`` (not a bool, not NaN)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        return False
    try:
        value = float(ratio)
    except OverflowError:
        return False
    return math.isfinite(value) and 0 < value <= MAX_RATIO


def validate(host: topology.HostTopology, options: Options) -> None:
    ratio = options.allocation_ratio
    if not ratio_ok(ratio):
        raise PolicyError('allocation ratio must be a number > 0 and at '
                          'most %g, not %.32r' % (MAX_RATIO, ratio))
    for what in ('reserved_cpus', 'shared_cpus', 'dedicated_cpus'):
        cpus = getattr(options, what)
        if cpus is not None and not cpus <= host.cpus:
            raise PolicyError('%s names CPUs the host does not have online: '
                              '%s' % (what, sorted(cpus - host.cpus)))
    try:
        ForeignDomains.check('foreign_domains', options.foreign_domains)
        emuthreads.Setting.check('emulator_threads',
                                 options.emulator_threads)
    except ValueError as exc:
        raise PolicyError(str(exc)) from None
