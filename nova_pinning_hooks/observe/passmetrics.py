"""The metrics of a long-lived process that runs passes (nova-compute's
pass thread, the ``nova-pinning agent`` worker): its pass counters
(``passstats``), the textfile written after each of its passes
(``textfile``) and, when asked, its HTTP endpoint (``endpoint``).

Invariants: handed the records it needs (``settings.PassSettings`` for
the endpoint's own reconciler, ``settings.ObserveSettings``), never the
configuration; ``after_pass`` never raises.
"""

import typing

from nova_pinning_hooks.observe import endpoint as endpoint_mod
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.observe import textfile
from nova_pinning_hooks.passes import hostport
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.observe import settings as observe_settings
from nova_pinning_hooks.passes import settings as settings_mod


class PassMetrics:
    """The pass counters of one long-lived process, the textfile written
    after each of its passes (``textfile.after_pass``) and, with ``listen``
    (``(address, port)``), its HTTP endpoint (``start_endpoint``)."""

    def __init__(self, passes: settings_mod.PassSettings,
                 observe: observe_settings.ObserveSettings,
                 log: typing.Any) -> None:
        self.passes, self.observe, self.log = passes, observe, log
        self.stats = passstats.PassStats()
        self.endpoint: typing.Optional[endpoint_mod.Endpoint] = None

    def after_pass(self, rec: reconciler.Reconciler,
                   result: reconciler.PassResult) -> bool:
        """Never raises (see ``textfile.after_pass``)."""
        return textfile.after_pass(rec, self.observe, result, self.stats,
                                   self.log)

    def start_endpoint(self, listen: tuple[str, int],
                       connect: typing.Optional[hostport.Connect] = None
                       ) -> endpoint_mod.Endpoint:
        """Serve the metrics with these pass counters on ``listen``;
        raises ``OSError`` if it cannot be bound."""
        address, port = listen
        if self.observe.metrics_textfile:
            self.log.warning(
                'nova-pinning-hooks: metrics served on %s port %d and '
                'written to %s: scrape one of them, not both (every '
                'series would be there twice)', address, port,
                self.observe.metrics_textfile)
        self.endpoint = endpoint_mod.Endpoint(
            self.passes, self.observe, self.stats, address, port,
            connect=connect).start()
        self.log.info('nova-pinning-hooks: metrics on http://%s:%d/metrics',
                      address, port)
        return self.endpoint

    def close(self) -> None:
        endpoint, self.endpoint = self.endpoint, None
        if endpoint is not None:
            endpoint.close()
