"""Strict reading of untrusted JSON: the one place every JSON input
(snapshots, the overcommit file, the isolation state) is parsed.

Pure: text in, plain values out, ``InputError`` (a ``ValueError``) with
one message otherwise. (Numbers in text are read by
``cpuset.parse_uint``: ASCII digits only.)

Invariants:

* nothing here costs more than linear time and memory in the size of its
  input, and every input has a size bound: no integer of more than
  ``MAX_DIGITS`` digits is converted, no JSON document larger than its
  caller's limit or nested deeper than ``MAX_JSON_DEPTH`` is accepted;
* JSON numbers are finite and fit 64 bits (a ratio of ``1e400`` or an
  integer too large for a float is refused, not turned into ``inf`` or an
  ``OverflowError`` later); ``NaN`` and ``Infinity`` are refused; an
  object naming a key twice is refused; strings hold no lone surrogate
  (they could not be printed);
* error messages are one line and short whatever the input: values are
  shown through ``show``.
"""

import json
import math
import re
import typing

# Enough for any 64-bit value; longer digit strings are refused before
# any conversion (int() of a long string is quadratic).
MAX_DIGITS = 20
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Snapshots and state files are a few levels deep (snapshot, domains,
# domain, memory map); 32 leaves room and stays far from the recursion
# limit.
MAX_JSON_DEPTH = 32
_MAX_FLOAT_TEXT = 64  # characters of a JSON number with a fraction


# The only way a lone surrogate gets into a string parsed from valid
# UTF-8 text is a JSON escape in the range D800-DFFF.
_SURROGATE_ESCAPE = re.compile(r'\\u[dD][89a-fA-F]')


class InputError(ValueError):
    """Untrusted text that is not what it must be."""


def show(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to about ``limit`` characters, one line."""
    text = repr(value)
    if len(text) > limit:
        text = text[:limit] + '...'
    return text


def _json_int(text: str) -> int:
    digits = text.lstrip('-')
    if len(digits) > MAX_DIGITS:
        raise InputError('integer %s is out of range' % show(text))
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise InputError('integer %s is out of range' % show(text))
    return value


def _json_float(text: str) -> float:
    if len(text) > _MAX_FLOAT_TEXT:
        raise InputError('number %s is too long' % show(text))
    value = float(text)
    if not math.isfinite(value):
        raise InputError('number %s is out of range' % show(text))
    return value


def _json_constant(name: str) -> typing.NoReturn:
    raise InputError('%s is not a number JSON allows' % name)


def _json_object(pairs: list[tuple[str, typing.Any]]
                 ) -> dict[str, typing.Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise InputError('key %s appears twice in one object'
                                 % show(key))
            seen.add(key)
    return result


def _printable(text: str) -> None:
    if not text.isascii():
        try:
            text.encode('utf-8')
        except UnicodeEncodeError:
            raise InputError('string %s holds a lone surrogate'
                             % show(text)) from None


def _check_tree(value: object, max_depth: int, strings: bool = True
                ) -> None:
    """Depth (and, with ``strings``, the strings) of a parsed document,
    without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _printable(item)
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth > max_depth:
            raise InputError('nested deeper than %d levels' % max_depth)
        children = item.values() if isinstance(item, dict) else item
        if strings:
            if isinstance(item, dict):
                for key in item:
                    _printable(key)
            stack.extend((child, depth + 1) for child in children)
        else:  # only containers matter
            stack.extend((child, depth + 1) for child in children
                         if isinstance(child, (dict, list)))


def _may_hold_surrogates(text: str) -> bool:
    """False when no string parsed from ``text`` can hold a lone
    surrogate: the text itself holds none and escapes none."""
    if not text.isascii():
        try:
            text.encode('utf-8')
        except UnicodeEncodeError:
            return True
    return _SURROGATE_ESCAPE.search(text) is not None


def loads_json(data: object, what: str, max_bytes: int,
               max_depth: int = MAX_JSON_DEPTH) -> typing.Any:
    """Parse a JSON document (UTF-8 bytes or text) with the rules above.

    ``what`` names the document in messages (``'snapshot'``,
    ``'overcommit file /x'``); every failure is an InputError whose
    message starts with it.
    """
    if isinstance(data, (bytes, bytearray)):
        if len(data) > max_bytes:
            raise InputError('%s is larger than %d bytes'
                             % (what, max_bytes))
        try:
            data = bytes(data).decode('utf-8')
        except UnicodeDecodeError as exc:
            raise InputError('%s is not valid UTF-8 (byte %d)'
                             % (what, exc.start)) from None
    elif not isinstance(data, str):
        raise InputError('%s must be text, not %s'
                         % (what, type(data).__name__))
    elif len(data) > max_bytes:
        raise InputError('%s is larger than %d bytes' % (what, max_bytes))
    try:
        value = json.loads(data, parse_int=_json_int,
                           parse_float=_json_float,
                           parse_constant=_json_constant,
                           object_pairs_hook=_json_object)
    except InputError as exc:  # valid JSON, beyond what we accept
        raise InputError('%s: %s' % (what, exc)) from None
    except RecursionError:
        # The C decoder recurses once per level; the limit protects it.
        raise InputError('%s is not valid JSON: nested deeper than %d '
                         'levels' % (what, max_depth)) from None
    except ValueError as exc:  # json.JSONDecodeError
        raise InputError('%s is not valid JSON: %s' % (what, exc)) from None
    try:
        # Walking every string is most of the cost of a large snapshot;
        # one scan of the text tells whether any needs a look.
        _check_tree(value, max_depth, strings=_may_hold_surrogates(data))
    except InputError as exc:
        raise InputError('%s: %s' % (what, exc)) from None
    return value
