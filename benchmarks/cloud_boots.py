"""Parallel boots through nova's API, with the package on and off (seed
000's study, in a real cloud): N guests asked for at once, the time until
all are ACTIVE, and, with the package on, each guest's time from ACTIVE
(first seen so by polling the API: the listing that showed it was sent
then; nova's ``launched_at`` has whole seconds only) to pinned.

When a guest was pinned is its first pin event: libvirt's tunable event
(``cputune.vcpupin*``, ``cputune.emulatorpin``), which libvirt sends once
the pin is in the kernel, received on the script's own connection to
each compute's libvirtd (late by at most the event's trip; the package
never unpins a running guest, later events re-pin it as the node fills).
Once all are ACTIVE the kernel is asked once per guest: its live XML
holds our ``<emulatorpin>`` and each vCPU thread's ``Cpus_allowed_list``
is its pin. Nothing polls libvirt or /proc during a burst, so the
measurement loads both modes alike (an earlier version checked every
guest every 0.1 s, with the package on only). With the package off, any
pin event of a burst's guest is reported.

Runs against tools/cloud.sh's cloud, in its virtualenv (openstacksdk,
libvirt-python), as root::

    /var/cache/nova-pinning-hooks/cloud/venv-34/bin/python \\
        benchmarks/cloud_boots.py --sizes 10 20 --rounds 3

The package is switched with ``tools/cloud.sh package on|off`` (the
operator's way: the driver line, nova-computes restarted and waited for
until each serves its RPC queue); on and off take turns within each
round, the first of each round alternating. The VCPU allocation ratio
in placement is raised for the run (20 one-vCPU guests do not fit 2 + 1
CPUs at 4.0) and put back after.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import libvirt
import openstack

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
sys.path.insert(0, TOP)
from tests.cloud import kernel  # noqa: E402  (the kernel's view, shared)

STATE = kernel.STATE
PREFIX = 'nph-bench-'


def cloud(*args):
    subprocess.run([os.path.join(TOP, 'tools', 'cloud.sh')] + list(args),
                   check=True, capture_output=True, text=True, timeout=600)


def pinned(conns, host, name):
    """The package's pins in the live XML and the kernel agrees: an
    ``<emulatorpin>`` (nova writes none for these flavors) and each vCPU
    thread on its ``<vcpupin>``, or, where libvirt shows none because it
    equals nova's ``<vcpu cpuset>`` (nph-compute2's one-CPU pool), on
    that cpuset."""
    try:
        dom = conns[host].lookupByName(name)
        root = ET.fromstring(dom.XMLDesc(0))
        if root.find('cputune/emulatorpin') is None:
            return False
        vcpu = root.find('vcpu')
        default = vcpu.get('cpuset')
        pins = {int(p.get('vcpu')): kernel.cpus(p.get('cpuset'))
                for p in root.findall('cputune/vcpupin')}
        for i in range(int(vcpu.text)):
            if i not in pins:
                if default is None:
                    return False
                pins[i] = kernel.cpus(default)
        pid = kernel.qemu_pid(host, name)
        return pid is not None and kernel.vcpu_threads(pid) == pins
    except (libvirt.libvirtError, OSError, ValueError, TypeError):
        return False


def set_ratio(conn, ratio):
    for rp in conn.placement.resource_providers():
        path = '/resource_providers/%s/inventories/VCPU' % rp.id
        r = conn.placement.get(path)
        if r.status_code != 200:
            continue
        inv = r.json()
        inv['allocation_ratio'] = ratio
        conn.placement.put(path, json=inv)


class PinEvents:
    """{(host, libvirt name): [times]} of the tunable events that carried
    a pin, received on the script's own connections."""

    def __init__(self):
        self.times = {}

    def on_tunable(self, conn, dom, params, host):
        if any(k.startswith(('cputune.vcpupin', 'cputune.emulatorpin'))
               for k in params):
            self.times.setdefault((host, dom.name()), []).append(time.time())

    def first(self, where):
        return min(self.times.get(where, ()), default=None)


def event_loop():
    libvirt.virEventRegisterDefaultImpl()

    def run():
        while True:
            libvirt.virEventRunDefaultImpl()
    threading.Thread(target=run, daemon=True).start()


def burst(conn, ids, n, package_on, conns, events, timeout=600):
    flavor = ids['flavors']['nph.1']
    start = time.time()
    servers = [conn.compute.create_server(
        name='%s%d' % (PREFIX, i), image_id=ids['image'], flavor_id=flavor,
        networks='none') for i in range(n)]
    want = {s.id for s in servers}
    active, info = {}, {}
    transient, errors = [], {}
    while len(active) < n:
        if time.time() - start > timeout:
            raise SystemExit('burst of %d not done in %d s' % (n, timeout))
        now = time.time()
        for s in conn.compute.servers(all_projects=True):
            if s.id not in want:
                continue
            if s.compute_host and s.instance_name:
                info[s.id] = (s.compute_host, s.instance_name)
            if s.status == 'ERROR':
                # A guest booted onto a nova-compute during its init_host
                # shows ERROR, no fault, then ACTIVE (tools/cloud.sh now
                # waits that out). An ERROR is the guest's only once it
                # has a fault or lasts 60 s.
                if s.fault or now - errors.setdefault(s.id, now) > 60:
                    raise SystemExit('%s went to ERROR: %s' % (
                        s.name, s.fault))
                continue
            if s.id in errors and s.name not in transient:
                transient.append(s.name)
            if s.status == 'ACTIVE' and s.id not in active:
                active[s.id] = now
        time.sleep(0.1)
    all_active = max(active.values()) - start
    # The kernel, once: every guest pinned (package on), or none with a
    # pin event of ours (off). A pass may still be writing: 30 s.
    confirmed = set()
    deadline = time.monotonic() + 30
    while package_on and len(confirmed) < n and time.monotonic() < deadline:
        for sid in want - confirmed:
            if sid in info and pinned(conns, *info[sid]):
                confirmed.add(sid)
        time.sleep(0.2)
    unpinned = sorted(info[s][1] for s in want - confirmed) \
        if package_on else []
    first = {sid: events.first(info[sid]) for sid in want}
    pinned_off = sorted(info[s][1] for s in want
                        if not package_on and first[s] is not None)
    # Negative: pinned before nova called the guest ACTIVE (the package
    # pins a domain as libvirt starts it, nova finishes its build after).
    lag = sorted(first[s] - active[s] for s in confirmed
                 if first[s] is not None)
    no_event = sorted(info[s][1] for s in confirmed if first[s] is None)
    # Each guest, to find a late one in the compute's log: its host,
    # libvirt name, and when it was seen ACTIVE and was first pinned.
    guests = [{'id': sid, 'host': info[sid][0], 'name': info[sid][1],
               'active_at': time.strftime(
                   '%H:%M:%S', time.gmtime(active[sid])) +
               ('%.2f' % (active[sid] % 1))[1:],
               'lag_s': (round(first[sid] - active[sid], 2)
                         if first[sid] is not None else None)}
              for sid in sorted(active, key=active.get)]
    hosts = {}
    for host, _ in info.values():
        hosts[host] = hosts.get(host, 0) + 1
    for s in servers:
        conn.compute.delete_server(s.id)
    deadline = time.monotonic() + timeout
    while any(s.name.startswith(PREFIX)
              for s in conn.compute.servers(all_projects=True)):
        if time.monotonic() > deadline:
            raise SystemExit('the burst\'s guests were not deleted')
        time.sleep(1)
    return {'all_active_s': round(all_active, 2), 'pin_lag_s': lag,
            'not_pinned': unpinned, 'no_pin_event': no_event,
            'pin_events_package_off': pinned_off,
            'hosts': hosts, 'listed_error_then_active': transient,
            'guests': guests}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--sizes', type=int, nargs='+', default=[10, 20])
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--json', help='write every result here')
    args = parser.parse_args()
    conn = openstack.connect(cloud='nph-admin')
    with open(os.path.join(STATE, 'cloud.json')) as f:
        ids = json.load(f)
    # A guest not yet defined, or deleted, is "not pinned (yet)": not a
    # line on stderr from libvirt's default error handler.
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    event_loop()
    conns = {h: libvirt.open(uri) for h, uri in kernel.LIBVIRT_URIS.items()}
    events = PinEvents()
    for host, c in conns.items():
        c.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_TUNABLE,
                                 events.on_tunable, host)
    set_ratio(conn, 16.0)
    results = []
    try:
        for n in args.sizes:
            for r in range(args.rounds):
                order = ('on', 'off') if r % 2 == 0 else ('off', 'on')
                for mode in order:
                    cloud('package', mode)
                    res = burst(conn, ids, n, mode == 'on', conns, events)
                    res.update(n=n, round=r, package=mode)
                    results.append(res)
                    if args.json:  # as it goes: a later failure keeps it
                        with open(args.json, 'w') as f:
                            json.dump(results, f, indent=1)
                    lag = res['pin_lag_s']
                    print('N=%-3d round %d package %-3s all ACTIVE %6.2f s'
                          '%s  hosts %s' % (
                              n, r, mode, res['all_active_s'],
                              ('  ACTIVE->pinned median %.2f max %.2f s' % (
                                  statistics.median(lag), max(lag))
                               if lag else ''), res['hosts']),
                          flush=True)
                    for key, what in (
                            ('not_pinned', 'not pinned after 30 s'),
                            ('no_pin_event', 'pinned with no pin event seen'),
                            ('pin_events_package_off',
                             'pin events with the package off'),
                            ('listed_error_then_active',
                             'listed ERROR, then ACTIVE')):
                        if res[key]:
                            print('  %s: %s' % (what, ', '.join(res[key])),
                                  flush=True)
    finally:
        set_ratio(conn, 4.0)
        cloud('package', 'on')
    print()
    print('N   on median  off median  ratio  pinned<=1s  max lag')
    for n in args.sizes:
        on = [x['all_active_s'] for x in results
              if x['n'] == n and x['package'] == 'on']
        off = [x['all_active_s'] for x in results
               if x['n'] == n and x['package'] == 'off']
        lags = [v for x in results if x['n'] == n and x['package'] == 'on'
                for v in x['pin_lag_s']]
        print('%-3d %9.2f  %10.2f  %5.3f  %4d/%-4d  %7.2f' % (
            n, statistics.median(on), statistics.median(off),
            statistics.median(on) / statistics.median(off),
            sum(1 for v in lags if v <= 1.0), len(lags), max(lags)))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
