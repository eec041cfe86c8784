"""libvirt as the adapter sees it: the only module of the package that
imports libvirt.

What the connection (``virt``), its reads (``virtread``) and its writes
(``virtwrite``) share: the libvirt module itself (``libvirt``, the one
place tests swap it: ``tests/fixtures.py``), the error codes they sort
faults by (``GONE``, ``BUSY``, ``code``), why libvirt holds a paused
domain (``HELD``) and what its running job is (``JOB_NONE``,
``JOB_OPERATION``), the time-bound fault (``LibvirtTimeout``), the clock
of samples (``now``), the pid libvirt recorded for a guest
(``qemu_pid``) and how a connection opens (``open_connection``: with
credentials from libvirt's auth.conf where libvirtd asks for them).
It imports none of them back: they import it.

Invariants:

* The three modules reach libvirt as ``libvirtapi.libvirt`` at call time,
  never by a name bound at import: a swapped module is seen at once.
* ``GONE``, ``BUSY``, ``HELD`` and the ``JOB_`` names are read from
  libvirt at import; the fake libvirt uses the same numbers, so they
  match its errors too.
"""

import time
import typing

from nova_pinning_hooks.host import qemuproc

# The binding is not a requirement of the package (the ``libvirt`` extra
# brings it): inside nova-compute nova's environment has its own, which a
# requirement made pip replace with the constraints' libvirt-python,
# built from source. Without it the package still imports (planning a
# snapshot, --version need no libvirt); the first use of libvirt raises
# ``BindingMissing``, which the commands print as one line.
MISSING = ('the libvirt Python binding is not installed (no module '
           'libvirt): pip install "nova-pinning-hooks[libvirt]", or the '
           "distribution's package (python3-libvirt)")


class BindingMissing(ImportError):
    """libvirt was used where its Python binding is not installed."""


class _Missing:
    """Stands in for the libvirt module where it cannot be imported."""

    def __getattr__(self, name: str) -> typing.NoReturn:
        raise BindingMissing(MISSING)


try:
    # "as libvirt": the name is the adapter's (virt, virtread and
    # virtwrite reach it here), exported as such.
    import libvirt as libvirt
except ImportError:
    libvirt = _Missing()


_T = typing.TypeVar('_T')


class HostCalls(typing.Protocol):
    """What the reader and the writer (``virtread``, ``virtwrite``) use
    of their ``virt.Host`` to reach libvirt: its connection and its
    bounded calls (not imported here: ``virt`` imports them)."""
    # (connection, {uuid: domain}) of the last listing
    listed: tuple[typing.Any, dict[str, typing.Any]]

    def connection(self) -> typing.Any: ...

    def call(self, kind: str, api: str, func: typing.Callable[..., _T],
             *args: typing.Any) -> _T: ...

    def with_reconnect(self, func: typing.Callable[[], _T]) -> _T: ...


def _ignore_error(_ctx: typing.Any, _err: typing.Any) -> None:
    """libvirt's default handler prints every error on stderr
    (``libvirt: XML-RPC error : ...``); the caller reports it once."""


def quiet_errors() -> None:
    """Stop libvirt printing its own error lines: for our commands, whose
    errors are one line of their own. Process-wide, so never called in
    nova-compute (nova's libvirt shares the handler)."""
    libvirt.registerErrorHandler(_ignore_error, None)


def binding_version() -> str:
    """The libvirt library version the binding was loaded with
    (``9.0.0``): a local call, no daemon asked. ``BindingMissing`` where
    there is no binding."""
    number = int(libvirt.getVersion())
    return '%d.%d.%d' % (number // 1000000, number // 1000 % 1000,
                         number % 1000)


RUN_DIR = '/run/libvirt/qemu'
_missing = isinstance(libvirt, _Missing)
GONE = () if _missing else (libvirt.VIR_ERR_NO_DOMAIN,
                            libvirt.VIR_ERR_OPERATION_INVALID)
BUSY = () if _missing else (libvirt.VIR_ERR_OPERATION_TIMEOUT,)
# Why libvirt pauses a domain while one of its asynchronous jobs holds it
# (qemu's start, migration, save, dump, snapshot): a pin call, which needs
# a job of its own, would wait for that one to end (up to libvirt's 30 s,
# then fail as busy). A domain paused for another reason (by a client,
# after an I/O error) has no job and is written at once.
HELD = {getattr(libvirt, 'VIR_DOMAIN_PAUSED_' + name): text
        for name, text in (('STARTING_UP', 'starting up'),
                           ('MIGRATION', 'migrating'),
                           ('SAVE', 'being saved'), ('DUMP', 'being dumped'),
                           ('SNAPSHOT', 'in a snapshot'))
        if not _missing and hasattr(libvirt, 'VIR_DOMAIN_PAUSED_' + name)}
# A running domain can be held too: the source of a live migration runs
# until the switch-over (minutes for a large guest), a live dump or a
# backup never pauses it. Its job shows only in ``jobStats``: any type
# but none, "completed" included (a live dump here read "completed"
# while libvirt still wrote it out; reference/security.rst, "A guest held by a
# job
# of libvirt's"); why is in its operation.
JOB_NONE = None if _missing else libvirt.VIR_DOMAIN_JOB_NONE
JOB_OPERATION = {getattr(libvirt, 'VIR_DOMAIN_JOB_OPERATION_' + name): text
                 for name, text in (('MIGRATION_OUT', 'migrating'),
                                    ('MIGRATION_IN', 'migrating in'),
                                    ('SAVE', 'being saved'),
                                    ('DUMP', 'being dumped'),
                                    ('SNAPSHOT', 'in a snapshot'),
                                    ('BACKUP', 'in a backup'))
                 if not _missing
                 and hasattr(libvirt, 'VIR_DOMAIN_JOB_OPERATION_' + name)}
# jobStats of an incoming migration's domain: libvirt refuses it ("only on
# the source host"); that domain is held all the same.
JOB_UNSUPPORTED = None if _missing else \
    libvirt.VIR_ERR_OPERATION_UNSUPPORTED


now = time.monotonic  # the clock of samples; tests replace it

# What a connection that authenticates may ask for (libvirtd's TCP socket
# with SASL, kolla-ansible's default): the credential types nova's own
# connection offers. libvirt fills them from its auth.conf
# (LIBVIRT_AUTH_FILE, ~/.config/libvirt/auth.conf, /etc/libvirt/auth.conf:
# kolla-ansible writes one for nova) before it would ask.
CREDENTIALS = () if _missing else (
    libvirt.VIR_CRED_AUTHNAME, libvirt.VIR_CRED_ECHOPROMPT,
    libvirt.VIR_CRED_REALM, libvirt.VIR_CRED_PASSPHRASE,
    libvirt.VIR_CRED_NOECHOPROMPT, libvirt.VIR_CRED_EXTERNAL)


def _ask_nobody(credentials: typing.Any, _opaque: typing.Any) -> int:
    """libvirt's callback for credentials auth.conf lacked: nobody is
    asked (a daemon, nova-compute, a command with no terminal): refused,
    and the connection fails with libvirt's own error."""
    return -1


def open_connection(uri: str) -> typing.Any:
    """A connection to ``uri`` (``openAuth``) that authenticates where
    libvirtd asks (SASL) with the credentials of libvirt's auth.conf,
    never interactively. ``libvirt.open`` offers no credential type, and
    against SASL libvirt then finds no mechanism it may use ("No worthy
    mechs found"): every pass failed against kolla-ansible's default
    libvirtd (issue 40, L-4)."""
    return libvirt.openAuth(uri, [list(CREDENTIALS), _ask_nobody, None],
                            0)


class LibvirtTimeout(Exception):
    """A libvirt call overran its time bound or the pass's deadline."""


def qemu_pid(name: str, run_dir: str = RUN_DIR) -> typing.Optional[int]:
    """The pid libvirt recorded for a running guest, or None."""
    return qemuproc.qemu_pid(name, run_dir)


def is_host_error(exc: BaseException) -> bool:
    """True when ``exc`` is libvirt's fault (``libvirtError``) or a call
    that overran its bound (``LibvirtTimeout``): how the layers above
    tell the host's faults from their own bugs, without naming libvirt.
    """
    if isinstance(exc, LibvirtTimeout):
        return True
    return not isinstance(libvirt, _Missing) and \
        isinstance(exc, libvirt.libvirtError)


def code(exc: BaseException) -> typing.Optional[int]:
    """libvirt's error code of ``exc``; None for any other exception."""
    return exc.get_error_code() if isinstance(exc, libvirt.libvirtError) \
        else None
