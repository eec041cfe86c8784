"""nova-pinning-hooks: re-bind the vCPUs of a compute node's live guests.

One folder a layer, from the bottom up; a module imports only its own
layer and those below it (``tests/unit/test_layers.py``):

* ``engine``: the pure engine (no I/O, no clock);
* ``host``: this host: the libvirt adapter (``libvirtapi`` is the only
  module that imports libvirt), /proc and /sys, the files we keep;
* ``passes``: a pass (read, plan, diff, apply) and who asks for one;
* ``isolation``: keeping host processes off the guests' CPUs;
* ``observe``: metrics, the HTTP endpoint, the views;
* ``runtime``: the long-lived binding service (``nova-pinning agent``
  and nova-compute's passes);
* ``conf``: the options;
* ``nova`` (inside nova-compute) and ``cmd`` (the commands) on top.
"""
