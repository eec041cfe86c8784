"""The model's value sets (``engine/names``): each value reads as its
plain string wherever it goes, and the set's check names the set."""

import json

import testtools

from nova_pinning_hooks.engine import names


class Colour(names.Name):
    RED = 'red'
    DARK_BLUE = 'dark-blue'


class TestName(testtools.TestCase):

    def test_reads_as_its_value(self):
        for text, want in [
                ('%s' % Colour.RED, 'red'),
                (str(Colour.DARK_BLUE), 'dark-blue'),
                ('{:>10}|'.format(Colour.RED), '       red|'),
                (f'{Colour.DARK_BLUE}', 'dark-blue'),
                (json.dumps({Colour.RED: [Colour.DARK_BLUE]}),
                 '{"red": ["dark-blue"]}'),
        ]:
            self.assertEqual(want, text)
        self.assertEqual('red', Colour.RED)
        self.assertEqual({'red': 1}[Colour.RED], 1)
        self.assertIs(Colour.RED, Colour('red'))

    def test_values_and_choices_in_the_enums_order(self):
        self.assertEqual(('red', 'dark-blue'), Colour.values())
        self.assertEqual([('red', 'r'), ('dark-blue', 'd')],
                         Colour.choices({'dark-blue': 'd', 'red': 'r'}))
        self.assertRaises(KeyError, Colour.choices, {'red': 'r'})

    def test_check(self):
        for value, error in [
                ('red', None), (Colour.DARK_BLUE, None),
                ('green', "colour must be red or dark-blue, not 'green'"),
                (None, 'colour must be red or dark-blue, not None'),
                (['red'], "colour must be red or dark-blue, not ['red']"),
        ]:
            if error is None:
                self.assertEqual(str(value), Colour.check('colour', value))
            else:
                exc = self.assertRaises(ValueError, Colour.check, 'colour',
                                        value)
                self.assertEqual(error, str(exc))
