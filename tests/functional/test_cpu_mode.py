"""tools/cpu_mode.py against this machine's real libvirtd: the mode it
chooses really starts a guest, and a first choice that libvirt refuses
falls back to the next (the path taken on a machine where nova's default,
host-model, does not start: an AMD EPYC under nested KVM, "failed to set
MSR 0x10a")."""

import os
import subprocess
import sys
import time

from testtools.content import text_content

from tests.functional import base

TOOL = os.path.join(base.TOP, 'tools', 'cpu_mode.py')


class TestCpuMode(base.FunctionalTestCase):

    def probe(self, *args):
        done = subprocess.run(
            [sys.executable, TOOL, '--uri', base.URI,
             '--virt-type', self.virt_type] + list(args),
            capture_output=True, text=True, timeout=180)
        self.addDetail('cpu_mode stderr', text_content(done.stderr))
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout.splitlines(), done.stderr

    def start_with(self, lines):
        """A guest with the <cpu> nova writes for these [libvirt] lines,
        still running two seconds after its start."""
        opts = dict(line.split(' = ', 1) for line in lines)
        mode = opts['cpu_mode']
        if mode == 'custom':
            cpu = ("<cpu mode='custom' match='exact'><model fallback='forbid'>"
                   "%s</model></cpu>" % opts['cpu_models'])
        elif mode == 'none':
            cpu = ''
        else:
            cpu = "<cpu mode='%s'/>" % mode
        name = base.PREFIX + 'cpu-mode'
        xml = base.GUEST_XML.format(type=self.virt_type, name=name, vcpus=1)
        dom = self.conn.createXML(xml.replace('</os>', '</os>' + cpu), 0)
        self.addCleanup(self._destroy, name)
        time.sleep(2)
        self.assertTrue(dom.isActive(), 'the guest with %s stopped' % lines)
        return dom

    def test_the_chosen_mode_starts_a_guest(self):
        lines, said = self.probe()
        self.assertTrue(lines[0].startswith('cpu_mode = '), lines)
        self.start_with(lines)
        self.assertNotIn('nph-cpu-probe', ' '.join(
            d.name() for d in self.conn.listAllDomains()))

    def test_a_refused_first_choice_falls_back(self):
        # libvirt really refuses this one (no such model), on any CPU.
        lines, said = self.probe('--first', 'custom:nph-no-such-model')
        self.assertIn('custom:nph-no-such-model refused:', said)
        self.assertEqual(self.probe()[0], lines)
        self.start_with(lines)

    def test_the_answer_is_kept_for_this_machine_only(self):
        cache = os.path.join(self.tmp, 'cpu-mode.json')
        first, said = self.probe('--cache', cache)
        self.assertIn('(probed', said)
        again, said = self.probe('--cache', cache)
        self.assertEqual(first, again)
        self.assertIn('(cached for this machine', said)
        with open(cache) as f:
            text = f.read()
        with open(cache, 'w') as f:  # as if made on another machine
            f.write(text.replace('"machine": "', '"machine": "x'))
        _, said = self.probe('--cache', cache)
        self.assertIn('(probed', said)

