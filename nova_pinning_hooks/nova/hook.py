"""The ``bind_numa_affinity`` hook: after an operation, ask for a pass.

Registered as a stevedore entry point in the ``nova.hooks`` namespace, as
the seed's design names it. ``post`` only queues a request with the
process's agent and returns: no libvirt call, no lock wait and no
exception reaches nova's thread.
"""

import typing

from oslo_log import log as logging

from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import earlylog
from nova_pinning_hooks.nova import hooks

LOG = logging.getLogger(__name__)


class BindNumaAffinityHook:
    """Hook object: ``pre`` does nothing, ``post`` requests a pass."""

    def pre(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        return None

    def post(self, rv: typing.Any, *args: typing.Any,
             **kwargs: typing.Any) -> None:
        earlylog.release()  # the activation lines, if still held
        try:
            method = hooks.current_function() or 'hook'
            host = getattr(args[0], 'host', None) if args else None
            activation.request_pass(method, host=host)
        except Exception:  # never into nova
            LOG.exception('nova-pinning-hooks: could not request a pass')


class AllocationRatioHook:
    """Hook object on the virt driver's ``update_provider_tree``: after
    nova set the node's inventory (with the VCPU allocation ratio that
    placement holds, or nova's configured one), hand the ratio to the
    agent. Reads nova's in-memory provider tree only: no call to
    placement, no file or libvirt access on nova's thread."""

    def pre(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        return None

    def post(self, rv: typing.Any, *args: typing.Any,
             **kwargs: typing.Any) -> None:
        earlylog.release()
        try:
            # nova's ProviderTree (None would fail below, and be logged).
            tree: typing.Any = (args[1] if len(args) > 1
                                else kwargs.get('provider_tree'))
            node = args[2] if len(args) > 2 else kwargs.get('nodename')
            inventory = tree.data(node).inventory.get('VCPU') or {}
            ratio = inventory.get('allocation_ratio')
            if ratio is not None:
                activation.note_allocation_ratio(ratio, node)
        except Exception:  # never into nova
            LOG.exception('nova-pinning-hooks: could not read the VCPU '
                          'allocation ratio from the provider tree')


class NodeSummaryHook:
    """Hook object on the resource tracker's ``_update`` (every claim,
    usage update and periodic audit, just before nova saves the compute
    node): ``pre`` puts the package's summary of its plan in the node's
    stats for nova's scheduler (``nodesummary``). In memory, or one small
    file read under eventlet; never raises into nova."""

    def pre(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        try:
            tracker = args[0] if args else None
            node = args[2] if len(args) > 2 else kwargs.get('compute_node')
            activation.report_summary(node, getattr(
                tracker, 'tracked_instances', None))
        except Exception:  # never into nova
            LOG.exception('nova-pinning-hooks: could not report the '
                          'summary to nova\'s scheduler')

    def post(self, rv: typing.Any, *args: typing.Any,
             **kwargs: typing.Any) -> None:
        return None
