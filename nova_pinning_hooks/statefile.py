"""Atomic JSON state files.

``write_json`` replaces a file so that readers see the old content or the
new, never a mix: a temporary file in the same directory, fsync'd, given
its mode, renamed over the old one, and the directory fsync'd so the
rename survives a crash. Files are 0644 (or tighter), directories 0755:
nothing is world-writable.
"""

import json
import os
import tempfile


def write_json(path, content, mode=0o644):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.' +
                               os.path.basename(path) + '.')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            json.dump(content, f, indent=1, sort_keys=True)
            f.write('\n')
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass  # never created or already renamed
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
