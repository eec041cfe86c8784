"""Where one-to-one guests' emulator and I/O threads run
(``[nova_pinning] emulator_threads``): passes of the nova-pinning
command through the fake libvirt. The rule and its plans:
tests/unit/engine/test_emuthreads.py; the plan's output:
tests/unit/observe/test_emuthreads.py."""

import json

from tests.unit import hosts
from tests.unit.cmd.test_cli_live import LiveCliTestCase
from tests.unit.scrape import value


class TestPasses(LiveCliTestCase):
    """small-1node: pool 0-3; guests a (2 vCPUs) and c (1 vCPU, two
    IOThreads) are bound one-to-one, leaving one pCPU free."""

    def setUp(self):
        super().setUp()
        self.fake.by_name('b').destroy()
        self.fake.add_domain('c', 1, xml=hosts.domain_xml(
            'c', 1, iothreads=2), memory_by_node_kib={'0': 65536})

    def pins(self):
        free = set(range(4))
        for dom in self.fake.domains.values():
            free -= {c for cpus in dom.vcpu_pins.values() for c in cpus}
        return free, {d.name(): (d.emulator_pin, d.iothread_pins)
                      for d in self.fake.domains.values()}

    def test_shared_writes_once_then_nothing(self):
        self.write_config(allocation_ratio=4.0, busy_retries=0,
                          busy_retry_delay=0, emulator_threads='shared')
        self.assertEqual(0, self.run_cli('rebind')[0])
        free, pins = self.pins()
        self.assertEqual(1, len(free))
        free = tuple(free)
        self.assertEqual({'a': (free, {}),
                          'c': (free, {1: free, 2: free})}, pins)
        # 3 vCPU pins, 2 emulator pins and 2 IOThread pins.
        self.assertEqual(7, self.fake.writes())
        self.assertEqual({'pinVcpuFlags': 3, 'pinEmulator': 2,
                          'pinIOThread': 2},
                         {m: self.fake.calls[m] for m in
                          ('pinVcpuFlags', 'pinEmulator', 'pinIOThread')})
        self.assertEqual(0, self.run_cli('rebind')[0])
        self.assertEqual(7, self.fake.writes())

        code, out, err = self.run_cli('status', '--format', 'json',
                                      '--interval', '0')
        self.assertEqual(0, code, err)
        data = json.loads(out)
        self.assertEqual('shared', data['emulator_threads'])
        for g in data['guests']:
            self.assertEqual((str(free[0]), 'pool-free', True),
                             (g['emulator_pin'],
                              g['emulator_threads']['rule'],
                              g['live_matches_plan']), g['name'])
        code, out, err = self.run_cli('metrics')
        self.assertEqual(0, code, err)
        self.assertEqual(1, value(out, 'nova_pinning_guest_emulator_threads',
                                  name='c', rule='pool-free',
                                  cpus=str(free[0]), node='0'))

    def test_guest_then_shared_moves_only_these_threads(self):
        self.assertEqual(0, self.run_cli('rebind')[0])
        vcpus = {d.name(): dict(d.vcpu_pins)
                 for d in self.fake.domains.values()}
        _, pins = self.pins()
        for name, (emulator, _) in pins.items():  # with its own vCPUs
            self.assertEqual(tuple(sorted(
                {c for cpus in vcpus[name].values() for c in cpus})),
                emulator, name)
        code, out, _ = self.run_cli('metrics')
        self.assertEqual(1, value(out, 'nova_pinning_guest_emulator_threads',
                                  name='c', rule='with-vcpus'))
        writes = self.fake.writes()
        self.write_config(allocation_ratio=4.0, busy_retries=0,
                          busy_retry_delay=0, emulator_threads='shared')
        self.assertEqual(0, self.run_cli('rebind')[0])
        self.assertEqual(vcpus, {d.name(): dict(d.vcpu_pins)
                                 for d in self.fake.domains.values()})
        # Two emulators and two IOThreads moved: nothing else.
        self.assertEqual(writes + 4, self.fake.writes())
        self.assertEqual(0, self.run_cli('rebind')[0])
        self.assertEqual(writes + 4, self.fake.writes())
