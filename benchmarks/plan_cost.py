#!/usr/bin/env python3
"""Plan cost: time from reading a snapshot file to printing the JSON plan.

Usage: python benchmarks/plan_cost.py [--runs 7] [--counts 10,100,1000,5000]
       [--genoa] [--fastest]

For each host (the 256-CPU AMD NPS4 fixture and a generated 480-CPU
4-socket host) and each guest count, it writes a snapshot of nova-like
guests (full libvirt domain XML as nova writes it, about 4 KiB each),
then times, in this process (interpreter start-up excluded):
read file -> json -> validate -> parse XML -> plan -> diff -> JSON text.
It also times the floor: ``json.load`` of the file plus ``ElementTree``
parsing of every domain XML, and prints the plan's time as a multiple of
it. Median of --runs runs (``--fastest``: the fastest run). With
``--genoa``, the 2-socket Genoa fixture (24 L3 domains) with its banks
and without them: what cache alignment costs.
"""

import argparse
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_pinning_hooks.cmd import pinning  # noqa: E402
from nova_pinning_hooks.engine import plan as plan_mod  # noqa: E402
from nova_pinning_hooks.engine import policy  # noqa: E402
from nova_pinning_hooks.engine import snapshot  # noqa: E402
from tests.unit import hosts  # noqa: E402

DOMAIN = """<domain type='kvm' id='{id}'>
  <name>instance-{id:08x}</name>
  <uuid>{uuid}</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:package version="34.0.0"/>
      <nova:name>game-server-{id}</nova:name>
      <nova:creationTime>2026-11-01 10:00:00</nova:creationTime>
      <nova:flavor name="c{vcpus}.m{mem}">
        <nova:memory>{mem_mib}</nova:memory><nova:disk>40</nova:disk>
        <nova:swap>0</nova:swap><nova:ephemeral>0</nova:ephemeral>
        <nova:vcpus>{vcpus}</nova:vcpus>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="3d2a9b3c6e0f4b8e9a1c2d3e4f5a6b7c">ops</nova:user>
        <nova:project uuid="9f8e7d6c5b4a49382716a5b4c3d2e1f0">games</nova:project>
      </nova:owner>
      <nova:root type="image" uuid="0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"/>
      <nova:ports><nova:port uuid="{uuid}"><nova:ip type="fixed" address="10.0.{a}.{b}" ipVersion="4"/></nova:port></nova:ports>
    </nova:instance>
  </metadata>
  <memory unit='KiB'>{mem_kib}</memory>
  <currentMemory unit='KiB'>{mem_kib}</currentMemory>
  <vcpu placement='static'>{vcpus}</vcpu>
  <cputune><shares>{shares}</shares>{pins}</cputune>
  <resource><partition>/machine</partition></resource>
  <sysinfo type='smbios'><system>
    <entry name='manufacturer'>OpenStack Foundation</entry>
    <entry name='product'>OpenStack Nova</entry>
    <entry name='version'>34.0.0</entry>
    <entry name='serial'>{uuid}</entry><entry name='uuid'>{uuid}</entry>
    <entry name='family'>Virtual Machine</entry>
  </system></sysinfo>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type><boot dev='hd'/><smbios mode='sysinfo'/></os>
  <features><acpi/><apic/></features>
  <cpu mode='host-model' check='partial'><topology sockets='{vcpus}' dies='1' cores='1' threads='1'/></cpu>
  <clock offset='utc'><timer name='pit' tickpolicy='delay'/><timer name='rtc' tickpolicy='catchup'/><timer name='hpet' present='no'/></clock>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='network' device='disk'><driver name='qemu' type='raw' cache='none' discard='unmap'/>
      <source protocol='rbd' name='vms/{uuid}_disk'><host name='10.1.0.1' port='6789'/></source>
      <target dev='vda' bus='virtio'/><alias name='virtio-disk0'/></disk>
    <controller type='pci' index='0' model='pcie-root'/>
    <controller type='usb' index='0' model='none'/>
    <interface type='bridge'><mac address='fa:16:3e:{a:02x}:{b:02x}:01'/>
      <source bridge='qbr{id}'/><target dev='tap{id}'/><model type='virtio'/><mtu size='1450'/></interface>
    <serial type='pty'><log file='/var/lib/nova/instances/{uuid}/console.log' append='off'/><target type='isa-serial' port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <input type='tablet' bus='usb'/><graphics type='vnc' port='-1' autoport='yes' listen='0.0.0.0'/>
    <video><model type='virtio' heads='1' primary='yes'/></video>
    <memballoon model='virtio'><stats period='10'/></memballoon>
    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
  </devices>
  <seclabel type='dynamic' model='dac' relabel='yes'/>
</domain>"""


SMALL_DOMAIN = """<domain type='kvm'><name>instance-{id:08x}</name>
<uuid>{uuid}</uuid><metadata><nova:instance
 xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1"><nova:name>g{id}
</nova:name></nova:instance></metadata><memory unit='KiB'>{mem_kib}</memory>
<vcpu placement='static'>{vcpus}</vcpu><cputune>{pins}</cputune>
<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>"""


def host_480():
    """4 sockets = 4 nodes x 60 cores x 2 threads (Linux numbering)."""
    total = 240
    return hosts.capabilities([[[c, c + total] for c in range(n * 60,
                                                              n * 60 + 60)]
                               for n in range(4)])


def make_snapshot(caps, count, seed=1, template=DOMAIN):
    rnd = random.Random(seed)
    nodes = sorted(int(c.get('id'))
                   for c in ET.fromstring(caps).findall('.//cell'))
    domains = []
    for i in range(count):
        vcpus = rnd.choice([1, 2, 2, 4, 4, 8])
        mem_mib = vcpus * 2048
        if rnd.random() < 0.1:
            memory = {str(n): mem_mib * 512 for n in rnd.sample(nodes, 2)}
        else:
            memory = {str(rnd.choice(nodes)): mem_mib * 1024}
        xml = template.format(
            id=i + 1, uuid='%08x-0000-4000-8000-%012x' % (i, i),
            vcpus=vcpus, mem=mem_mib // 1024, mem_mib=mem_mib,
            mem_kib=mem_mib * 1024, shares=vcpus * 1024, pins='',
            a=(i // 250) % 256, b=i % 250 + 1)
        domains.append({'xml': xml, 'active': True,
                        'memory_by_node_kib': memory})
    return snapshot.make(caps, domains, 4.0, reserved_cpus='0-1')


class Conf:
    """The configuration values planning reads."""

    class nova_pinning:  # noqa: N801 - mirrors the option group
        foreign_domains = 'manage'
        home_node_min_fraction = 0.9
        set_home_node = False
        emulator_threads = 'guest'


def end_to_end(path):
    """What ``nova-pinning plan --format json`` does after start-up."""
    out = io.StringIO()
    out.write(pinning.plan_output(pinning.read_snapshot_file(path), Conf,
                                  'json'))
    return out.getvalue()


def live_pass(data):
    """What a live pass does between reading libvirt and applying: the
    XML comes from libvirt, so it is read only up to <devices>."""
    snap = snapshot.load(data, from_libvirt=True)
    p = policy.make_plan(snap.host, snap.guests, snap.options)
    return plan_mod.changes(p, snap.guests)


def parse_only(path):
    with open(path, encoding='utf-8') as f:
        data = json.load(f)
    for dom in data['domains']:
        ET.fromstring(dom['xml'])


def interleaved_ms(calls, runs, fastest=False):
    """Median ms of each (func, arg), the calls taking turns; with
    ``fastest``, the fastest run instead (on a machine others share, the
    least disturbed run)."""
    times = [[] for _ in calls]
    for _ in range(runs):
        for slot, (func, arg) in zip(times, calls):
            start = time.perf_counter()
            func(arg)
            slot.append((time.perf_counter() - start) * 1000)
    return [(min if fastest else statistics.median)(t) for t in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=7)
    ap.add_argument('--counts', default='10,100,1000,5000')
    ap.add_argument('--genoa', action='store_true',
                    help='the 2-socket AMD Genoa fixture with its 24 L3 '
                         'domains (384 pCPUs), and without its banks, '
                         'instead')
    ap.add_argument('--fastest', action='store_true',
                    help='report the fastest run of each measure, not '
                         'the median')
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(',')]
    fastest = args.fastest
    targets = [('amd-2s-64c-nps4 (256 pCPUs, 8 nodes)',
                hosts.load('amd-2s-64c-nps4')),
               ('generated 4s-60c-ht (480 pCPUs, 4 nodes)', host_480())]
    if args.genoa:
        # The same host without its banks: what alignment costs.
        genoa = hosts.load('genoa-2s-nps1')
        targets = [('genoa-2s-nps1 (384 pCPUs, 2 nodes, 24 L3)', genoa),
                   ('genoa-2s-nps1 without banks (1 L3 per node)',
                    hosts.strip_banks(genoa))]
    templates = [('nova (3.2 KB)', DOMAIN), ('small (0.4 KB)', SMALL_DOMAIN)]
    print('| host | domain XML | guests | modes | JSON + XML parse (ms) | '
          'plan command (ms) | plan / parse | per guest (us) | '
          'live pass plan (ms) |')
    print('|---|---|---|---|---|---|---|---|---|')
    with tempfile.TemporaryDirectory() as tmp:
        for (label, caps), (xml_label, template), count in (
                (t, x, c) for t in targets for x in templates
                for c in counts):
                path = os.path.join(tmp, 'snap.json')
                data = make_snapshot(caps, count, template=template)
                with open(path, 'w') as f:
                    json.dump(data, f)
                end_to_end(path)  # warm caches like a long-lived agent
                # Interleaved, so that a burst of load elsewhere on the
                # machine weighs on the floor and the plan alike.
                floor, total, live = interleaved_ms(
                    [(parse_only, path), (end_to_end, path),
                     (live_pass, data)], args.runs, fastest)
                result = json.loads(end_to_end(path))
                modes = sorted({g['mode'] for g in result['guests']})
                print('| %s | %s | %d | %s | %.1f | %.1f | %.2f | %.0f | '
                      '%.1f |' % (
                          label, xml_label, count, '/'.join(modes), floor,
                          total, total / floor, total * 1000 / count, live))


if __name__ == '__main__':
    main()
