#!/usr/bin/env python3
"""What another local user's flood of small D-Bus signals costs the
isolation agent (issue 60): the agent's real ``systemdbus.Bus`` on a
real UNIX socket, the unit tests' bus (``FakeDaemon``) playing the
system bus, which queues N signals of 96 bytes to the agent's
connection before the answer of one call (``LoadUnit``).

Usage (from the top of the repository, the package importable):
    python benchmarks/dbus_flood.py [--signals 0,100000,300000] [--runs 3]

Prints, for each N, the median over the runs of: the wall time of the
call, the CPU time the calling thread spent (``time.thread_time``: the
agent's own cost, not the fake bus's), and the reads it made. Run it
with another checkout first on ``PYTHONPATH`` to measure that code the
same way (the code before issue 60 has no ``_Stream``: reads are then
not counted).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_pinning_hooks.isolation import systemdbus  # noqa: E402
from tests.unit.isolation import test_systemdbus as t  # noqa: E402


def one(count, timeout):
    """(wall s, CPU s, reads) of one call after ``count`` signals."""
    with tempfile.TemporaryDirectory() as top:
        path = os.path.join(top, 'bus')
        flood = t.small_signals(count) if count else b''
        armed = []  # armed after the first call

        def forge(msg):
            # Before the call's answer only (not Hello's nor GetNameOwner's).
            if msg.header.fields.get(t.jeepney.HeaderFields.member) == \
                    'LoadUnit' and armed:
                return [armed.pop()]
            return []
        daemon = t.FakeDaemon(path, t.unit_path, forge=forge)
        daemon.start()
        reads = [0]
        stream = getattr(systemdbus, '_Stream', None)
        if stream is not None:
            real = stream._recv

            def recv(self, *args):
                reads[0] += 1
                return real(self, *args)
            stream._recv = recv
        bus = systemdbus.Bus(path, timeout=timeout)
        try:
            bus.call(t.load_unit(), 'o')  # connected, Hello and owner done
            armed[:] = [flood] if count else []
            reads[0] = 0
            wall, cpu = time.monotonic(), time.thread_time()
            bus.call(t.load_unit(), 'o')
            wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
        finally:
            bus.close()
            daemon.stop.set()
            daemon.join(10)
            if stream is not None:
                stream._recv = real
        return wall, cpu, reads[0] if stream is not None else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--signals', default='0,100000,300000')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--timeout', type=float, default=60.0)
    args = parser.parse_args()
    print('%10s %10s %10s %8s' % ('signals', 'wall s', 'CPU s', 'reads'))
    for count in map(int, args.signals.split(',')):
        runs = [one(count, args.timeout) for _ in range(args.runs)]
        reads = runs[0][2]
        print('%10d %10.3f %10.3f %8s' % (
            count, statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs),
            '-' if reads is None else reads))


if __name__ == '__main__':
    main()
