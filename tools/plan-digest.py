#!/usr/bin/env python3
"""Every plan the plan command prints over the fixtures, to compare two
trees byte for byte (a refactoring must not change one plan).

    .tox/py3/bin/python tools/plan-digest.py TREE OUT  # writes OUT
    cmp before.txt after.txt

``TREE`` is a checkout of this repository (the one whose code plans);
the snapshots are built by this file's copy of the repository, so both
trees plan exactly the same input. For every host of tests/unit/hosts
(``ALL`` and ``BANKED``: the capabilities of tests/data/hosts and the
built ones), a seeded set of guests (some
pinned, some with memory on two nodes, an iothread or two) at two fills
(0.6 of the CPUs at ratio 4, 1.5 at ratio 2: one-to-one, node ranges,
host ranges), and the example snapshot of etc/examples, it runs
``python -m nova_pinning_hooks.cmd.pinning plan --snapshot F --format
json`` and ``--format table`` as a process, with ``[nova_pinning]
emulator_threads`` ``guest`` and then ``shared``, with ``TREE`` first on
``PYTHONPATH``. OUT holds every output in order, each after a header
line; stdout has one sha256 a run and one for all.
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, TOP)

from nova_pinning_hooks.engine import topology  # noqa: E402
from tests.unit import hosts  # noqa: E402

EXAMPLES = os.path.join(TOP, 'etc', 'examples')


def _guests(name, caps, fill, rnd):
    """Domain entries of a snapshot: about ``fill`` times the host's
    CPUs in vCPUs."""
    host = topology.HostTopology.from_capabilities(caps)
    cpus = sorted(host.cpus)
    nodes = [str(n) for n in host.nodes]
    domains, total, i = [], 0, 0
    while total < fill * len(cpus):
        vcpus = rnd.choice([1, 2, 2, 4, 8])
        pins = ({v: str(rnd.choice(cpus)) for v in range(vcpus)}
                if rnd.random() < 0.2 else None)
        mem = {rnd.choice(nodes): 1048576}
        if rnd.random() < 0.1 and len(nodes) > 1:
            mem = dict.fromkeys(rnd.sample(nodes, 2), 524288)
        xml = hosts.domain_xml(
            '%s-%d' % (name, i), vcpus, uuid='%s-%04d' % (name, i),
            pins=pins, iothreads=rnd.choice([0, 0, 0, 1, 2]))
        domains.append({'xml': xml, 'active': True,
                        'memory_by_node_kib': mem})
        total += vcpus
        i += 1
    return domains


def snapshots(where):
    """(label, name) of every snapshot planned, written under ``where``
    (the plan's title names the file: the same name in every run)."""
    out = []
    for name in hosts.ALL + hosts.BANKED:
        caps = hosts.load(name)
        for fill, ratio in ((0.6, 4.0), (1.5, 2.0)):
            # Seeded: the same guests in every run (not for secrets).
            rnd = random.Random('%s %s' % (name, fill))  # noqa: S311
            data = {'version': 1, 'capabilities': caps,
                    'allocation_ratio': ratio, 'reserved_cpus': None,
                    'shared_cpus': None, 'dedicated_cpus': None,
                    'domains': _guests(name, caps, fill, rnd)}
            path = '%s-%s.json' % (name, fill)
            with open(os.path.join(where, path), 'w') as f:
                json.dump(data, f)
            out.append(('%s fill %s ratio %s' % (name, fill, ratio), path))
    for name in sorted(os.listdir(EXAMPLES)):
        if name.endswith('.snapshot.json'):
            with open(os.path.join(EXAMPLES, name)) as src, \
                    open(os.path.join(where, name), 'w') as dst:
                dst.write(src.read())
            out.append((name, name))
    return out


def main(argv):
    if len(argv) != 3:
        sys.stderr.write('usage: plan-digest.py TREE OUT\n')
        return 2
    tree, out_path = os.path.abspath(argv[1]), argv[2]
    env = dict(os.environ, PYTHONPATH=tree)
    whole = hashlib.sha256()
    broken = 0
    with tempfile.TemporaryDirectory() as tmp, open(out_path, 'w') as out:
        for mode in ('guest', 'shared'):
            conf = os.path.join(tmp, '%s.conf' % mode)
            with open(conf, 'w') as f:
                f.write('[nova_pinning]\nemulator_threads = %s\n' % mode)
            for label, path in snapshots(tmp):
                for fmt in ('json', 'table'):
                    run = subprocess.run(
                        [sys.executable, '-m',
                         'nova_pinning_hooks.cmd.pinning', '--config-file',
                         conf, 'plan', '--snapshot', path, '--format', fmt],
                        env=env, cwd=tmp, capture_output=True, text=True,
                        timeout=300)
                    head = '== %s, emulator_threads %s, %s: exit %d\n' % (
                        label, mode, fmt, run.returncode)
                    text = head + run.stdout + run.stderr
                    out.write(text)
                    broken += 'Traceback (most recent call last)' in text
                    whole.update(text.encode())
                    print('%s  %s' % (hashlib.sha256(
                        text.encode()).hexdigest()[:16], head.strip()))
    print('%s  all' % whole.hexdigest())
    if broken:
        # A tree that cannot plan at all (run by a Python without the
        # package's requirements: oslo.config ...) prints the same
        # traceback before and after: two equal files would prove nothing.
        sys.stderr.write('plan-digest.py: %d of the runs failed with a '
                         'traceback (run me with a Python that has the '
                         "package's requirements, e.g. .tox/py3/bin/python)"
                         '\n' % broken)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
