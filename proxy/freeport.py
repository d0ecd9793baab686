"""A free TCP port for a process that will bind it a moment later (an experiment's service, a test's server).

A port the kernel picks (a bind to port 0) comes from its ephemeral range, which is also where every
outgoing connection and every other bind to port 0 gets its port: between the pick and the service's
own bind, another socket on the machine may take it. So on Linux, where that range can be read, the pick
is a random port below it that binds right now: no socket gets one of those ports unless a program asks
for it by number, so only another picker choosing the same one, among thousands, can take it first. Where
the range cannot be read, the kernel picks.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["PICK_FROM", "free_port"]

PICK_FROM = 20000  # the lowest port picked; below the ephemeral range, above most fixed services
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_TRIES = 64
_PICK = random.SystemRandom()  # the OS's randomness: a program's random.seed() cannot make pickers agree


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` free right now, outside the kernel's ephemeral range when it can."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = ephemeral_low()
    if low is not None and low > PICK_FROM:
        for _ in range(_TRIES):
            port = _PICK.randrange(PICK_FROM, low)
            if _bindable(family, host, port):
                return port
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def ephemeral_low() -> int | None:
    """The first port of the kernel's ephemeral range, or None where it cannot be read."""
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(family: socket.AddressFamily, host: str, port: int) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
