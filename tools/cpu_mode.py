"""Which guest CPU mode this machine's libvirt can start, for nova's
``[libvirt] cpu_mode`` (and ``cpu_models``) in the one-machine cloud.

nova's default for ``virt_type = kvm`` (and ``qemu``) is ``host-model``.
Not every machine of this project can start such a guest: on one
(``AMD EPYC``, nested KVM) every guest with ``<cpu mode='host-model'/>``
or ``host-passthrough`` died at start ("failed to set MSR 0x10a"), and so
did every boot through nova. So the cloud tries, in this order, and takes
the first mode a real, tiny, transient guest starts with:

1. ``host-model``, nova's own default (the closest to what operators run);
2. ``host-passthrough``;
3. ``none``: no ``<cpu>`` element, QEMU's default model;
4. ``custom`` with each model ``domcapabilities`` reports usable, in the
   order libvirt lists them.

Invariants:

* A mode is chosen only after a guest really started with it and was
  still running a moment later (a qemu that dies right after start is a
  refusal too); each probe guest is transient and destroyed, whatever
  happens.
* Both computes read the one answer, so they agree (live migration).
* The answer is cached with the machine's identity (CPU vendor, model,
  flags, kernel, libvirt and QEMU versions, the guest type): a cache made
  on another machine is never used; it is probed again.
* Nothing is chosen when nothing starts: exit 1 and one line naming the
  cause, so the cloud does not come up with guests that cannot boot.

    python tools/cpu_mode.py --uri URI --virt-type kvm --cache FILE
    python tools/cpu_mode.py ... --first custom:NAME   # try NAME first

It prints the ``[libvirt]`` lines for nova (``cpu_mode = ...`` and, for
``custom``, ``cpu_models = ...``) on stdout, and on stderr one line saying
what was chosen and why.
"""

import argparse
import contextlib
import hashlib
import json
import os
import platform
import sys
import time
import xml.etree.ElementTree as ET

PROBE_NAME = 'nph-cpu-probe-%d' % os.getpid()
# How long a started probe must stay running to count: qemu that
# asserts on a CPU feature exits within milliseconds of its start.
SETTLE_SECONDS = 1.0
NOVA_DEFAULT = 'host-model'


class Mode:
    """One candidate: nova's cpu_mode and, for custom, its model."""

    def __init__(self, mode, model=None):
        self.mode = mode
        self.model = model

    @classmethod
    def parse(cls, text):
        mode, _, model = text.partition(':')
        if mode not in ('host-model', 'host-passthrough', 'none', 'custom'):
            raise ValueError('unknown CPU mode %r' % text)
        if (mode == 'custom') != bool(model):
            raise ValueError('custom needs a model (custom:NAME), other '
                             'modes none: %r' % text)
        return cls(mode, model or None)

    def __str__(self):
        return '%s:%s' % (self.mode, self.model) if self.model else self.mode

    def __eq__(self, other):
        return (self.mode, self.model) == (other.mode, other.model)

    def cpu_element(self):
        """The guest's <cpu> as nova writes it for this mode."""
        if self.mode == 'none':
            return ''
        if self.mode == 'custom':
            return ("<cpu mode='custom' match='exact'>"
                    "<model fallback='forbid'>%s</model></cpu>" % self.model)
        return "<cpu mode='%s'/>" % self.mode

    def nova_lines(self):
        lines = ['cpu_mode = %s' % self.mode]
        if self.model:
            lines.append('cpu_models = %s' % self.model)
        return lines


def usable_models(domcaps_xml):
    """The custom models libvirt reports usable on this host, in its
    order."""
    root = ET.fromstring(domcaps_xml)  # noqa: S314 - this host's libvirtd
    return [m.text.strip() for m in
            root.findall("./cpu/mode[@name='custom']/model[@usable='yes']")
            if m.text and m.text.strip()]


def candidates(domcaps_xml, first=()):
    """Every mode to try, in order; ``first`` goes before the rest."""
    order = list(first)
    order += [Mode('host-model'), Mode('host-passthrough'), Mode('none')]
    order += [Mode('custom', m) for m in usable_models(domcaps_xml)]
    seen = []
    for mode in order:
        if mode not in seen:
            seen.append(mode)
    return seen


def guest_xml(mode, virt_type, name=PROBE_NAME):
    # Tiny and diskless: it spins in SeaBIOS, which is enough for qemu to
    # set up its vCPUs (where a refused CPU model fails).
    return ("<domain type='%s'><name>%s</name><memory unit='MiB'>16</memory>"
            "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os>%s"
            "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
            "</devices></domain>" % (virt_type, name, mode.cpu_element()))


def try_start(conn, mode, virt_type, sleep=time.sleep):
    """None when a guest starts and keeps running with ``mode``, else the
    reason (libvirt's error's first line)."""
    dom = None
    try:
        dom = conn.createXML(guest_xml(mode, virt_type), 0)
        sleep(SETTLE_SECONDS)
        if not dom.isActive():
            return 'the guest stopped right after its start'
        return None
    except Exception as exc:  # libvirt's error, whatever its binding
        # libvirt's first line, qemu's own words at its end: "internal
        # error: qemu unexpectedly closed the monitor: <time>
        # qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69"
        lines = str(exc).strip().splitlines()
        if not lines:
            return type(exc).__name__
        return lines[0].rsplit('error:', 1)[-1].strip()
    finally:
        if dom is not None:
            # Already gone (it died at start): nothing to undo.
            with contextlib.suppress(Exception):
                dom.destroy()


def choose(conn, virt_type, first=(), sleep=time.sleep):
    """(the first mode that starts, [(mode, reason) refused before it])."""
    caps = conn.getDomainCapabilities(None, 'x86_64', None, virt_type, 0)
    refused = []
    for mode in candidates(caps, first):
        why = try_start(conn, mode, virt_type, sleep=sleep)
        if why is None:
            return mode, refused
        refused.append((mode, why))
    return None, refused


def machine_key(conn, virt_type, cpuinfo='/proc/cpuinfo'):
    """What a cached answer holds for: the CPU (vendor, family, model,
    flags), the kernel, libvirt's and QEMU's versions and the guest type."""
    first = {}
    with open(cpuinfo) as f:
        for line in f:
            if not line.strip():
                break  # the first processor is enough
            key, _, value = line.partition(':')
            first[key.strip()] = value.strip()
    parts = [first.get(k, '') for k in
             ('vendor_id', 'cpu family', 'model', 'model name', 'flags')]
    parts += [platform.release(), str(conn.getLibVersion()),
              str(conn.getVersion()), virt_type]
    return hashlib.sha256('\n'.join(parts).encode()).hexdigest()[:32]


def load_cache(path, key):
    try:
        with open(path) as f:
            data = json.load(f)
        if data.get('machine') == key:
            return Mode.parse(data['mode']), data.get('refused', [])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None, None


def save_cache(path, key, mode, refused):
    tmp = '%s.%d' % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o644)
    with os.fdopen(fd, 'w') as f:
        json.dump({'machine': key, 'mode': str(mode),
                   'refused': [[str(m), why] for m, why in refused],
                   'probed': time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                           time.gmtime())}, f)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--uri', required=True)
    parser.add_argument('--virt-type', default='kvm', choices=('kvm', 'qemu'))
    parser.add_argument('--cache', help='the answer, kept with the cloud')
    parser.add_argument('--first', action='append', default=[],
                        help='a mode to try before the others (MODE or '
                             'custom:MODEL), to see the fallback')
    args = parser.parse_args(argv)
    try:
        first = [Mode.parse(m) for m in args.first]
    except ValueError as exc:
        print('cpu_mode: %s' % exc, file=sys.stderr)
        return 2
    import libvirt  # only here: the helpers above are tested without it
    libvirt.registerErrorHandler(lambda *_: None, None)  # ours, not stderr
    try:
        conn = libvirt.open(args.uri)
    except libvirt.libvirtError as exc:
        print('cpu_mode: cannot open %s: %s' % (args.uri, exc),
              file=sys.stderr)
        return 1
    key = machine_key(conn, args.virt_type)
    mode = refused = None
    if args.cache and not first:
        mode, refused = load_cache(args.cache, key)
        how = 'cached for this machine'
    if mode is None:
        mode, refused = choose(conn, args.virt_type, first)
        how = 'probed'
        if mode is not None and args.cache and not first:
            save_cache(args.cache, key, mode, refused)
    if mode is None:
        print('cpu_mode: no guest CPU mode starts on this machine (%s): %s'
              % (args.uri, '; '.join('%s: %s' % (m, why)
                                     for m, why in refused)), file=sys.stderr)
        return 1
    said = '; '.join('%s refused: %s' % (m, why) for m, why in refused)
    print('cpu_mode: %s (%s%s)' % (mode, how, '; ' + said if said else ''),
          file=sys.stderr)
    print('\n'.join(mode.nova_lines()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
