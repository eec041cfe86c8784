"""The ``bind_numa_affinity`` hook: after an operation, ask for a pass.

Registered as a stevedore entry point in the ``nova.hooks`` namespace, as
the seed's design names it. ``post`` only queues a request with the
process's agent and returns: no libvirt call, no lock wait and no
exception reaches nova's thread.
"""

from oslo_log import log as logging

from nova_pinning_hooks.nova import agent

LOG = logging.getLogger(__name__)


class BindNumaAffinityHook:
    """Hook object: ``pre`` does nothing, ``post`` requests a pass."""

    def pre(self, *args, **kwargs):
        return None

    def post(self, rv, *args, **kwargs):
        try:
            agent.request_pass('hook')
        except Exception:  # never into nova
            LOG.exception('nova-pinning-hooks: could not request a pass')
