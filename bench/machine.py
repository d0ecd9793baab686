"""What a bench result was measured on: the machine, the software, the brownout commit and the date."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["cpu_model", "describe", "git_state", "mem_total_kb", "run_meta", "wrk_version"]

ROOT = Path(__file__).resolve().parent.parent
# x86 names its CPU "model name"; ARM boards use "Hardware", "Processor" or "cpu model".
_CPU_KEYS = ("model name", "Hardware", "Processor", "cpu model")


def cpu_model(cpuinfo: str) -> str | None:
    """The CPU's name from the text of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return next((fields[k] for k in _CPU_KEYS if fields.get(k)), None)


def mem_total_kb(meminfo: str) -> int | None:
    """MemTotal from the text of /proc/meminfo, in kB."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""  # not Linux


def _memory_kb() -> int | None:
    kb = mem_total_kb(_read("/proc/meminfo"))
    if kb is None and hasattr(os, "sysconf"):
        try:
            kb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
        except (ValueError, OSError):
            return None
    return kb


def git_state(root: Path = ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty): the checkout's HEAD and whether tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None  # no git, or not a checkout
    if head.returncode != 0:
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None


def wrk_version() -> str | None:
    """`wrk -v`'s first line, e.g. 'wrk 4.2.0 [epoll]' (it exits non-zero after printing it)."""
    try:
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = (out.stdout or out.stderr).strip().splitlines()
    return line[0].split(" Copyright")[0] if line else None


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def describe(load_tool: str) -> dict[str, Any]:
    """The machine and software a run measured, for the results JSON."""
    commit, dirty = git_state()
    kb = _memory_kb()
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu_model": cpu_model(_read("/proc/cpuinfo")) or platform.processor() or None,
        "cores": os.cpu_count(),
        "cores_usable": len(affinity(0)) if affinity else os.cpu_count(),
        "memory_gib": None if kb is None else round(kb / (1 << 20), 1),
        "os": platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "mitmproxy": _version("mitmproxy"),
        "brownout": _version("brownout"),
        "brownout_commit": commit,
        "brownout_dirty": dirty,
        "load_tool": load_tool,
    }


def run_meta(script: str, argv: list[str] | None, load_tool: str, **extra: Any) -> dict[str, Any]:
    """A results JSON's `meta`: the command as typed (`script` and its arguments), the machine, and `extra`."""
    command = " ".join([script, *(argv if argv is not None else sys.argv[1:])])
    return {"command": command, **extra, "machine": describe(load_tool)}
