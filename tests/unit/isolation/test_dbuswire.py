"""The D-Bus reader by the specification (issue 60): tables of headers
and bodies, and any bytes at all giving only ``WireError``.

``message(kind, fields, body)`` frames a message by hand, header fields
of any code and signature included: what jeepney will not make (an
unknown code, an empty struct ``()``), and what dbus-broker relays from
any local user.
"""

import struct

import hypothesis
from hypothesis import strategies
import jeepney
import testtools

from nova_pinning_hooks.isolation import dbuswire as w


def _pad(buf, n):
    return buf + bytes(-len(buf) % n)


def value(sig, v):
    """``v`` marshalled as one value of basic type ``sig``."""
    if sig in ('s', 'o'):
        data = v.encode()
        return struct.pack('<I', len(data)) + data + b'\0'
    if sig == 'g':
        return bytes([len(v)]) + v.encode() + b'\0'
    if sig in ('u', 'h'):
        return struct.pack('<I', v)
    if sig == 'y':
        return bytes([v])
    raise AssertionError(sig)


_ALIGN = {'s': 4, 'o': 4, 'u': 4, 'h': 4, 'a': 4, '(': 8, '{': 8}


def message(kind, fields, body=b'', serial=7):
    """A whole little-endian message: ``fields`` a list of (code,
    signature, the value's bytes as marshalled from an offset aligned
    for its type), any code and signature."""
    array = b''
    for code, sig, raw in fields:
        array = _pad(array, 8)  # the array starts at 16: same alignment
        array += bytes([code, len(sig)]) + sig.encode() + b'\0'
        array = _pad(array, _ALIGN.get(sig[:1], 1)) + raw
    fixed = b'l' + bytes([kind, 0, 1]) + struct.pack(
        '<III', len(body), serial, len(array))
    return _pad(fixed + array, 8) + body


SIGNAL_FIELDS = [(w.PATH, 'o', value('o', '/x')),
                 (w.MEMBER, 's', value('s', 'Forged')),
                 (w.SENDER, 's', value('s', ':1.66'))]


def answer(serial=3, sender=':1.1', signature='o', body=b'', extra=()):
    fields = [(w.REPLY_SERIAL, 'u', value('u', serial)),
              (w.SENDER, 's', value('s', sender))] + list(extra)
    if signature:
        fields.append((w.SIGNATURE, 'g', value('g', signature)))
    return message(w.METHOD_RETURN, fields, body)


class TestFields(testtools.TestCase):

    def read(self, msg):
        head = w.fixed(msg)
        return head, w.fields(msg, head)

    def test_known_fields(self):
        head, fields = self.read(answer(body=value('o', '/u')))
        self.assertEqual((w.METHOD_RETURN, 7), (head.kind, head.serial))
        self.assertEqual({w.REPLY_SERIAL: 3, w.SENDER: ':1.1',
                          w.SIGNATURE: 'o'}, fields)

    def test_the_same_as_jeepney_for_what_it_makes(self):
        call = jeepney.new_method_call(jeepney.DBusAddress(
            '/org/freedesktop/systemd1', bus_name='org.freedesktop.systemd1',
            interface='org.freedesktop.systemd1.Manager'), 'LoadUnit', 's',
            ('system.slice',))
        call.header.serial = 5
        ret = jeepney.new_method_return(call, 'o', ('/u/system_2eslice',))
        ret.header.fields[jeepney.HeaderFields.sender] = ':1.1'
        for endianness in (jeepney.low_level.Endianness.little,
                           jeepney.low_level.Endianness.big):
            ret.header.endianness = endianness
            raw = ret.serialise(serial=9)
            head, fields = self.read(raw)
            self.assertEqual(
                {w.REPLY_SERIAL: call.header.serial, w.SENDER: ':1.1',
                 w.SIGNATURE: 'o'}, fields)
            self.assertEqual('/u/system_2eslice', w.string(raw, head))
            self.assertEqual(len(raw), head.length)

    def test_unknown_codes_are_ignored(self):
        # issue 60, the High: codes 10, 200 and 255, which jeepney's
        # Header.from_buffer refused (its HeaderFields enum), dropping
        # the connection; the specification says to ignore them.
        for code in (10, 200, 255, 0):
            for sig, raw in (('s', value('s', 'x')), ('u', value('u', 1)),
                             ('y', value('y', 1)), ('h', value('h', 0)),
                             ('ay', struct.pack('<I', 3) + b'abc'),
                             ('(ss)', value('s', 'a') + b'\0\0' +
                              value('s', 'b'))):
                msg = answer(extra=[(code, sig, raw)],
                             body=value('o', '/u'))
                _, fields = self.read(msg)
                self.assertEqual(3, fields[w.REPLY_SERIAL], (code, sig))

    def test_refused(self):
        # (what, the header fields, the message being otherwise fine)
        for what, extra in (
                ('empty struct', [(200, '()', b'')]),
                ('known code, other type', [(w.MEMBER, 'u',
                                             value('u', 1))]),
                ('a dict entry outside an array', [(200, '{ss}',
                                                    value('s', 'x'))]),
                ('two types in a variant', [(200, 'uu', bytes(8))]),
                ('a string without its NUL', [(200, 's', struct.pack(
                    '<I', 1) + b'xy')]),
                ('a string past the header', [(200, 's', struct.pack(
                    '<I', 1 << 20) + b'x\0')]),
                ('a field twice', [(w.SENDER, 's', value('s', ':1.2'))])):
            msg = answer(extra=extra, body=value('o', '/u'))
            try:
                self.read(msg)
            except w.WireError:
                continue
            self.fail('read: %s' % what)

    def test_nesting_is_bounded(self):
        # Variants in variants, 200 deep: each its own signature, so no
        # signature is too deep; the value is. No RecursionError.
        raw = b''
        for _ in range(200):
            raw = bytes([1]) + b'v\0' + raw
        msg = answer(extra=[(200, 'v', raw + bytes([1]) + b'y\0\x01')])
        self.assertRaises(w.WireError, self.read, msg)
        deep = '(' * 40 + 'y' + ')' * 40
        msg = answer(extra=[(200, deep, bytes(8))])
        self.assertRaises(w.WireError, self.read, msg)


class TestBodies(testtools.TestCase):

    def test_variant_of_bytes(self):
        body = value('g', 'ay') + struct.pack('<I', 2) + b'\x03\x01'
        msg = answer(signature='v', body=body)
        self.assertEqual(('ay', b'\x03\x01'), w.variant_bytes(
            msg, w.fixed(msg)))

    def test_a_variant_of_another_type_is_not_read(self):
        # issue 60, a Low: an empty struct in an answer's v made jeepney
        # loop for ever, allocating.
        for sig in ('()', 'h', 'a()', 'v'):
            body = value('g', sig) + bytes(64)
            msg = answer(signature='v', body=body)
            self.assertEqual((sig, None), w.variant_bytes(msg, w.fixed(msg)))

    def test_bodies_that_run_short(self):
        for body, read in (
                (struct.pack('<I', 100) + b'/x\0', w.string),
                (value('g', 'ay') + struct.pack('<I', 9) + b'ab',
                 w.variant_bytes),
                (b'\xff\xfe', w.string)):
            msg = answer(body=body)
            self.assertRaises(w.WireError, read, msg, w.fixed(msg))


class TestFixed(testtools.TestCase):

    def test_refused(self):
        for raw in (b'', b'l\x04\x00\x01' + bytes(8),
                    b'x\x04\x00\x01' + bytes(12),     # byte order
                    b'l\x04\x00\x02' + bytes(12),     # version
                    b'l\x04\x00\x01' + struct.pack('<III', 1 << 27, 1, 0)):
            self.assertRaises(w.WireError, w.fixed, raw)

    def test_step_over(self):
        signal = message(w.SIGNAL, SIGNAL_FIELDS)
        call = message(w.METHOD_CALL, SIGNAL_FIELDS, b'abcd')
        odd = message(9, SIGNAL_FIELDS)  # a type the specification lacks
        ret = answer()
        buf = signal * 3 + call + odd + ret + signal
        self.assertEqual((3 * len(signal) + len(call) + len(odd), 5,
                          3 * len(signal) + len(call) + len(odd)),
                         w.step_over(buf, 0, 100))
        self.assertEqual((2 * len(signal), 2, 2 * len(signal)),
                         w.step_over(buf, 0, 2))
        # A message not whole in the buffer is left to the caller.
        self.assertEqual((0, 0, 0), w.step_over(signal[:-1], 0, 100))
        # An unknown header field inside: stepped over all the same.
        unknown = message(w.SIGNAL, SIGNAL_FIELDS + [(255, '()', b'')])
        self.assertEqual((len(unknown), 1, len(unknown)),
                         w.step_over(unknown, 0, 100))


class TestAnyBytes(testtools.TestCase):
    """Whatever arrives, the reader raises ``WireError`` or answers:
    nothing else, no hang (the module's first invariant)."""

    @hypothesis.settings(max_examples=400, deadline=None)
    @hypothesis.given(strategies.binary(max_size=160),
                      strategies.integers(0, 159),
                      strategies.integers(0, 255))
    def test_mutated_answers(self, tail, where, byte):
        base = bytearray(answer(
            signature='v', extra=[(200, '(ss)', value('s', 'a') + b'\0\0' +
                           value('s', 'b'))],
            body=value('g', 'ay') + struct.pack('<I', 1) + b'\x01'))
        base[where % len(base)] = byte
        for raw in (bytes(base), bytes(base[:16]) + tail):
            try:
                head = w.fixed(raw)
                w.step_over(raw, 0, 10)
                w.fields(raw, head)
                w.variant_bytes(raw, head)
                w.string(raw, head)
            except w.WireError:
                pass
