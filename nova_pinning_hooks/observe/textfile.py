"""The textfile writer: the metrics for node_exporter's textfile collector.

After each pass, a long-lived process that runs passes counts it and,
with ``[nova_pinning] metrics_textfile`` set, rewrites the file
(``after_pass``).

Invariants:

* the textfile is replaced atomically (``safefs.write_atomic``), mode
  0644, in a directory reached without following links;
* ``after_pass`` never raises: a failure is one logged warning, the pass
  unaffected;
* ``written_by`` (``nova-pinning-status upgrade check``) reads a textfile
  only as a regular file of at most ``LIMIT`` bytes, never through a
  link: the release that wrote it is its ``nova_pinning_build_info``
  series' ``version`` label. The textfile's format is Prometheus' text
  exposition, with no version of its own; what a release changes in it
  is its series (``doc/source/admin/steal.rst``).
"""

import typing

from prometheus_client import parser as prom_parser

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.observe import settings as observe_settings


def write_textfile(path: str, text: str) -> None:
    """Replace ``path`` atomically with ``text``, mode 0644; raises
    ``OSError`` (``safefs.UnsafeFileError``) if it cannot be done
    safely. The directory must exist (node_exporter's)."""
    safefs.write_atomic(path, text.encode('utf-8'), mode=0o644,
                        create_dir=False)


def after_pass(rec: reconciler.Reconciler,
               observe: observe_settings.ObserveSettings,
               result: reconciler.PassResult, stats: passstats.PassStats,
               log: typing.Any) -> bool:
    """What nova-compute does after each pass: count it and, when
    ``[nova_pinning] metrics_textfile`` is set, write the textfile.
    Never raises: a failure is one logged warning, the pass unaffected.
    Returns True when the textfile was written."""
    try:
        stats.record(result)
        path = observe.metrics_textfile
        if not path:
            return False
        view = metrics.read_view(rec, observe, plan=result.plan,
                                 settings=result.settings)
        write_textfile(path, metrics.exposition(view, stats))
        return True
    except Exception as exc:
        log.warning('nova-pinning-hooks: metrics not written: %s: %s',
                    type(exc).__name__, exc)
        return False


LIMIT = 64 << 20  # bytes of a textfile read back (a host's series)
BUILD_INFO = metrics.PREFIX + 'build_info'


class TextfileError(ValueError):
    """Not a textfile of this package's: one line naming the file."""


def written_by(path: str) -> typing.Optional[str]:
    """The release that wrote the textfile at ``path`` (the ``version``
    of its ``nova_pinning_build_info``); None when it has no such
    series (not one of ours, or older than 1.0.0). ``FileNotFoundError``
    when there is none; ``OSError`` (``safefs.UnsafeFileError``) when it
    is not a small regular file; ``TextfileError`` when it is not a
    Prometheus text exposition."""
    data = safefs.read_file(path, LIMIT, 'metrics textfile')
    try:
        families = list(prom_parser.text_string_to_metric_families(
            data.decode('utf-8')))
    except (UnicodeDecodeError, ValueError, IndexError, KeyError) as exc:
        raise TextfileError('metrics textfile %s is not a Prometheus text '
                            'exposition: %s' % (
                                path, str(exc).splitlines()[0] if str(exc)
                                else type(exc).__name__)) from None
    for family in families:
        for sample in family.samples:
            if sample.name == BUILD_INFO and 'version' in sample.labels:
                return str(sample.labels['version'])
    return None
