"""Atomic file writes: a kill at any moment leaves the old file or the new one, never a torn one.

Every file the tool writes (checkpoints, reports, exports, DOT files) goes through
:func:`write_atomic`: the bytes go to a temporary file in the same directory (so the rename
stays on one file system), are flushed and fsynced, and the temporary file is renamed over
the target with ``os.replace`` (atomic on POSIX and Windows); the directory is then fsynced
where the platform allows, so the rename itself survives a power cut.  On any error the
temporary file is removed.  A process killed with SIGKILL between creating the temporary file
and the rename leaves that file behind (``.NAME.XXXXXXXX.tmp``, next to the target); the target
itself is untouched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Temporary files are named ``.{target name}.{8 hex digits}.tmp`` in the target's directory."""


def temp_name(path: Path) -> Path:
    """A fresh temporary name next to ``path`` (see :data:`TEMP_SUFFIX`)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def _fsync_dir(directory: Path) -> None:
    """Flush a directory entry change to disk, where the platform lets a directory be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: "str | Path", data: "bytes | str") -> None:
    """Replace ``path`` by ``data`` (text is written as UTF-8) atomically: readers and a crash
    see the old content or the new, nothing in between.  A symlink is followed (its target is
    replaced).  The new file gets the default permissions (``0o666`` less the umask)."""
    target = Path(os.path.realpath(path))
    blob = data.encode("utf-8") if isinstance(data, str) else data
    while True:
        tmp = temp_name(target)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:  # 2^-32 per try
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)
