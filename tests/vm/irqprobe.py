"""Run inside the VM: the kernel's view of interrupts and unbound work.

Prints one JSON document on stdout, read from /proc and /sys only:

    python3 irqprobe.py            # {"irqs": {N: {"name", "allowed",
                                   #   "effective", "count"}},
                                   #  "workqueue": mask}
    python3 irqprobe.py banned     # adds "banned": irqbalance's banned
                                   # CPUs (its "setup" answer; up to 10 s)
"""

import json
import os
import sys


def _read(path):
    with open(path) as f:
        return f.read().strip()


def irqs():
    lines = _read('/proc/interrupts').splitlines()
    ncpus = len(lines[0].split())
    names, count = {}, {}
    for line in lines[1:]:
        n, _, rest = line.partition(':')
        if n.strip().isdigit():
            names[n.strip()] = rest.split()[-1]
            count[n.strip()] = sum(int(c) for c in rest.split()[:ncpus])
    result = {}
    for n, name in names.items():
        d = '/proc/irq/%s' % n
        try:
            result[n] = {'name': name, 'count': count[n],
                         'allowed': _read(d + '/smp_affinity_list'),
                         'effective': _read(d + '/effective_affinity_list')}
        except OSError:
            continue
    return result


def main(argv):
    out = {'irqs': irqs(),
           'workqueue': _read('/sys/devices/virtual/workqueue/cpumask')}
    if argv[1:] == ['banned']:
        from nova_pinning_hooks.engine import cpuset
        from nova_pinning_hooks.isolation.kernel import irqbalance
        p = irqbalance.find()
        out['banned'] = None if p is None else cpuset.format(
            irqbalance.banned(irqbalance.socket_path(p.pid)))
    json.dump(out, sys.stdout)
    return 0


if __name__ == '__main__':
    os.environ.setdefault('LC_ALL', 'C')
    sys.exit(main(sys.argv))
