"""The engine: what the binding decides, from data alone.

Rule: no I/O, no clock, no threads. A module here imports only other
modules of ``engine`` and the standard library's pure modules (parsing,
data classes, arithmetic); it never imports a higher layer, libvirt,
nova or oslo. Its tests are tables.

* ``cpuset``: CPU list text and sets; ``topology``: the host's NUMA nodes,
  cores and L3 banks from libvirt's capabilities XML; ``guest``: a
  guest from its domain XML;
* ``policy``: the binding rules (pool, home node, one-to-one, node
  range, host range) and ``make_plan``, a module a decision stage
  (options, homes, layout, placement, make); ``assign``: the one-to-one
  assignment; ``plan``: a plan, its pin changes and its JSON;
  ``replan``: planning again only what changed; ``emuthreads``: where a
  guest's emulator and I/O threads run; ``hostsettings``: the ratio and
  CPU sets a plan takes from outside libvirt; ``names``: the base of
  the model's value sets (str Enums);
* ``summary``: a plan summed up NUMA node by NUMA node for nova's
  scheduler, and what the next pass would give one more guest
  (``forecast``, ``score``: the one-to-one weigher's); ``hostchoice``:
  how the weigher weighs the candidate hosts of one request;
* ``snapshot``: the snapshot format ``nova-pinning plan`` reads;
  ``strict``: strict JSON; ``migratexml``: nova's migration XML without
  our pins; ``steal``: steal rates from two samples of vCPU counters;
  ``cpumask``: the kernel's hexadecimal CPU masks (and systemd's byte
  masks) as sets.
"""
