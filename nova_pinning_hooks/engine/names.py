"""The model's value sets, each named once (as nova's ``objects/fields``
names ``CPUAllocationPolicy.ALL``): the base of their str Enums.

Invariants:

* a ``Name`` is a str: it compares, hashes, formats (``%s``, ``format``,
  f-strings) and serialises (``json``) as its plain value, so that plans,
  summaries, metrics' labels and messages read as the plain strings did;
* a value set's checks and the options' ``choices`` are built from its
  Enum (``values``), never spelled again.
"""

import enum
import typing


class Name(str, enum.Enum):
    """One value of a value set of the model."""

    def __str__(self) -> str:
        return str(self._value_)

    def __format__(self, spec: str) -> str:
        return format(str(self._value_), spec)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The set's values, in the order the Enum lists them."""
        return tuple(str(m._value_) for m in cls)

    @classmethod
    def choices(cls, helps: typing.Mapping[str, str]
                ) -> list[tuple[str, str]]:
        """oslo.config's ``choices`` of an option of this set: each value
        with its help, in the Enum's order (``KeyError`` if one lacks
        it, at import)."""
        return [(value, helps[value]) for value in cls.values()]

    @classmethod
    def check(cls, what: str, value: object) -> str:
        """``value`` if it is one of the set's, else ``ValueError``
        naming ``what`` and the set (one line)."""
        if value not in cls.values():
            raise ValueError('%s must be %s, not %.32r' % (
                what, ' or '.join(cls.values()), value))
        return str(value)
