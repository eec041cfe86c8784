"""The switch: an oslo.messaging notification driver that activates us.

nova-compute loads the notification drivers named in its configuration
(``[oslo_messaging_notifications] driver``, a list) while it parses that
configuration at start-up, before it creates its ComputeManager. Naming
``nova_pinning`` there is all an operator does to switch the package on
in an unmodified nova-compute; removing it switches it off.

The driver's ``__init__`` activates the package, in nova-compute only
(other nova services sharing nova.conf load it too and ignore it). Its
``notify`` does nothing: the hook points do the work. It never raises.

nova builds it before it sets up logging, so the package's records from
activation on are held (``earlylog``) and written to nova-compute's log
as soon as nova's logging is set up.
"""

from oslo_log import log as logging

from nova_pinning_hooks.nova import agent
from nova_pinning_hooks.nova import earlylog

LOG = logging.getLogger(__name__)


class ActivationDriver:
    """oslo.messaging.notify.drivers entry point ``nova_pinning``."""

    def __init__(self, conf, topics=None, transport=None):
        self.conf = conf
        if not agent.in_nova_compute():
            LOG.debug('nova-pinning-hooks: not nova-compute; inactive')
            return
        earlylog.hold()
        try:
            agent.activate(conf)
        except Exception:
            LOG.exception('nova-pinning-hooks: activation failed; nova '
                          'runs on without it')

    def notify(self, ctxt, message, priority, retry):
        return None
