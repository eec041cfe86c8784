"""What a long-lived process's passes say to nova's scheduler: the basis
of the last pass that planned (``engine.summary.Basis``), and its file.

Invariants:

* ``basis`` is computed from the last planning pass's snapshot and plan,
  once per plan (and pass time), on whichever thread asks (nova-compute's
  resource tracker); no libvirt call;
* with a ``summary_file`` (nova-compute's pass worker under eventlet),
  each pass that planned something new writes it there, atomically
  (``statefile.write_json``), and any pass once it is older than a
  quarter of ``summary_max_age``; a failure is one warning (the same
  failure again is not repeated), never the pass's;
* ``after_pass`` never raises.
"""

import typing

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.passes import reconciler


class PassSummary:
    """The basis of the last planning pass, and ``summary_file``."""

    def __init__(self, summary_file: typing.Optional[str],
                 summary_max_age: float, log: typing.Any) -> None:
        self.summary_file = summary_file
        self.refresh = summary_max_age / 4.0
        self.log = log
        # (the last result with a plan, its wall time) and the basis of
        # that plan, (plan, time, Basis); each replaced whole.
        self._planned: typing.Optional[tuple[reconciler.PassResult,
                                             float]] = None
        self._basis: typing.Optional[tuple[plan_mod.Plan, float,
                                           summary_mod.Basis]] = None
        # (what it said, time) last written to ``summary_file``; the
        # last error writing it
        self._written: typing.Optional[tuple[
            tuple[summary_mod.Summary, dict[str, summary_mod.Entry]],
            float]] = None
        self._error: typing.Optional[str] = None

    def after_pass(self, result: reconciler.PassResult, at: float) -> None:
        """On the pass thread, after each pass (``at``: its wall time)."""
        if result.plan is not None and result.snapshot is not None and \
                not result.dry_run and not result.release:
            self._planned = (result, at)
            if self.summary_file:
                self._write()

    def basis(self) -> typing.Optional[summary_mod.Basis]:
        """What the last pass that planned saw, for nova's scheduler
        (``summary.Basis``), or None before any did. Computed once per
        plan (and pass time); safe on any thread."""
        planned = self._planned
        if planned is None:
            return None
        result, at = planned
        cached = self._basis
        if cached is not None and cached[0] is result.plan and \
                cached[1] == at:
            return cached[2]
        # Both set together (``after_pass``).
        snap, plan = result.snapshot, result.plan
        assert snap is not None and plan is not None
        b = summary_mod.basis(snap.host, snap.guests, plan, snap.options,
                              at)
        self._basis = (plan, at, b)
        return b

    def _write(self) -> None:
        """The basis to ``summary_file`` when what it says changed, or
        the file's is getting old."""
        planned = self._planned
        path = self.summary_file
        if planned is None or not path:
            return
        at = planned[1]
        try:
            b = self.basis()
            assert b is not None  # ``_planned`` is set
            said = (b.summary._replace(at=0), b.entries)
            written = self._written
            if written is not None and written[0] == said and \
                    at - written[1] < self.refresh:
                return
            content = summary_mod.basis_to_json(b)
            if content['summary'] is None:
                raise ValueError('the host is beyond the summary\'s '
                                 'bounds (%d NUMA nodes)'
                                 % len(b.summary.nodes))
            statefile.write_json(path, content)
        except Exception as exc:
            message = '%s: %s' % (type(exc).__name__, exc)
            if message != self._error:
                self.log.warning('summary for nova\'s scheduler not '
                                 'written to %s: %s', path, message)
            self._error = message
            return
        self._written = (said, at)
        self._error = None
