"""Why a VM did not come up, in one line.

A boot that times out used to say only "did not come up in 600 s" and
the console's last 40 lines, eleven times over (once a VM test). What a
reader needs first is the cause: what the guest kernel said (a soft
lockup, a panic, a stall; ``console_verdict``), where its vCPUs are
(``vcpu_places``: each vCPU's state and instruction pointer, read over
QMP while the VM still runs), and how loaded the host was
(``host_load``).

Invariants:

- Pure reading: nothing here changes the VM; every socket call has a
  time bound and every failure gives '' (a diagnosis never hides the
  error it explains).
- One line each: no newline in anything returned.
"""

import json
import os
import socket

def console_verdict(text, tsc_khz=None):
    """What the guest kernel's console says that explains a boot that
    did not come up (or one that nearly did not); '' when it says
    nothing of the kind. ``tsc_khz``: the host's TSC frequency, which
    is the TCG guest's (machine.host_tsc_khz)."""
    lines = text.splitlines()
    found = []
    lockup = [ln for ln in lines if 'soft lockup' in ln]
    if lockup:
        task = lockup[-1].rsplit('[', 1)[-1].rstrip(']').strip()
        where = ''
        for ln in lines:
            if 'Stopper:' in ln:
                where = ' in stop_machine (%s)' % ln.split('Stopper:', 1)[
                    1].strip().split('+', 1)[0]
        found.append("the VM's kernel locked up: %d soft lockup report(s)%s,"
                     " last on [%s]" % (len(lockup), where, task))
    for ln in lines:
        if 'Kernel panic' in ln:
            found.append('kernel panic: ' + ln.split('not syncing:', 1)[
                -1].strip(' -[]')[:160])
            break
    found.extend(_tsc_verdict(lines, tsc_khz))
    for key, what in (('detected stalls', 'RCU stall'),
                      ('hung_task_timeout_secs', 'hung task')):
        if any(key in ln for ln in lines):
            found.append(what)
    for ln in lines:
        if 'Marking clocksource' in ln and 'unstable' in ln:
            found.append('clocksource marked unstable: ' +
                         ln.split('] ', 1)[-1].strip()[:120])
            break
    switches = [(ln.split(']', 1)[0].lstrip('[ '),
                 ln.split('Switched to clocksource', 1)[1].strip())
                for ln in lines if 'Switched to clocksource' in ln]
    if len(switches) > 1:
        found.append('clocksource switched %s' % ' -> '.join(
            '%s (at %s s)' % (name, at) for at, name in switches))
    return '; '.join(found)


def _tsc_verdict(lines, tsc_khz):
    """The guest kernel's measure of its TSC, when it went wrong."""
    found = []
    for ln in lines:
        if 'PIT calibration deviates' in ln:
            found.append('the guest kernel mis-measured its TSC (%s)'
                         % ln.split('] ', 1)[-1].strip()[:80])
            break
    if tsc_khz:
        for ln in lines:
            if 'tsc: Detected' in ln and 'MHz' in ln:
                try:
                    mhz = float(ln.split('Detected', 1)[1].split()[0])
                except (IndexError, ValueError):
                    continue
                ratio = tsc_khz / (mhz * 1000) if mhz > 0 else 0
                if ratio > 1.1 or 0 < ratio < 0.9:
                    found.append('the guest took its TSC for %.3f MHz, the '
                                 "host's runs at %.3f MHz: its clock ran "
                                 '%.1f times too %s' % (
                                     mhz, tsc_khz / 1000.0,
                                     ratio if ratio > 1 else 1 / ratio,
                                     'fast' if ratio > 1 else 'slow'))
                break
    return found


def console_last(text):
    """The console's last non-empty line ('' if none)."""
    for ln in reversed(text.splitlines()):
        if ln.strip():
            return ln.strip()[:200]
    return ''


def host_load():
    """'load 5.2 on 2 CPUs' (the 1-minute load average)."""
    try:
        with open('/proc/loadavg') as f:
            one = f.read().split()[0]
    except OSError:
        return ''
    return 'host load %s on %d CPUs' % (one, os.cpu_count() or 0)


def _qmp(path, command_line, timeout=10):
    """The text of one human-monitor command over QMP."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        f = sock.makefile('rwb')
        f.readline()  # the greeting
        answers = []
        for request in ({'execute': 'qmp_capabilities'},
                        {'execute': 'human-monitor-command',
                         'arguments': {'command-line': command_line}}):
            f.write(json.dumps(request).encode() + b'\n')
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    raise ConnectionError('QMP closed')
                answer = json.loads(line)
                if 'return' in answer or 'error' in answer:
                    answers.append(answer)
                    break
        return answers[-1].get('return', '')


def vcpu_places(qmp_path):
    """Where each vCPU is: 'vCPUs: 0-6 halted at 0xffffffff81a0dfeb; 7
    running at 0xffffffff8110003c' (vCPUs grouped by place; the kernel
    boots with nokaslr, so the addresses are those of its System.map,
    in Debian's linux-image-*-dbg package); '' if QMP does not
    answer."""
    try:
        text = _qmp(qmp_path, 'info registers -a')
    except (OSError, ValueError, ConnectionError):
        return ''
    places = {}
    cpu = None
    for ln in text.splitlines():
        if ln.startswith('CPU#'):
            try:
                cpu = int(ln[4:].split()[0])
            except ValueError:
                cpu = None
        elif ln.startswith('RIP=') and cpu is not None:
            try:
                rip = int(ln.split()[0].split('=', 1)[1], 16)
            except (IndexError, ValueError):
                continue
            state = 'halted' if 'HLT=1' in ln else 'running'
            places.setdefault('%s at %#x' % (state, rip), []).append(cpu)
    if not places:
        return ''
    return 'vCPUs: ' + '; '.join(
        '%s %s' % (_ranges(cpus), where)
        for where, cpus in sorted(places.items(), key=lambda kv: kv[1][0]))


def _ranges(cpus):
    cpus = sorted(cpus)
    out = []
    start = prev = cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(str(start) if start == prev else '%d-%d' % (start, prev))
        if c is not None:
            start = prev = c
    return ','.join(out)
