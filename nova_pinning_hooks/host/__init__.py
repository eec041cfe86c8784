"""This host: libvirt, /proc, /sys and the files the package keeps.

Rule: the only layer that touches libvirt, /proc and /sys (besides
``isolation``, which places the host's own processes). It may import
``engine``; never a higher layer. Exactly one module imports libvirt
(``libvirtapi``), and the tests swap it there.

* the libvirt adapter: ``libvirtapi`` (libvirt itself, its error codes,
  the clock, qemu's pid), ``virt`` (``Host``: the connection, the time
  bound of every call, events), ``virtread`` (what it reads) and
  ``virtwrite`` (what it writes); ``model``: the host model libvirt's
  events keep current; ``timedcall`` and ``hung``: bounded calls and
  daemons that do not answer;
* the kernel's facts: ``qemuproc`` (a qemu's threads, affinity,
  schedstat; the one reader of vCPU affinity), ``qemuproof`` (that a
  pid is that guest's qemu here), ``memplace`` (a guest's memory per
  NUMA node), ``procfs`` (any process: its status, cgroups, threads,
  parents);
* files: ``safefs`` (writing as root safely), ``statefile`` (the JSON
  state files), ``overcommitfile`` (the overcommit file's format: nova's
  ratio and CPU sets, written by ``nova.ratiofile``).
"""
