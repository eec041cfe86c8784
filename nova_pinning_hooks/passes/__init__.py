"""Passes: read, plan, diff, apply, and who asks for them.

Rule: imports ``engine`` and ``host``; never ``isolation`` (its
sibling), ``observe``, ``runtime``, ``nova``, ``cmd``.

* ``reconciler``: one pass; ``coalescer``: bursts of requests into few
  passes, on one thread; ``passlock``: one pass at a time on the host;
  ``settings``: the ratio and CPU sets a pass reads (the option, or the
  overcommit file nova-compute writes), once a pass; ``hostport``: what
  a pass needs of the host (``PassHost``), the seam to ``host``.
"""
