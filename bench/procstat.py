"""One process's peak RSS and CPU seconds over a window, read from /proc (Linux; elsewhere: unknown).

Peak RSS is the larger of VmRSS sampled in a thread and VmHWM (the kernel's own high-water mark,
which catches a spike between samples). VmHWM counts since the process started, so it is used only
when writing 5 to /proc/PID/clear_refs reset it at the start of the window.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ProcUsage",
    "ProcWatch",
    "children",
    "cpu_seconds",
    "cpu_ticks",
    "descendants",
    "open_fds",
    "peak_rss_kb",
    "rss_mb",
    "status_kb",
    "tree_cpu_seconds",
]


def status_kb(text: str, key: str) -> int | None:
    """A `Key:   123 kB` line of /proc/PID/status, in kB."""
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name == key:
            return int(value.split()[0])
    return None


def cpu_ticks(stat_text: str) -> int:
    """utime + stime from /proc/PID/stat, in clock ticks.

    The command name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
    """
    fields = stat_text.rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def peak_rss_kb(samples_kb: list[int], hwm_kb: int | None, hwm_reset: bool) -> int | None:
    """The window's peak: sampled VmRSS, raised to VmHWM when the high-water mark was reset at its start."""
    candidates = list(samples_kb)
    if hwm_reset and hwm_kb is not None:
        candidates.append(hwm_kb)
    return max(candidates) if candidates else None


@dataclass
class ProcUsage:
    """What one process used over the window; None where /proc could not tell."""

    rss_start_mb: float | None
    peak_rss_mb: float | None
    cpu_s: float | None
    hwm_reset: bool  # the peak includes the kernel's high-water mark, not only samples

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _read(pid: int, name: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return None  # not Linux, or the process is gone


def rss_mb(pid: int) -> float | None:
    """The process's resident set size now, in MB."""
    text = _read(pid, "status")
    kb = None if text is None else status_kb(text, "VmRSS")
    return None if kb is None else kb / 1024


def cpu_seconds(pid: int) -> float | None:
    """The process's CPU time so far (user + system), in seconds."""
    text = _read(pid, "stat")
    return None if text is None else cpu_ticks(text) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The pids of a process's children (Linux), e.g. a supervisor's workers."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        return out  # not Linux, or gone
    return sorted(set(out))


def descendants(pid: int) -> list[int]:
    """Its children, theirs, and so on."""
    out: list[int] = []
    todo = children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        todo += children(child)
    return sorted(out)


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU time so far of the process and of every live descendant (brownout's analysis process)."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(cpu_seconds(child) or 0.0 for child in descendants(pid))


def open_fds(pid: int) -> int | None:
    """How many file descriptors the process holds."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None  # not Linux, or the process is gone


def _mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


class ProcWatch:
    """Context manager: samples a process's RSS every `interval_s` and its CPU time at both ends."""

    def __init__(self, pid: int | None, interval_s: float = 0.2) -> None:
        self.pid, self.interval_s = pid, interval_s
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu0: int | None = None
        self._hwm_reset = False
        self.usage = ProcUsage(None, None, None, False)

    def _rss_kb(self) -> int | None:
        text = None if self.pid is None else _read(self.pid, "status")
        return None if text is None else status_kb(text, "VmRSS")

    def _cpu(self) -> int | None:
        text = None if self.pid is None else _read(self.pid, "stat")
        return None if text is None else cpu_ticks(text)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            rss = self._rss_kb()
            if rss is not None:
                self._samples.append(rss)

    def __enter__(self) -> ProcWatch:
        if self.pid is None:
            return self
        with contextlib.suppress(OSError):  # an older kernel or another owner: samples only
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            self._hwm_reset = True
        first = self._rss_kb()
        self._samples = [] if first is None else [first]
        self._cpu0 = self._cpu()
        self._thread = threading.Thread(target=self._sample, name="procwatch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is None or self.pid is None:
            return
        self._stop.set()
        self._thread.join()
        cpu1 = self._cpu()
        status = _read(self.pid, "status")
        hwm = None if status is None else status_kb(status, "VmHWM")
        last = None if status is None else status_kb(status, "VmRSS")
        samples = self._samples + ([last] if last is not None else [])
        cpu_s = None
        if self._cpu0 is not None and cpu1 is not None:
            cpu_s = round((cpu1 - self._cpu0) / os.sysconf("SC_CLK_TCK"), 2)
        self.usage = ProcUsage(
            _mb(self._samples[0]) if self._samples else None,
            _mb(peak_rss_kb(samples, hwm, self._hwm_reset)),
            cpu_s,
            self._hwm_reset and hwm is not None,
        )
