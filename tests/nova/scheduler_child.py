"""The summary's way through nova's own objects, and the weigher inside
nova's own weight handler, in a child process; prints one JSON report.

    python scheduler_child.py CONFIG_FILE

* the compute side: nova's ``ResourceTracker._update`` with the package's
  hook installed (what activation installs): the summary lands in the
  ``ComputeNode``'s stats as a changed field, and nova's save runs with
  it (placement and the database mocked: nothing else of nova's is);
* the scheduler side: that ``ComputeNode`` read into nova's
  ``HostState`` (``update``), the weighers loaded from ``[filter_scheduler]
  weight_classes`` as nova-scheduler loads them, weighed by nova's
  ``HostWeightHandler`` for a real ``RequestSpec``, then again after
  ``HostState.consume_from_request``, and with an aggregate's multiplier.
"""

import copy
import json
import os
import sys
import time
from unittest import mock

os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '1'
conf_path = sys.argv[1]

from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.compute import resource_tracker  # noqa: E402
from nova.compute import stats as nova_stats  # noqa: E402
import nova.conf  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights  # noqa: E402

from nova_pinning_hooks.engine import summary as summary_mod  # noqa: E402
from nova_pinning_hooks.nova import activation  # noqa: E402
from nova_pinning_hooks.nova import hooks  # noqa: E402
from nova_pinning_hooks.nova import nodesummary  # noqa: E402
from nova_pinning_hooks.engine.policy.options import Rules  # noqa: E402

objects.register_all()
CONF = nova.conf.CONF
CONF(['--config-file', conf_path], project='nova')
report = {}
GIB = 1024 * 1024
UUID = os.environ['NPH_TEST_INSTANCE_UUID']  # the request's (its draw)


def summary(vcpus, seen=None):
    """A 2-node host's summary: node pools 8, ``vcpus`` homed."""
    s = summary_mod.Summary(
        Rules(4.0), tuple(summary_mod.Node(i, 8, v, 64 * GIB, 0, False)
                   for i, v in enumerate(vcpus)), 0,
        sum(vcpus) if seen is None else seen, int(time.time()))
    return summary_mod.Basis(s, {})


# -- compute side -----------------------------------------------------
report['tracker_hooked'] = nodesummary.install(
    resource_tracker.ResourceTracker, activation.SUMMARY_HOOK)
hooks.manager(activation.SUMMARY_HOOK)
basis = summary((6, 0))
activation._REPORTER = nodesummary.Reporter(lambda: basis, 10 ** 10)
rt = resource_tracker.ResourceTracker('compute-1', mock.Mock(),
                                      reportclient=mock.Mock())
ctxt = nova_context.get_admin_context()
cn = objects.ComputeNode(hypervisor_hostname='compute-1', host='compute-1',
                         uuid='00000000-0000-4000-8000-000000000001',
                         vcpus=16, vcpus_used=6, memory_mb=131072,
                         free_ram_mb=100000, local_gb=100,
                         free_disk_gb=100, local_gb_used=0,
                         disk_available_least=100, cpu_allocation_ratio=4.0,
                         ram_allocation_ratio=1.0,
                         disk_allocation_ratio=1.0, hypervisor_type='QEMU',
                         hypervisor_version=9000000, cpu_info='',
                         host_ip='127.0.0.1', numa_topology=None,
                         pci_device_pools=objects.PciDevicePoolList(),
                         supported_hv_specs=[], metrics='[]')
stats = nova_stats.Stats()
stats.digest_stats({'uptime': 'up'})
rt.stats['compute-1'] = stats
cn.stats = stats
cn.obj_reset_changes()
rt.compute_nodes['compute-1'] = cn
rt.old_resources['compute-1'] = copy.deepcopy(cn)
saved = []
with mock.patch.object(rt, '_update_to_placement'), \
        mock.patch.object(objects.ComputeNode, 'save',
                          lambda self: saved.append(
                              (sorted(self.obj_what_changed()),
                               dict(self.stats)))):
    rt._update(ctxt, cn)
report['saved'] = saved
report['stats_still_nova_stats'] = rt.stats['compute-1'] is cn.stats or \
    isinstance(cn.stats, dict)

# -- scheduler side ---------------------------------------------------
cn.updated_at = None
hosts = []
for name, b in (('fits', summary((6, 8))), ('loses', summary((8, 8))),
                ('none', None)):
    node = cn.obj_clone()
    node.hypervisor_hostname = node.host = name
    node.stats = dict(cn.stats)
    node.stats.pop(summary_mod.KEY)
    if b is not None:
        node.stats[summary_mod.KEY] = summary_mod.encode(b.summary)
    node.vcpus_used = b.summary.seen if b is not None else 0
    hs = host_manager.HostState(name, name, 'cell')
    hs.update(compute=node, aggregates=[])
    hosts.append(hs)
handler = weights.HostWeightHandler()
classes = handler.get_matching_classes(
    CONF.filter_scheduler.weight_classes)
report['weighers'] = sorted(c.__name__ for c in classes)
ours = [c for c in classes if c.__name__ == 'OneToOneWeigher']
flavor = objects.Flavor(vcpus=2, memory_mb=2048, root_gb=1, ephemeral_gb=0,
                        swap=0, extra_specs={})
spec = objects.RequestSpec(flavor=flavor, numa_topology=None,
                           num_instances=1, pci_requests=None,
                           ignore_hosts=None, force_hosts=None,
                           force_nodes=None, instance_uuid=UUID)


def weighed(objs, request):
    return {w.obj.host: round(w.weight, 6) for w in
            handler.get_weighed_objects([c() for c in objs], hosts,
                                        request)}


report['ours'] = weighed(ours, spec)
spread = [c for c in classes
          if c.__name__ in ('RAMWeigher', 'CPUWeigher', 'OneToOneWeigher')]
report['order'] = [w.obj.host for w in handler.get_weighed_objects(
    [c() for c in spread], hosts, spec)]
report['order_without'] = [w.obj.host for w in handler.get_weighed_objects(
    [c() for c in spread if c not in ours], hosts, spec)]
numa = objects.RequestSpec(flavor=objects.Flavor(
    vcpus=2, memory_mb=2048, root_gb=1, ephemeral_gb=0, swap=0,
    extra_specs={'hw:cpu_policy': 'dedicated'}), numa_topology=None,
    num_instances=1)
report['dedicated'] = weighed(ours, numa)
# Two guests consumed on "fits" earlier in this request: node 0 full,
# the next guest tips node 1.
hosts[0].consume_from_request(spec)
hosts[0].consume_from_request(spec)
report['after_consume'] = weighed(ours, spec)
agg = objects.Aggregate(id=1, name='a', hosts=['fits', 'loses', 'none'],
                        metadata={'nova_pinning_weigher_multiplier': '2'})
for hs in hosts:
    hs.aggregates = [agg]
report['aggregate'] = weighed(ours, spec)
print('REPORT ' + json.dumps(report))
