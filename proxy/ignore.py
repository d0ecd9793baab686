"""proxy.ignore_hosts: hosts whose traffic brownout passes through untouched and leaves out of everything."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

__all__ = ["IGNORED", "HostGlobs"]

IGNORED = "brownout_ignored"  # flow.metadata key: the flow's host is on the ignore list


class HostGlobs:
    """Case-insensitive fnmatch globs over a host name, compiled once into one regex."""

    def __init__(self, globs: Iterable[str] = ()) -> None:
        self.globs = tuple(globs)
        pattern = "|".join(fnmatch.translate(g.lower()) for g in self.globs)
        self._match = re.compile(pattern, re.IGNORECASE).match if pattern else None

    def __call__(self, host: str) -> bool:
        return self._match is not None and self._match(host) is not None
