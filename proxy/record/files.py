"""Files in a directory brownout does not own: a cassette directory may come from anywhere.

A symbolic link in it may point at any file the user can read (`~/.ssh/id_rsa.jsonl`): replay would
serve it and `cassette har` export it. Only links that stay inside the directory are followed, and a
file is opened with O_NOFOLLOW on the path its links were resolved to, so a link swapped in after
the check is refused rather than followed. Writing never goes through a link at all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, BinaryIO

__all__ = ["Outside", "files_in", "open_inside", "open_to_write"]


class Outside(OSError):
    """A path that leads out of its directory (or through a link where none may be)."""


def files_in(directory: Path, suffix: str) -> tuple[Path, list[Path]]:
    """The directory resolved, and its regular files ending in `suffix` by name; Outside for a link
    that leads out of it. Raises FileNotFoundError/NotADirectoryError for a missing directory."""
    root = directory.resolve(strict=True)
    if not root.is_dir():
        raise NotADirectoryError(f"{directory}: not a directory")
    paths = []
    for path in sorted(directory.glob(f"*{suffix}")):
        if path.is_symlink():
            _resolved_inside(path, root)
        if path.is_file():
            paths.append(path)
    return root, paths


def _resolved_inside(path: Path, root: Path) -> Path:
    real = path.resolve()
    if not real.is_relative_to(root):
        raise Outside(f"{path}: a symbolic link to {real}, outside the cassette directory {root}; refused")
    return real


def open_inside(path: Path, root: Path) -> BinaryIO:
    """`path` (a file of `root`, or a link to one inside it) opened for reading in binary."""
    real = _resolved_inside(path, root)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if os.path.islink(real):
            raise Outside(f"{path}: became a symbolic link while being opened; refused") from e
        raise
    return os.fdopen(fd, "rb")


def open_to_write(path: Path, *, append: bool) -> IO[str]:
    """`path` opened for writing UTF-8 text (appending, or from empty), never through a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if os.path.islink(path):
            raise Outside(f"{path}: a symbolic link; brownout does not write through links") from e
        raise
    return os.fdopen(fd, "a" if append else "w", encoding="utf-8")
