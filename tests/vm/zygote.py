"""The package's commands in the VM without their import cost.

Under TCG every ``nova-pinning`` or ``nova-pinning-isolate`` process spends
6 to 26 s importing oslo.config, oslo.log and their dependencies before
it does anything (``python3 -X importtime``: 13.6 s for the CLI module,
0.9 s for ``python3 -c pass``), and the VM tests run about a hundred of
them. ``serve`` imports the two command modules once and forks a child
for each request, which runs the console script's entry point with the
request's argv, environment and standard streams: the same ``main()``
in a process of its own, with the same exit status and output. ``call``
is the client ``tests/vm/machine.py`` runs through the guest agent.

Invariants:

- A request runs in a fresh child process (``fork``), never in the
  server: no state of one command reaches the next. The server itself
  never parses a configuration, sets up logging or opens libvirt.
- Without the server (not started, or gone with a reboot), ``call``
  executes the command itself: the result is the same, only slower.
- Only the package's two console scripts are served; the systemd units
  and ``sh -c`` command lines of the tests start real processes, so the
  console scripts' own wrappers stay exercised.
"""

import json
import os
import socket
import struct
import sys

SOCKET = os.environ.get('NPH_VM_ZYGOTE_SOCKET', '/run/nph-vm-zygote.sock')
SCRIPTS = {'nova-pinning': 'nova_pinning_hooks.cmd.pinning',
           'nova-pinning-isolate': 'nova_pinning_hooks.cmd.isolate'}


def _send(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack('>I', len(data)) + data)


def _recv(sock):
    head = b''
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError('closed')
        head += chunk
    size, = struct.unpack('>I', head)
    data = b''
    while len(data) < size:
        chunk = sock.recv(min(65536, size - len(data)))
        if not chunk:
            raise ConnectionError('closed')
        data += chunk
    return json.loads(data)


def _child(request, out_path, err_path):
    """In the forked child: the console script's main(), then exit."""
    code = 1
    try:
        os.setsid()
        devnull = os.open('/dev/null', os.O_RDONLY)
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((devnull, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
        if request.get('env') is not None:
            os.environ.clear()
            os.environ.update(request['env'])
        argv = request['argv']
        sys.argv = argv
        module = sys.modules[SCRIPTS[argv[0]]]
        try:
            result = module.main()
            code = result if isinstance(result, int) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else \
                (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                sys.stderr.write('%s\n' % exc.code)
    except BaseException:  # noqa: B902 - reported like an uncaught one
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid, conn):
    """The child's exit status; None if the client hung up first (the
    guest agent killed it on a timeout), after killing the child."""
    import select
    import signal
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([pidfd, conn], [], [])
            if pidfd in ready:
                _, status = os.waitpid(pid, 0)
                return os.waitstatus_to_exitcode(status)
            if not conn.recv(1):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
    finally:
        os.close(pidfd)


def serve():
    import importlib
    import signal
    import tempfile
    for name in SCRIPTS.values():
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    server.bind(SOCKET)
    os.umask(old)
    server.listen(8)
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                request = _recv(conn)
                if request.get('argv', [''])[0] not in SCRIPTS:
                    _send(conn, {'error': 'not served'})
                    continue
                work = tempfile.mkdtemp(prefix='nph-zygote.')  # 0700
                out_path = os.path.join(work, 'out')
                err_path = os.path.join(work, 'err')
                pid = os.fork()
                if pid == 0:
                    server.close()
                    conn.close()
                    _child(request, out_path, err_path)
                _send(conn, {'pid': pid})
                try:
                    rc = _wait(pid, conn)
                    with open(out_path, errors='replace') as f:
                        out = f.read()
                    with open(err_path, errors='replace') as f:
                        err = f.read()
                finally:
                    for path in (out_path, err_path):
                        if os.path.exists(path):
                            os.unlink(path)
                    os.rmdir(work)
                if rc is not None:  # else the client went away: killed
                    _send(conn, {'rc': rc, 'out': out, 'err': err})
            except (ConnectionError, OSError, ValueError):
                continue


def call(argv):
    """Run argv through the server, else execute it; exit as it did."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(SOCKET)
    except OSError:
        os.execvp(argv[0], argv)
    with sock:
        env = dict(os.environ)
        _send(sock, {'argv': argv, 'env': env})
        first = _recv(sock)
        if 'error' in first:
            sock.close()
            os.execvp(argv[0], argv)
        # Killed on a timeout (the guest agent's kill -9), this client's
        # socket closes and the server kills the command's child.
        result = _recv(sock)
    sys.stdout.write(result['out'])
    sys.stderr.write(result['err'])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(result['rc'] if result['rc'] >= 0 else 128 - result['rc'])


if __name__ == '__main__':
    if sys.argv[1:2] == ['serve']:
        serve()
    elif sys.argv[1:2] == ['call']:
        call(sys.argv[2:])
    else:
        sys.exit('usage: zygote.py serve | call ARGV...')
