"""What the binding shows: metrics, the HTTP endpoint, the views.

Rule: imports the layers below (``engine``, ``host``, ``passes``,
``isolation``); never ``runtime``, ``nova``, ``cmd``. Reading for a view
never writes to libvirt.

* ``metrics``: the Prometheus collectors and exposition;
  ``passstats``: the pass counters of a process; ``textfile``: the
  textfile written after each pass; ``endpoint``: ``/metrics`` over
  HTTP, on ``httpserve``, concurrent scrapes sharing one read
  (``singleflight``); ``passmetrics``: the three together for a
  process that runs passes; ``passsummary``: what its passes say to
  nova's scheduler (the last plan's summary, and its file);
* ``render``: the plan as a table; ``stealview``: steal per guest and
  node for ``nova-pinning top``; ``version``: the package's version as
  installed; ``settings``: the metrics' record of the configuration.
"""
