"""The kernel's hexadecimal CPU masks (and systemd's D-Bus byte masks),
as sets. Pure: no I/O.

``/sys/devices/virtual/workqueue/cpumask`` and irqbalance's ``setup``
answer print a CPU set as the kernel's ``%*pb``: hexadecimal, most
significant first, in comma-separated groups of 32 bits
(``00000000,000000ff``). ``parse`` reads that (with or without commas,
leading zeros optional); ``format`` writes it the same way, so a value
written and read back compares equal as a set.

Invariants: ``parse(format(s)) == s`` for every set of CPU ids below
``MAX_CPUS``; a text that is not such a mask is ``cpuset.CpusetError``
(a ValueError), never a wrong set.
"""

from nova_pinning_hooks.engine import cpuset

MAX_CPUS = 1 << 16  # beyond any host; bounds the text we accept
_HEX = frozenset('0123456789abcdefABCDEF')


def parse(text: str) -> frozenset[int]:
    """The set of CPUs in a kernel CPU mask such as ``ff`` or
    ``00000000,000000f0``."""
    if not isinstance(text, str):
        raise cpuset.CpusetError('CPU mask must be a string')
    groups = text.strip().split(',')
    if not groups or len(groups) > MAX_CPUS // 32 or any(
            not g or len(g) > 8 or not set(g) <= _HEX for g in groups):
        raise cpuset.CpusetError('%.64r is not a CPU mask' % text)
    value = 0
    for group in groups:
        value = (value << 32) | int(group, 16)
    cpus, bit = set(), 0
    while value:
        if value & 1:
            cpus.add(bit)
        value >>= 1
        bit += 1
    return frozenset(cpus)


def format(cpus: frozenset[int]) -> str:  # noqa: A001 - mirrors parse()
    """The kernel's text for ``cpus``: groups of 8 hex digits."""
    value = 0
    for cpu in cpus:
        if not 0 <= cpu < MAX_CPUS:
            raise cpuset.CpusetError('CPU %r out of range' % (cpu,))
        value |= 1 << cpu
    groups = []
    while True:
        groups.append('%08x' % (value & 0xffffffff))
        value >>= 32
        if not value:
            break
    return ','.join(reversed(groups))


def to_bytes(cpus: frozenset[int]) -> bytes:
    """systemd's D-Bus encoding of a CPU set (``AllowedCPUs``, ``ay``):
    CPU n is bit n % 8 of byte n // 8 (``cpu_set_to_dbus``); CPUs 0-1
    are ``b'\\x03'``, the empty set no bytes."""
    data = bytearray()
    for cpu in cpus:
        if not 0 <= cpu < MAX_CPUS:
            raise cpuset.CpusetError('CPU %r out of range' % (cpu,))
        if cpu // 8 >= len(data):
            data.extend(bytes(cpu // 8 + 1 - len(data)))
        data[cpu // 8] |= 1 << (cpu % 8)
    return bytes(data)


def from_bytes(data: bytes) -> frozenset[int]:
    """The CPU set in systemd's D-Bus encoding (trailing zero bytes, as
    systemd sends them, change nothing)."""
    if len(data) > MAX_CPUS // 8:
        raise cpuset.CpusetError('a CPU mask of %d bytes' % len(data))
    return frozenset(i * 8 + bit for i, byte in enumerate(data)
                     for bit in range(8) if byte & (1 << bit))
