"""The reference MCP servers from npm, started the way users start them: through `npx`, a launcher that keeps
the real server as its grandchild. `make test` installs them into tests/e2e/npm (`npm ci`, pinned by its
lock file), so npx finds them there without the network; and /proc helpers to see which processes live."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.cli.helpers import clean_env

__all__ = ["NPM_DIR", "alive", "descendants", "npm_env", "npx", "pid_of", "wait_gone"]

NPM_DIR = Path(__file__).with_name("npm")


def npx(package: str, *args: str) -> list[str]:
    """The command a client's configuration gives for a reference server (`npx -y @modelcontextprotocol/...`).

    Without node and npx on PATH the test is skipped, saying so; with them but without the packages it fails:
    `make node-deps` installs those."""
    missing = [tool for tool in ("node", "npx") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"{' and '.join(missing)} not on PATH: the reference MCP servers need Node.js (apt-get install nodejs npm)"
        )
    if not (NPM_DIR / "node_modules" / package / "package.json").exists():
        pytest.fail(f"{package} is not installed in {NPM_DIR}: run `make node-deps` (part of `make test`)")
    return ["npx", "-y", package, *args]


def npm_env() -> dict[str, str]:
    """The environment for brownout and its npx child: offline, so a package comes from tests/e2e/npm or not at all."""
    return clean_env(npm_config_offline="true", npm_config_update_notifier="false", npm_config_fund="false")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...


def alive(pid: int) -> bool:
    """True while the process exists and is no zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, grandchildren ...), as /proc shows them now."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def pid_of(marker: str, timeout_s: float = 10.0) -> int:
    """The pid of the process whose command line contains `marker`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if entry.isdigit() and marker.encode() in cmdline and int(entry) != os.getpid():
                return int(entry)
        time.sleep(0.05)
    raise AssertionError(f"no process runs with {marker!r} in its command line")


def wait_gone(pids: set[int], timeout_s: float = 5.0) -> set[int]:
    """The processes of `pids` still alive after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
