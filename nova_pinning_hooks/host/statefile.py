"""Atomic JSON state files (the overcommit file, the isolation state).

``write_json`` replaces a file so that readers see the old content or the
new, never a mix, through ``safefs.write_atomic``: no link is followed,
the mode is set on the descriptor whatever the umask, and a directory
that a less-privileged user could change is refused. ``read_json`` reads
only a regular file of bounded size.
"""

import json
import typing

from nova_pinning_hooks.engine import strict
from nova_pinning_hooks.host import safefs


def write_json(path: str, content: typing.Any, mode: int = 0o644) -> None:
    text = json.dumps(content, indent=1, sort_keys=True) + '\n'
    safefs.write_atomic(path, text.encode('utf-8'), mode=mode)


def read_json(path: str, limit: int = safefs.STATE_LIMIT,
              what: str = 'state file',
              private: bool = False,
              root_written: bool = False) -> typing.Any:
    """The parsed JSON of ``path``. ``FileNotFoundError`` when absent,
    ``safefs.UnsafeFileError`` when not a small regular file (or, with
    ``private``, not this user's alone; with ``root_written``, not
    root's, or writable by others), ``ValueError`` when not UTF-8 JSON
    or not within ``strict.loads_json``'s bounds (depth, numbers)."""
    data = safefs.read_file(path, limit, what, private=private,
                            root_written=root_written)
    return strict.loads_json(data, what, limit)
