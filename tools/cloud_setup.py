"""What tools/cloud.sh puts into a new cloud through its APIs (once):
keystone's service users, services and endpoints, a member user, the
guest image, the flavors and quotas; and, each time, the wait until both
nova-computes serve. Runs in the cloud's virtualenv (openstacksdk).

One Python process does what 30 ``openstack`` calls would (a minute of
start-ups). Everything is idempotent: found, it is left as it is. What
tests need to know (image and flavor ids) goes to STATE/cloud.json.
"""

import argparse
import json
import os
import struct
import sys
import tempfile
import time

import openstack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
from tests.cloud import kernel  # noqa: E402  (the kernel's view, shared)

KEYSTONE = 'http://127.0.0.1:5000/v3'
SERVICES = [  # name, type, URL
    ('nova', 'compute', 'http://127.0.0.1:8774/v2.1'),
    ('placement', 'placement', 'http://127.0.0.1:8778'),
    ('glance', 'image', 'http://127.0.0.1:9292'),
    ('neutron', 'network', 'http://127.0.0.1:9696'),
]
# name: vCPUs, MiB, GiB, extra specs
FLAVORS = {
    'nph.1': (1, 64, 1, {}),
    'nph.2': (2, 64, 1, {}),
    'nph.4': (4, 64, 1, {}),
    'nph.1b': (1, 96, 1, {}),  # resize target of the same size in vCPUs
    'nph.dedicated': (1, 64, 1, {'hw:cpu_policy': 'dedicated'}),
}


def admin(password):
    return openstack.connect(
        auth_url=KEYSTONE, username='admin', password=password,
        project_name='admin', user_domain_name='Default',
        project_domain_name='Default', region_name='RegionOne',
        identity_api_version='3')


def boot_sector_image(path):
    """A 1 MiB raw disk whose boot sector halts in a loop (``hlt; jmp``):
    the guest runs and costs no host CPU. One MBR partition entry, or
    glance refuses it as a GPT protective MBR without partitions."""
    sector = bytearray(512)
    sector[0:3] = b'\xf4\xeb\xfd'  # hlt; jmp $-1
    entry = struct.pack('<B3sB3sII', 0x80, b'\x00\x02\x00', 0x83,
                        b'\xfe\xff\xff', 1, 2047)
    sector[446:446 + 16] = entry
    sector[510:512] = b'\x55\xaa'
    with open(path, 'wb') as f:
        f.write(bytes(sector))
        f.write(b'\x00' * (1024 * 1024 - 512))


def ensure(find, create):
    found = find()
    return found if found is not None else create()


def bootstrap(conn, password, state):
    ident = conn.identity
    domain = ident.find_domain('default')
    service = ensure(
        lambda: ident.find_project('service', domain_id=domain.id),
        lambda: ident.create_project(name='service', domain_id=domain.id))
    nph = ensure(lambda: ident.find_project('nph', domain_id=domain.id),
                 lambda: ident.create_project(name='nph', domain_id=domain.id))
    roles = {}
    for name in ('admin', 'member', 'reader', 'service'):
        roles[name] = ensure(lambda n=name: ident.find_role(n),
                             lambda n=name: ident.create_role(name=n))
    for name, stype, url in SERVICES:
        user = ensure(lambda n=name: ident.find_user(n, domain_id=domain.id),
                      lambda n=name: ident.create_user(
                          name=n, password=password, domain_id=domain.id))
        # keystonemiddleware 13 requires the service role on service
        # tokens; admin for what the services do as admins.
        for role in ('admin', 'service'):
            ident.assign_project_role_to_user(service, user, roles[role])
        svc = ensure(lambda n=name, t=stype: next(
            (s for s in ident.services() if s.type == t), None),
            lambda n=name, t=stype: ident.create_service(name=n, type=t))
        have = {e.interface for e in ident.endpoints(service_id=svc.id)}
        for interface in ('public', 'internal', 'admin'):
            if interface not in have:
                ident.create_endpoint(service_id=svc.id, interface=interface,
                                      url=url, region_id='RegionOne')
    member = ensure(lambda: ident.find_user('nph', domain_id=domain.id),
                    lambda: ident.create_user(name='nph', password=password,
                                              domain_id=domain.id))
    ident.assign_project_role_to_user(nph, member, roles['member'])
    # A fresh admin connection sees the new catalog.
    conn = admin(password)
    wait_for(lambda: conn.compute.get('/').status_code < 500, 'nova-api')
    wait_for(lambda: conn.image.get('/').status_code < 500, 'glance')

    image = conn.image.find_image('nph-halt')
    if image is None:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'halt.raw')
            boot_sector_image(path)
            image = conn.image.create_image(
                name='nph-halt', filename=path, disk_format='raw',
                container_format='bare', visibility='public', wait=True)
    flavors = {}
    for name, (vcpus, ram, disk, specs) in FLAVORS.items():
        flavor = conn.compute.find_flavor(name)
        if flavor is None:
            flavor = conn.compute.create_flavor(
                name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
            if specs:
                conn.compute.create_flavor_extra_specs(flavor, specs)
        flavors[name] = flavor.id
    # Room for parallel boots of 20 and tempest's servers.
    conn.set_compute_quotas(nph.id, instances=100, cores=400, ram=1024 * 64)
    conn.set_compute_quotas(conn.current_project_id, instances=100,
                            cores=400, ram=1024 * 64)
    write_json(os.path.join(state, 'cloud.json'), {
        'image': image.id, 'flavors': flavors, 'member_project': nph.id})


def write_json(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, 'w') as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def wait_for(check, what, seconds=120):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:  # a service still starting
            last = e
        time.sleep(1)
    raise SystemExit('%s not ready in %d s: %s' % (what, seconds, last))


def wait_computes(conn, hosts, seconds):
    def up():
        services = [s for s in conn.compute.services()
                    if s.binary == 'nova-compute' and s.host in hosts]
        # Each host's hypervisor, by its service's host: a compute in
        # kolla's containers has no UTS namespace of its own, so its
        # hypervisor (libvirtd's hostname) is the machine's name, not
        # the nova host's (doc/source/reference/deployments.rst).
        hyps = {(h.service_details or {}).get('host')
                for h in conn.compute.hypervisors(details=True)}
        return (len(services) == len(hosts) and
                all(s.state == 'up' and s.status == 'enabled'
                    for s in services) and
                set(hosts) <= hyps)
    wait_for(up, 'nova-compute on %s' % ', '.join(hosts), seconds=seconds)


def demo(password, state):
    """Three guests booted through the API (as admin, in the admin
    project: only an admin may name the host), one after the other on
    nph-compute1: one-to-one while they fit, node range when
    the third comes; each vCPU thread's Cpus_allowed_list shown."""
    with open(os.path.join(state, 'cloud.json')) as f:
        ids = json.load(f)
    conn = admin(password)
    for i, flavor in enumerate(('nph.1', 'nph.1', 'nph.2'), 1):
        name = 'nph-demo-%d' % i
        if conn.compute.find_server(name, ignore_missing=True) is None:
            print('booting %s (%s) on nph-compute1 ...' % (name, flavor))
            server = conn.compute.create_server(
                name=name, image_id=ids['image'],
                flavor_id=ids['flavors'][flavor], networks='none',
                availability_zone='nova:nph-compute1')
            conn.compute.wait_for_server(server, wait=300)
        time.sleep(2)  # the pass that follows the build
        for s in conn.compute.servers(all_projects=True):
            if not s.name.startswith('nph-demo-'):
                continue
            pid = kernel.qemu_pid(s.compute_host, s.instance_name)
            pins = kernel.vcpu_threads(pid) if pid else {}
            print('  %-11s %-7s on %s  vCPU threads on CPUs: %s' % (
                s.name, s.status, s.compute_host, ', '.join(
                    '%d->%s' % (v, ','.join(map(str, sorted(c))))
                    for v, c in sorted(pins.items()))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--password', required=True)
    parser.add_argument('--state', required=True)
    parser.add_argument('--wait-computes')
    parser.add_argument('--seconds', type=int, default=360,
                        help='--wait-computes\'s bound')
    parser.add_argument('--demo', action='store_true')
    args = parser.parse_args()
    conn = admin(args.password)
    if args.demo:
        demo(args.password, args.state)
    elif args.wait_computes:
        wait_computes(conn, args.wait_computes.split(), args.seconds)
    else:
        bootstrap(conn, args.password, args.state)
    return 0


if __name__ == '__main__':
    sys.exit(main())
