"""The long-lived binding agent (``nova-pinning agent``).

Rule: composes the layers below (host model, passes, their metrics);
imported only by ``cmd`` (and run, as a worker process, by ``nova``).

* ``service``: ``BindingService``: model, events, coalescer, resync,
  vCPU count polls, metrics.
"""
