"""CPU sets in libvirt's syntax: ``0-3,^2,8``.

A CPU set is a ``frozenset`` of non-negative ints everywhere in this package;
this module is the only place that turns text into one and back.

Invariants:

* ``parse(format(s)) == s`` for every set ``s``.
* ``format`` is canonical: sorted, maximal ranges, no exclusions, so two
  equal sets always print the same text (the plan's JSON relies on it).
* ``parse`` rejects anything it does not fully understand with
  ``CpusetError`` naming the offending part; it never guesses. Numbers
  are ASCII digits only (``str.isdigit`` also accepts ``'٣'`` and
  ``'²'``, and ``int`` accepts ``'1_0'`` and blanks: both refused).
* ``parse`` costs time linear in the text, whatever it says: ranges are
  merged as intervals before one expansion, the text is at most
  ``MAX_TEXT`` characters and a set at most ``MAX_CPU_ID + 1`` CPUs, so
  ``0-65535`` repeated 20,000 times is refused (too long) and 2,000
  times costs one expansion.
"""

import functools
import typing

# A bound on CPU ids: larger numbers are typos, not hosts (Linux's
# NR_CPUS tops out at 8192; leave room).
MAX_CPU_ID = 65535
MAX_TEXT = 65536  # characters in one CPU set text
MAX_DIGITS = 10


def parse_uint(text: object, what: str, maximum: int) -> int:
    """A non-negative int from ASCII digits only, at most ``maximum``.
    Raises ValueError naming ``what``."""
    if not isinstance(text, str):
        raise ValueError('%s must be a number, not %r' % (what, text))
    token = text.strip()
    if not (token.isascii() and token.isdigit()) or \
            len(token) > MAX_DIGITS:
        raise ValueError('%s: invalid number %r' % (what, text[:32]))
    value = int(token)
    if value > maximum:
        raise ValueError('%s: %d is more than %d' % (what, value, maximum))
    return value


class CpusetError(ValueError):
    """A CPU set text that cannot be parsed, or names CPUs it must not."""


def _parse_int(token: str, text: str) -> int:
    token = token.strip()
    if not (token.isascii() and token.isdigit()) or \
            len(token) > MAX_DIGITS:
        raise CpusetError('invalid CPU number %r in CPU set %r'
                          % (token[:32], text[:64]))
    value = int(token)
    if value > MAX_CPU_ID:
        raise CpusetError('CPU number %d in CPU set %r is out of range'
                          % (value, text))
    return value


def _parse_range(part: str, text: str) -> tuple[int, int]:
    if '-' in part:
        lo, _, hi = part.partition('-')
        first, last = _parse_int(lo, text), _parse_int(hi, text)
        if first > last:
            raise CpusetError('reversed range %r in CPU set %r'
                              % (part, text))
        return first, last
    value = _parse_int(part, text)
    return value, value


def _expand(intervals: typing.Iterable[tuple[int, int]],
            limit: int = MAX_CPU_ID) -> list[int]:
    """The CPUs of ``intervals`` ((first, last) pairs) up to ``limit``,
    merged first so that overlapping ranges cost nothing more."""
    cpus: list[int] = []
    end = -1
    for first, last in sorted(intervals):
        last = min(last, limit)
        if last <= end:
            continue
        cpus.extend(range(max(first, end + 1), last + 1))
        end = last
    return cpus


def _count(intervals: typing.Iterable[tuple[int, int]], limit: int) -> int:
    """How many CPUs ``_expand`` would return, without expanding."""
    total, end = 0, -1
    for first, last in sorted(intervals):
        last = min(last, limit)
        if last <= end:
            continue
        total += last - max(first, end + 1) + 1
        end = last
    return total


@functools.lru_cache(maxsize=4096)
def parse(text: object, allow_empty: bool = False,
          limit: typing.Optional[int] = None,
          max_count: typing.Optional[int] = None) -> frozenset[int]:
    """Parse libvirt CPU set syntax into a frozenset of CPU ids.

    ``0-3,^2,8`` gives ``{0, 1, 3, 8}``. Exclusions (``^N`` or ``^N-M``)
    apply to the whole set whatever their position, as in libvirt.
    An empty text or a set that ends up empty is an error unless
    ``allow_empty``.

    ``limit``: the highest CPU id the host has; CPUs above it are left
    out of the result (a set naming only such CPUs comes out empty, not
    an error), so that a set costs at most the host's size in memory.
    ``max_count``: a text naming more CPUs than this (up to ``limit``,
    before exclusions) is an error, found before any set is built.
    """
    if not isinstance(text, str):
        raise CpusetError('CPU set must be a string, not %r' % (text,))
    if len(text) > MAX_TEXT:
        raise CpusetError('CPU set of %d characters is too long (at most '
                          '%d)' % (len(text), MAX_TEXT))
    include, exclude = [], []
    if text.strip():
        for raw in text.split(','):
            part = raw.strip()
            if not part:
                raise CpusetError('empty element in CPU set %r'
                                  % text[:64])
            if part.startswith('^'):
                exclude.append(_parse_range(part[1:], text))
            else:
                include.append(_parse_range(part, text))
    top = MAX_CPU_ID if limit is None else limit
    if max_count is not None and _count(include, top) > max_count:
        raise CpusetError('CPU set %.64r names more than %d CPUs'
                          % (text, max_count))
    result = frozenset(_expand(include, top)).difference(
        _expand(exclude, top))
    if not result and limit is not None and include:
        return result  # only CPUs this host lacks
    if not result and not allow_empty:
        raise CpusetError('CPU set %r is empty' % text)
    return result


@functools.lru_cache(maxsize=4096)
def format(cpus: frozenset[int]) -> str:  # noqa: A001 - mirrors parse()
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


def _span(first: int, last: int) -> str:
    if first == last:
        return str(first)
    return '%d-%d' % (first, last)


def parse_optional(text: object, what: str,
                   known: typing.Optional[frozenset[int]] = None
                   ) -> typing.Optional[frozenset[int]]:
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
