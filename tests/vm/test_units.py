"""etc/systemd/nova-pinning-agent.service run by a real systemd (the VM).

The unit as shipped, with the package pip-installed where its
``ExecStart`` expects it (/usr/local/bin): it starts, pins a guest
created after it from libvirt's events (the kernel shows it),
``Restart=on-failure`` brings it back after SIGKILL, and
``systemctl stop`` ends it with exit status 0 and the pass lock free.
"""

import time

from testtools import content

from nova_pinning_hooks.engine import cpuset
from tests.vm import base
from tests.vm import machine

UNIT = 'nova-pinning-agent.service'
LOCK_DIR = '/var/lib/nova-pinning-hooks'


class TestAgentUnit(base.VMTestCase):

    def show(self, *props):
        args = ['systemctl', 'show', UNIT]
        for p in props:
            args += ['-p', p]
        out = self.sh(args).out
        return dict(line.split('=', 1) for line in out.splitlines())

    def test_the_agent_unit(self):
        self.sh(['cp', '/root/nph/etc/systemd/' + UNIT,
                 '/etc/systemd/system/'])
        self.sh(['systemctl', 'daemon-reload'])
        self.addCleanup(self.sh, ['systemctl', 'stop', UNIT], check=False)
        self.sh(['systemctl', 'start', UNIT])
        self.wait_for('the agent active', lambda: self.show(
            'ActiveState')['ActiveState'] == 'active')
        # Its first pass (a resync) has run once the journal says so.
        self.wait_for('the first pass', lambda: 'rebinding pass' in self.sh(
            ['journalctl', '-u', UNIT, '--no-pager', '-o', 'cat']).out)

        # A guest created behind its back is pinned from libvirt's
        # events, not only by a resync.
        g = self.create_guest('unit', 2, node=1)
        created = time.monotonic()

        def pinned():
            vcpus = self.kernel(g)[g]['vcpus']
            cpus = [cpuset.parse(a) for a in vcpus.values()]
            return all(len(c) == 1 and c <= machine.NODES[1]
                       for c in cpus) and vcpus
        self.wait_for('the new guest pinned one-to-one', pinned)
        latency = time.monotonic() - created
        # The pass logs its line after its last write, and journald
        # stores it a little later again: on a busy machine the pins
        # show before the line does.
        def journal():
            return self.sh(['journalctl', '-u', UNIT, '--no-pager', '-o',
                            'cat']).out
        try:
            self.wait_for('the pass in the journal', lambda: (
                '1 guests, 1 compared, 3 changes, 3 applied' in journal()))
        except self.failureException:
            self.addDetail('journal', content.text_content(journal()))
            raise
        self.addDetail('pinned-after-seconds',
                       content.text_content('%.1f' % latency))

        # Killed: Restart=on-failure brings it back (RestartSec=5).
        first = self.show('MainPID')['MainPID']
        self.sh(['systemctl', 'kill', '-s', 'KILL', UNIT])

        def restarted():
            now = self.show('MainPID', 'ActiveState', 'NRestarts')
            return now['ActiveState'] == 'active' and \
                now['NRestarts'] == '1' and now['MainPID'] not in ('0', first)
        self.wait_for('a new agent process', restarted)

        # Stopped: exit 0, and no pass lock left held.
        self.sh(['systemctl', 'stop', UNIT])
        self.assertEqual(
            {'ActiveState': 'inactive', 'Result': 'success',
             'ExecMainStatus': '0'},
            self.show('ActiveState', 'Result', 'ExecMainStatus'))
        self.assertEqual(0, self.sh(['flock', '-n', LOCK_DIR, 'true'],
                                    check=False).rc)
