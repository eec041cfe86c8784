"""The HTTP endpoint of the metrics: ``/metrics`` served from this host.

``serve`` and ``server`` (``nova-pinning exporter``) serve the host's
series read at each scrape (``metrics.LiveCollector``); ``Endpoint`` is
that of a process that runs passes, with its pass counters. The HTTP
itself (bounds, addresses) is ``httpserve``'s.

Invariants:

* a scrape of an ``Endpoint`` goes through a reconciler of the
  endpoint's own (its own libvirt connection): a scrape never waits for
  a pass, nor a pass for a scrape;
* the server is bounded by ``[nova_pinning] metrics_max_requests``,
  ``metrics_max_requests_per_peer`` and ``metrics_read_timeout``
  (``observe.settings.ObserveSettings``, handed in: never the
  configuration).
"""

import threading
import typing

from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import hostport
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.observe import settings as observe_settings
from nova_pinning_hooks.passes import settings as settings_mod


def server(rec: reconciler.Reconciler,
           observe: observe_settings.ObserveSettings, address: str,
           port: int, stats: typing.Optional[passstats.PassStats] = None
           ) -> httpserve.MetricsServer:
    """A ``httpserve.MetricsServer`` of the host's metrics (and of
    ``stats``) on ``address``:``port``, bounded by ``[nova_pinning]
    metrics_max_requests``, ``metrics_max_requests_per_peer`` and
    ``metrics_read_timeout``, not started.
    Raises ``OSError`` if the address cannot be bound."""
    return httpserve.MetricsServer(
        address, port, metrics.LiveCollector(rec, observe, stats).render,
        max_requests=observe.metrics_max_requests,
        read_timeout=observe.metrics_read_timeout,
        max_per_peer=observe.metrics_max_requests_per_peer)


def serve(rec: reconciler.Reconciler,
          observe: observe_settings.ObserveSettings, address: str,
          port: int, stop: threading.Event) -> None:
    """Serve ``/metrics`` on ``address``:``port`` until ``stop`` (an
    Event) is set. Raises ``OSError`` if the address cannot be bound."""
    server(rec, observe, address, port).serve_forever(stop)


class Endpoint:
    """The HTTP endpoint of a process that runs passes: the host's
    series read at each scrape through a reconciler of its own (its own
    libvirt connection: a scrape never waits for a pass, nor a pass for
    a scrape), with the process's pass counters."""

    def __init__(self, passes: settings_mod.PassSettings,
                 observe: observe_settings.ObserveSettings,
                 stats: typing.Optional[passstats.PassStats], address: str,
                 port: int,
                 connect: typing.Optional[hostport.Connect] = None) -> None:
        self.rec = reconciler.Reconciler(passes, connect=connect)
        try:
            self.http = server(self.rec, observe, address, port, stats)
        except Exception:
            self.rec.close()
            raise
        self.address = self.http.address

    def start(self) -> 'Endpoint':
        self.http.start()
        return self

    def close(self) -> None:
        self.http.close()
        self.rec.close()
