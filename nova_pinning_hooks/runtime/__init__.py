"""The long-lived binding runtime: one composition for every mode.

Rule: composes the layers below (host model, passes, their metrics);
imported by ``nova`` (nova-compute in native-thread mode) and ``cmd``
(``nova-pinning agent``, also the worker process nova-compute starts
when eventlet rules it).

* ``service``: ``BindingService``: model, events, coalescer, resync or
  periodic passes, vCPU count polls, metrics;
* ``settings``: every record of the configuration such a process needs
  (``RuntimeSettings``), read once.
"""
