"""Run a command where the system bus answers, or hangs (issue 40, M-1).

    unshare --mount --propagation private python bus_namespace.py \\
        answering|hung WORKDIR -- COMMAND...

Inside the private mount namespace ``unshare`` made (the machine's own
``/run/dbus`` and ``systemctl`` are never touched):

* ``/run/dbus`` is an empty tmpfs, and ``/usr/bin/systemctl`` an empty
  file nobody may run, as in kolla's images: the isolation agent and the
  metrics of code that asks systemd reach it over D-Bus at
  ``/run/dbus/system_bus_socket``;
* ``answering``: a private dbus-daemon listens there, with Debian's
  system bus policy and systemd's, and a stand-in for systemd as root
  answers for ``init.scope``, ``system.slice``, ``user.slice`` and
  ``machine.slice`` (``tests/functional/isolation/test_forged_replies``:
  ``BUS_CONF``, ``STAND_IN``; the units' properties in
  ``WORKDIR/units.json``);
* ``hung``: a UNIX socket there takes every connection and never reads
  nor answers (a D-Bus daemon that stopped).

Then COMMAND runs (its exit status is this script's), and the bus ends
with it.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
BUS = '/run/dbus/system_bus_socket'
UNITS = ('init.scope', 'system.slice', 'user.slice', 'machine.slice')


def hide_systemctl(workdir):
    empty = os.path.join(workdir, 'no-systemctl')
    with open(empty, 'w'):
        pass
    os.chmod(empty, 0o644)
    for path in ('/usr/bin/systemctl', '/bin/systemctl'):
        if os.path.exists(path) and not os.path.samefile(path, empty):
            subprocess.run(['mount', '--bind', empty, path], check=True)
    if shutil.which('systemctl'):
        sys.exit('bus_namespace: %s is still there'
                 % shutil.which('systemctl'))


def hang():
    """A bus that takes connections and never answers."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(BUS)
    os.chmod(BUS, 0o666)
    server.listen(128)
    held = []

    def accept():
        while True:
            conn, _ = server.accept()
            held.append(conn)  # never read, never closed
    threading.Thread(target=accept, daemon=True).start()
    return []


def answer(workdir):
    """A private dbus-daemon at BUS and a stand-in systemd on it."""
    sys.path.insert(0, TOP)
    from tests.functional.isolation import test_forged_replies as forged
    conf = os.path.join(workdir, 'bus.conf')
    policies = '<includedir>%s</includedir>' % forged.SYSTEM_D \
        if os.path.exists(os.path.join(
            forged.SYSTEM_D, 'org.freedesktop.systemd1.conf')) \
        else forged.SYSTEMD_POLICY
    with open(conf, 'w') as f:
        f.write(forged.BUS_CONF.format(socket=BUS, policies=policies))
    # Its log to a file: dbus-daemon logs every message it rejects, and
    # a pipe nobody reads would block the bus.
    with open(os.path.join(workdir, 'bus.log'), 'w') as log:
        bus = subprocess.Popen(['dbus-daemon', '--nofork', '--config-file',
                                conf], stdout=log, stderr=log)
    end = time.monotonic() + 30
    while not os.path.exists(BUS):
        if bus.poll() is not None or time.monotonic() > end:
            sys.exit('bus_namespace: dbus-daemon did not start')
        time.sleep(0.05)
    units = os.path.join(workdir, 'units.json')
    if not os.path.exists(units):
        with open(units, 'w') as f:
            json.dump({u: {} for u in UNITS}, f)
    script = os.path.join(workdir, 'systemd-stand-in.py')
    with open(script, 'w') as f:
        f.write(forged.STAND_IN)
    online = '0-%d' % (os.cpu_count() - 1)
    with open(os.path.join(workdir, 'systemd-stand-in.log'), 'w') as log:
        systemd = subprocess.Popen([sys.executable, script, BUS, units,
                                    online], stdout=subprocess.PIPE,
                                   stderr=log, text=True)
    name = systemd.stdout.readline().strip()
    if not name.startswith(':'):
        sys.exit('bus_namespace: the stand-in for systemd did not start')
    return [systemd, bus]


def main(argv):
    mode, workdir = argv[0], argv[1]
    command = argv[argv.index('--') + 1:]
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs',
                    '/run/dbus'], check=True)
    hide_systemctl(workdir)
    procs = hang() if mode == 'hung' else answer(workdir)
    try:
        return subprocess.run(command).returncode
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
