"""``strict.loads_json``: the one JSON reader (the state files that use
it: tests/unit/isolation/test_strict_json.py)."""

import testtools

from nova_pinning_hooks.engine import strict


class TestLoadsJson(testtools.TestCase):

    REFUSED = [
        (b'{"a": \xff}', 'not valid UTF-8'),
        ('{"a": NaN}', 'NaN is not a number'),
        ('{"a": Infinity}', 'Infinity is not a number'),
        ('{"a": 1e400}', "number '1e400' is out of range"),
        ('{"a": 9223372036854775808}', 'out of range'),
        ('{"a": -9223372036854775809}', 'out of range'),
        ('{"a": 1%s}' % ('0' * 5000), 'out of range'),
        ('{"a": 1, "a": 2}', "key 'a' appears twice"),
        ('{"a": "\\udc00"}', 'lone surrogate'),
        ('{"\\ud800": 1}', 'lone surrogate'),
        ('{"a": ["x", {"b": "\\uDBFF"}]}', 'lone surrogate'),
        ('{"a": "\ud800"}', 'lone surrogate'),  # raw, in text input
        ('{"\udfff": "ok"}', 'lone surrogate'),
        ('[' * 33 + ']' * 33, 'nested deeper than 32'),
        ('[' * 100000 + ']' * 100000, 'nested deeper than 32'),
        ('{"a": ', 'not valid JSON'),
    ]

    def test_refused_in_one_line_naming_the_document(self):
        for text, fragment in self.REFUSED:
            exc = self.assertRaises(strict.InputError, strict.loads_json,
                                    text, 'the doc', 1 << 20)
            self.assertIn(fragment, str(exc), text[:40])
            self.assertTrue(str(exc).startswith('the doc'), str(exc))
            self.assertEqual(1, len(str(exc).splitlines()))
            self.assertLess(len(str(exc)), 200)

    def test_size_limit(self):
        for text in ('x' * 101, b'x' * 101):
            exc = self.assertRaises(strict.InputError, strict.loads_json,
                                    text, 'the doc', 100)
            self.assertIn('larger than 100 bytes', str(exc))

    def test_accepted(self):
        for text, value in [
                ('{"a": [1, 2.5, -3, true, null, "\\u00e9"]}',
                 {'a': [1, 2.5, -3, True, None, '\u00e9']}),
                ('[' * 32 + ']' * 32, eval('[' * 32 + ']' * 32)),
                ('{"a": "\\ud83d\\ude00"}', {'a': '\U0001f600'}),
                ('{"a": "\\\\ud800"}', {'a': '\\ud800'}),
                (b'{"\xc3\xa9": 9223372036854775807}',
                 {'\u00e9': 2 ** 63 - 1})]:
            self.assertEqual(value, strict.loads_json(text, 'doc', 1 << 20))
