"""Passes: read, plan, diff, apply, and who asks for them.

Rule: imports ``engine`` and ``host``; never ``isolation``,
``observe``, ``agent``, ``nova``, ``cmd``.

* ``reconciler``: one pass; ``coalescer``: bursts of requests into few
  passes, on one thread; ``passlock``: one pass at a time on the host;
  ``overcommit``: the overcommit file nova-compute writes and passes
  read.
"""
