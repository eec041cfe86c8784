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

The option is a list, and deployment tools merge configuration by
replacing an option's values: an override that names only
``nova_pinning`` silently drops ``messagingv2``, and with it every
notification other services (ceilometer, designate, ...) consumed. So at
activation one line names the other drivers configured beside ours, or
says that there are none.
"""

import typing

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import earlylog

LOG = logging.getLogger(__name__)
DRIVER_NAME = 'nova_pinning'  # setup.cfg's entry point


class ActivationDriver:
    """oslo.messaging.notify.drivers entry point ``nova_pinning``."""

    def __init__(self, conf: cfg.ConfigOpts,
                 topics: typing.Optional[list[str]] = None,
                 transport: typing.Any = None) -> None:
        self.conf = conf
        if not activation.in_nova_compute():
            LOG.debug('nova-pinning-hooks: not nova-compute; inactive')
            return
        earlylog.hold()
        try:
            activation.activate(conf)
        except Exception:
            LOG.exception('nova-pinning-hooks: activation failed; nova '
                          'runs on without it')
        others = other_drivers(conf)
        if others:
            LOG.info("nova-pinning-hooks: nova's notifications from this "
                     'compute also go to the notification drivers: %s',
                     ', '.join(others))
        else:
            LOG.info('nova-pinning-hooks: other notification drivers: '
                     "none: no other service receives nova's notifications "
                     'from this compute')

    def notify(self, ctxt: typing.Any, message: dict[str, typing.Any],
               priority: str, retry: typing.Optional[int]) -> None:
        return None


def other_drivers(conf: cfg.ConfigOpts) -> list[str]:
    """The notification drivers configured beside ours (``noop`` sends
    nothing, so it is none)."""
    try:
        names = conf.oslo_messaging_notifications.driver
    except Exception:  # not registered (not oslo.messaging's Notifier)
        return []
    return [n for n in names or () if n not in (DRIVER_NAME, 'noop')]
