import testtools

from nova_pinning_hooks.engine import cpuset


class TestParse(testtools.TestCase):

    CASES = [
        ('0', {0}),
        ('0-3', {0, 1, 2, 3}),
        ('0-3,^2,8', {0, 1, 3, 8}),
        ('^2,0-3', {0, 1, 3}),
        (' 1 , 4-5 ', {1, 4, 5}),
        ('0-7,^2-5', {0, 1, 6, 7}),
        ('5,5,5', {5}),
    ]

    def test_valid(self):
        for text, expected in self.CASES:
            self.assertEqual(frozenset(expected), cpuset.parse(text), text)

    def test_invalid_names_the_defect(self):
        for text, fragment in [('a', "'a'"), ('1-', "''"), ('3-1', 'reversed'),
                               ('1,,2', 'empty element'), ('-1', "''"),
                               ('0-99999', 'out of range'), ('1.5', "'1.5'"),
                               ('', 'empty'), ('^1', 'empty')]:
            exc = self.assertRaises(cpuset.CpusetError, cpuset.parse, text)
            self.assertIn(fragment, str(exc), text)

    def test_not_a_string(self):
        self.assertRaises(cpuset.CpusetError, cpuset.parse, 3)

    def test_allow_empty(self):
        self.assertEqual(frozenset(), cpuset.parse('', allow_empty=True))


class TestFormat(testtools.TestCase):

    def test_canonical(self):
        self.assertEqual('0-2,5,7-8', cpuset.format(frozenset({8, 0, 1, 2,
                                                               5, 7})))
        self.assertEqual('4', cpuset.format(frozenset({4})))
        self.assertEqual('', cpuset.format(frozenset()))

    def test_round_trip(self):
        for text in ('0-3,^2,8', '1', '0-255', '1,3,5,7'):
            cpus = cpuset.parse(text)
            self.assertEqual(cpus, cpuset.parse(cpuset.format(cpus)))


class TestParseOptional(testtools.TestCase):

    def test_unset(self):
        self.assertIsNone(cpuset.parse_optional(None, 'x'))
        self.assertIsNone(cpuset.parse_optional('  ', 'x'))

    def test_unknown_cpus_named(self):
        exc = self.assertRaises(cpuset.CpusetError, cpuset.parse_optional,
                                '0-5', 'reserved_cpus',
                                known=frozenset({0, 1, 2, 3}))
        self.assertIn('reserved_cpus', str(exc))
        self.assertIn('4-5', str(exc))

    def test_bad_text_names_option(self):
        exc = self.assertRaises(cpuset.CpusetError, cpuset.parse_optional,
                                'x', 'shared_cpus')
        self.assertIn('shared_cpus', str(exc))
