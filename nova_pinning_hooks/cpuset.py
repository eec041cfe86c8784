"""CPU sets in libvirt's syntax: ``0-3,^2,8``.

A CPU set is a ``frozenset`` of non-negative ints everywhere in this package;
this module is the only place that turns text into one and back.

Invariants:

* ``parse(format(s)) == s`` for every set ``s``.
* ``format`` is canonical: sorted, maximal ranges, no exclusions, so two
  equal sets always print the same text (the plan's JSON relies on it).
* ``parse`` rejects anything it does not fully understand with
  ``CpusetError`` naming the offending part; it never guesses.
"""

import functools

# A bound on CPU ids: larger numbers are typos, not hosts (Linux's
# NR_CPUS tops out at 8192; leave room).
MAX_CPU_ID = 65535


class CpusetError(ValueError):
    """A CPU set text that cannot be parsed, or names CPUs it must not."""


def _parse_int(token, text):
    token = token.strip()
    if not token.isdigit():
        raise CpusetError('invalid CPU number %r in CPU set %r'
                          % (token, text))
    value = int(token)
    if value > MAX_CPU_ID:
        raise CpusetError('CPU number %d in CPU set %r is out of range'
                          % (value, text))
    return value


def _parse_range(part, text):
    if '-' in part:
        lo, _, hi = part.partition('-')
        first, last = _parse_int(lo, text), _parse_int(hi, text)
        if first > last:
            raise CpusetError('reversed range %r in CPU set %r'
                              % (part, text))
        return range(first, last + 1)
    value = _parse_int(part, text)
    return range(value, value + 1)


@functools.lru_cache(maxsize=4096)
def parse(text, allow_empty=False):
    """Parse libvirt CPU set syntax into a frozenset of CPU ids.

    ``0-3,^2,8`` gives ``{0, 1, 3, 8}``. Exclusions (``^N`` or ``^N-M``)
    apply to the whole set whatever their position, as in libvirt.
    An empty text or a set that ends up empty is an error unless
    ``allow_empty``.
    """
    if not isinstance(text, str):
        raise CpusetError('CPU set must be a string, not %r' % (text,))
    include, exclude = set(), set()
    if text.strip():
        for raw in text.split(','):
            part = raw.strip()
            if not part:
                raise CpusetError('empty element in CPU set %r' % text)
            if part.startswith('^'):
                exclude.update(_parse_range(part[1:], text))
            else:
                include.update(_parse_range(part, text))
    result = frozenset(include - exclude)
    if not result and not allow_empty:
        raise CpusetError('CPU set %r is empty' % text)
    return result


@functools.lru_cache(maxsize=4096)
def format(cpus):  # noqa: A001 - mirrors parse()
    """Format a set of CPU ids canonically: ``{0, 1, 2, 5}`` -> ``0-2,5``."""
    if not cpus:
        return ''
    ordered = sorted(cpus)
    parts = []
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        parts.append(_span(start, prev))
        start = prev = cpu
    parts.append(_span(start, prev))
    return ','.join(parts)


def _span(first, last):
    if first == last:
        return str(first)
    return '%d-%d' % (first, last)


def parse_optional(text, what, known=None):
    """Parse an optional CPU set option; None or '' means "not set".

    With ``known`` (the host's CPUs), naming a CPU outside it is an error
    that says which option and which CPUs, because a typo there would
    silently change which CPUs guests may use.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    try:
        cpus = parse(text)
    except CpusetError as exc:
        raise CpusetError('%s: %s' % (what, exc)) from None
    if known is not None:
        unknown = cpus - known
        if unknown:
            raise CpusetError('%s names CPUs the host does not have: %s'
                              % (what, format(frozenset(unknown))))
    return cpus
