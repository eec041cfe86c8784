"""The metrics' configuration edge: ``[nova_pinning]`` (and the
isolation state file's path) read once into ``ObserveSettings``.

Invariant: frozen; the metrics (``textfile``, ``endpoint``, ``metrics``)
are handed it, never ``conf``.
"""

import dataclasses
import typing

from oslo_config import cfg


@dataclasses.dataclass(frozen=True)
class ObserveSettings:
    """What the metrics need of the configuration."""

    metrics_textfile: typing.Optional[str]
    metrics_listen: typing.Optional[str]
    metrics_max_requests: int
    metrics_read_timeout: float
    metrics_max_requests_per_peer: int
    # [nova_pinning_isolation] state_file: where the isolation agent
    # publishes its status
    isolation_state_file: str


def read(conf: cfg.ConfigOpts) -> ObserveSettings:
    """The metrics' record, from ``conf``."""
    group = conf.nova_pinning
    return ObserveSettings(
        metrics_textfile=group.metrics_textfile or None,
        metrics_listen=group.metrics_listen or None,
        metrics_max_requests=group.metrics_max_requests,
        metrics_read_timeout=group.metrics_read_timeout,
        metrics_max_requests_per_peer=group.metrics_max_requests_per_peer,
        isolation_state_file=conf.nova_pinning_isolation.state_file)
