"""D-Bus messages as the isolation agent reads them, by the
specification: pure functions over bytes, no socket, no library parser.

The agent's connection to systemd (``systemdbus.Bus``) takes from what
arrives only the answers to its own calls; everything else is stepped
over by the lengths of its fixed header (``Fixed.length``), so the
stream stays in step whatever a message carries in its header fields or
body. Header fields are parsed (``fields``) only for a method return or
an error, and only to find the answer; the body only of that answer,
and only in the shapes systemd's answers to our calls have (``string``:
``s`` or ``o``; ``variant_bytes``: ``v`` holding ``ay``).

Invariants:

* every function takes a ``bytes``-like buffer and returns or raises
  ``WireError``, nothing else: no index, struct or Unicode error, no
  recursion beyond ``MAX_NESTING``, no loop that does not advance: the
  work is linear in the bytes given (an array is stepped over by its
  length, never element by element);
* header fields of unknown codes are ignored, as the specification
  asks (dbus-broker relays them; jeepney raised on them: issue 60); a
  known code of another type than the specification's is a
  ``WireError`` (the message is then not the answer, and is skipped);
* no signature is accepted that the specification refuses: an empty
  struct ``()``, a dict entry outside an array, nesting beyond 32
  arrays or 32 structs; ``h`` (a descriptor's index) is a 32-bit
  number like any other, never looked up;
* lengths are the specification's: a message of at most 128 MiB, an
  array of at most 64 MiB.
"""

import struct
import typing

FIXED = 16  # the fixed header: order, type, flags, version, 3 x uint32
MAX_MESSAGE = 1 << 27
MAX_ARRAY = 1 << 26
MAX_DEPTH = 32  # of arrays, and of structs (each), in a signature
MAX_NESTING = 64  # of structs and variants in a value, together

# Message types (the fixed header's second byte).
METHOD_CALL, METHOD_RETURN, ERROR, SIGNAL = 1, 2, 3, 4

# Header field codes and the type the specification gives each.
PATH, INTERFACE, MEMBER, ERROR_NAME, REPLY_SERIAL = 1, 2, 3, 4, 5
DESTINATION, SENDER, SIGNATURE, UNIX_FDS = 6, 7, 8, 9
FIELD_TYPES = {PATH: 'o', INTERFACE: 's', MEMBER: 's', ERROR_NAME: 's',
               REPLY_SERIAL: 'u', DESTINATION: 's', SENDER: 's',
               SIGNATURE: 'g', UNIX_FDS: 'u'}

_FIXED_SIZES = {'y': 1, 'b': 4, 'n': 2, 'q': 2, 'i': 4, 'u': 4, 'x': 8,
                't': 8, 'd': 8, 'h': 4}
_ALIGN = dict(_FIXED_SIZES, s=4, o=4, g=1, v=1, a=4)
_ALIGN['('] = _ALIGN['{'] = 8
_ORDERS = {ord('l'): '<', ord('B'): '>'}


class WireError(ValueError):
    """Bytes that are not what the specification allows there."""


class Fixed(typing.NamedTuple):
    """A message's fixed header."""

    order: str        # struct's byte order: '<' or '>'
    kind: int         # METHOD_CALL ... SIGNAL, or another (ignored)
    serial: int
    fields_length: int
    body_length: int

    @property
    def header_length(self) -> int:
        """The fixed header and the header fields, padded to 8."""
        return FIXED + self.fields_length + -self.fields_length % 8

    @property
    def length(self) -> int:
        """The whole message."""
        return self.header_length + self.body_length


def fixed(buf: typing.Any, at: int = 0) -> Fixed:
    """The fixed header at ``buf[at:at + FIXED]``."""
    if len(buf) - at < FIXED:
        raise WireError('a fixed header of %d bytes' % (len(buf) - at))
    order = _ORDERS.get(buf[at])
    if order is None or buf[at + 3] != 1:
        raise WireError('not a D-Bus message (byte order %r, version %d)'
                        % (bytes(buf[at:at + 1]), buf[at + 3]))
    body, serial, fields = struct.unpack_from(order + 'III', buf, at + 4)
    head = Fixed(order, buf[at + 1], serial, fields, body)
    if fields > MAX_ARRAY or head.length > MAX_MESSAGE:
        raise WireError('a message of %d bytes, header fields %d (at most '
                        '%d, %d)' % (head.length, fields, MAX_MESSAGE,
                                     MAX_ARRAY))
    return head


class _Reader:
    """A cursor over one message's bytes (offsets from its start, so
    that alignment is the message's)."""

    def __init__(self, buf: typing.Any, order: str, pos: int,
                 end: int) -> None:
        self.buf, self.order, self.pos, self.end = buf, order, pos, end

    def align(self, n: int) -> None:
        pad = -self.pos % n
        if self.pos + pad > self.end or any(
                self.buf[self.pos:self.pos + pad]):
            raise WireError('bad padding at %d' % self.pos)
        self.pos += pad

    def take(self, n: int) -> typing.Any:
        if n < 0 or self.pos + n > self.end:
            raise WireError('%d bytes wanted at %d, %d left'
                            % (n, self.pos, self.end - self.pos))
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def uint32(self) -> int:
        self.align(4)
        value: int = struct.unpack(self.order + 'I', self.take(4))[0]
        return value

    def text(self, length: int) -> str:
        data = bytes(self.take(length + 1))
        if data[-1] != 0 or 0 in data[:-1]:
            raise WireError('a string without its terminating NUL')
        try:
            return data[:-1].decode('utf-8')
        except UnicodeDecodeError:
            raise WireError('a string that is not UTF-8') from None

    def string(self) -> str:  # s, o
        return self.text(self.uint32())

    def signature(self) -> str:  # g
        return self.text(self.take(1)[0])

    def skip(self, sig: str, i: int, depth: int = 0) -> int:
        """Step over one value of the single complete type at
        ``sig[i]`` (a valid signature: ``_type_end``); the index after
        that type. ``depth``: the structs and variants around it."""
        if depth > MAX_NESTING:
            raise WireError('nested deeper than %d' % MAX_NESTING)
        code = sig[i:i + 1]
        if code in _FIXED_SIZES:
            self.align(_ALIGN[code])
            self.take(_FIXED_SIZES[code])
        elif code in ('s', 'o'):
            self.string()
        elif code == 'g':
            self.signature()
        elif code == 'v':
            inner = self.signature()
            if _type_end(inner, 0) != len(inner):
                raise WireError('a variant of signature %r' % inner)
            self.skip(inner, 0, depth + 1)
        elif code == 'a':
            length = self.uint32()
            if length > MAX_ARRAY:
                raise WireError('an array of %d bytes' % length)
            self.align(_ALIGN[sig[i + 1]])
            self.take(length)  # stepped over whole, not element by element
            return _type_end(sig, i)
        elif code == '(':
            self.align(8)
            i += 1
            while sig[i:i + 1] != ')':
                i = self.skip(sig, i, depth + 1)
        else:
            raise WireError('type %r in signature %r' % (code, sig))
        return i + 1


def _type_end(sig: str, i: int, arrays: int = 0, structs: int = 0) -> int:
    """The index after the single complete type at ``sig[i]``, from the
    signature alone; ``WireError`` for one the specification refuses."""
    if arrays > MAX_DEPTH or structs > MAX_DEPTH:
        raise WireError('nested deeper than %d' % MAX_DEPTH)
    code = sig[i:i + 1]
    if code in _FIXED_SIZES or code in ('s', 'o', 'g', 'v'):
        return i + 1
    if code == 'a':
        if sig[i + 1:i + 2] == '{':  # a dict entry: only in an array
            key = sig[i + 2:i + 3]
            if key not in _FIXED_SIZES and key not in ('s', 'o', 'g'):
                raise WireError('a dict entry keyed by %r' % key)
            j = _type_end(sig, i + 3, arrays + 1, structs + 1)
            if sig[j:j + 1] != '}':
                raise WireError('a dict entry not closed in %r' % sig)
            return j + 1
        return _type_end(sig, i + 1, arrays + 1, structs)
    if code == '(':
        j = i + 1
        if sig[j:j + 1] == ')':
            raise WireError('an empty struct')
        while sig[j:j + 1] != ')':
            if j >= len(sig):
                raise WireError('a struct not closed in %r' % sig)
            j = _type_end(sig, j, arrays, structs + 1)
        return j + 1
    raise WireError('type %r in signature %r' % (code, sig))


def fields(buf: typing.Any, head: Fixed,
           at: int = 0) -> dict[int, typing.Union[str, int]]:
    """The header fields of the message at ``buf[at:]`` whose fixed
    header is ``head`` (``buf`` holds at least ``head.header_length``
    bytes from ``at``): ``{code: value}`` for the codes of
    ``FIELD_TYPES``; fields of other codes are stepped over."""
    if len(buf) - at < head.header_length:
        raise WireError('a header of %d bytes, %d given'
                        % (head.header_length, len(buf) - at))
    view = memoryview(buf)[at:at + head.header_length]
    r = _Reader(view, head.order, 12, FIXED + head.fields_length)
    if r.uint32() != head.fields_length:
        raise WireError('the header fields\' length changed')
    found: dict[int, typing.Union[str, int]] = {}
    while r.pos < r.end:
        r.align(8)
        code = r.take(1)[0]
        sig = r.signature()
        want = FIELD_TYPES.get(code)
        if want is None:  # unknown: ignored, as the specification asks
            if _type_end(sig, 0) != len(sig):
                raise WireError('a variant of signature %r' % sig)
            r.skip(sig, 0)
            continue
        if sig != want:
            raise WireError('header field %d of type %r, not %r'
                            % (code, sig, want))
        if code in found:
            raise WireError('header field %d twice' % code)
        found[code] = r.uint32() if want == 'u' else (
            r.signature() if want == 'g' else r.string())
    if any(view[r.end:]):
        raise WireError('bad padding after the header fields')
    return found


def _body(buf: typing.Any, head: Fixed, at: int) -> _Reader:
    """A cursor on the body of the whole message at ``buf[at:]``."""
    if len(buf) - at < head.length:
        raise WireError('a message of %d bytes, %d given'
                        % (head.length, len(buf) - at))
    view = memoryview(buf)[at:at + head.length]
    return _Reader(view, head.order, head.header_length, head.length)


def string(buf: typing.Any, head: Fixed, at: int = 0) -> str:
    """The first argument of a body that starts with ``s`` or ``o``."""
    return _body(buf, head, at).string()


def variant_bytes(buf: typing.Any, head: Fixed,
                  at: int = 0) -> tuple[str, typing.Optional[bytes]]:
    """A body of signature ``v``: ``(its signature, the bytes)`` when
    the variant holds ``ay``, ``(its signature, None)`` otherwise (not
    read further)."""
    r = _body(buf, head, at)
    sig = r.signature()
    if sig != 'ay':
        return sig, None
    length = r.uint32()
    if length > MAX_ARRAY:
        raise WireError('an array of %d bytes' % length)
    value = bytes(r.take(length))
    if r.pos != r.end:
        raise WireError('%d bytes after the variant' % (r.end - r.pos))
    return sig, value


def step_over(buf: typing.Any, at: int,
              limit: int) -> tuple[int, int, int]:
    """Step over the whole messages at ``buf[at:]`` that cannot be an
    answer (method calls, signals, types the specification does not
    know), at most ``limit`` of them, from their fixed headers alone:
    ``(the offset after them, how many, their bytes)``. Stops at an
    answer's type, at a message not whole in ``buf``, or at a fixed
    header that ``fixed`` refuses (it raises there). The one loop a
    flood of small signals runs through (issue 60: about 0.5 us a
    message, not a parse of its header each)."""
    end = len(buf)
    start = at
    count = 0
    unpack = struct.unpack_from
    while count < limit and end - at >= FIXED:
        kind = buf[at + 1]
        order = _ORDERS.get(buf[at])
        if kind in (METHOD_RETURN, ERROR) or order is None or \
                buf[at + 3] != 1:
            break
        body, fields = unpack(order + 'I4xI', buf, at + 4)
        length = FIXED + fields + -fields % 8 + body
        if length > MAX_MESSAGE or fields > MAX_ARRAY or \
                at + length > end:
            break
        at += length
        count += 1
    return at, count, at - start
