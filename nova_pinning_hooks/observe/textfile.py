"""The textfile writer: the metrics for node_exporter's textfile collector.

After each pass, a long-lived process that runs passes counts it and,
with ``[nova_pinning] metrics_textfile`` set, rewrites the file
(``after_pass``).

Invariants:

* the textfile is replaced atomically (``safefs.write_atomic``), mode
  0644, in a directory reached without following links;
* ``after_pass`` never raises: a failure is one logged warning, the pass
  unaffected.
"""

import typing

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler


def write_textfile(path: str, text: str) -> None:
    """Replace ``path`` atomically with ``text``, mode 0644; raises
    ``OSError`` (``safefs.UnsafeFileError``) if it cannot be done
    safely. The directory must exist (node_exporter's)."""
    safefs.write_atomic(path, text.encode('utf-8'), mode=0o644,
                        create_dir=False)


def after_pass(rec: reconciler.Reconciler, conf: typing.Any,
               result: reconciler.PassResult, stats: passstats.PassStats,
               log: typing.Any) -> bool:
    """What nova-compute does after each pass: count it and, when
    ``[nova_pinning] metrics_textfile`` is set, write the textfile.
    Never raises: a failure is one logged warning, the pass unaffected.
    Returns True when the textfile was written."""
    try:
        stats.record(result)
        path = conf.nova_pinning.metrics_textfile
        if not path:
            return False
        view = metrics.read_view(rec, conf, plan=result.plan,
                                 settings=result.settings)
        write_textfile(path, metrics.exposition(view, stats))
        return True
    except Exception as exc:
        log.warning('nova-pinning-hooks: metrics not written: %s: %s',
                    type(exc).__name__, exc)
        return False
