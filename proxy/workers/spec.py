"""What the supervisor tells a worker at start (`WorkerSpec`), and what a worker tells it back.

A worker gets its spec as one JSON argument and one end of a socket pair (`channel_fd`). On the
channel it sends JSON lines: `ready` once it listens (with its pid and its own /metrics and control
API addresses), `stopped` when it has drained (with its summary's counts). The supervisor sends
nothing: the worker reads the channel only to see it close, which means the supervisor is gone and
the worker stops too (drains as on SIGTERM) instead of serving on as an orphan.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["WorkerChannel", "WorkerSpec"]


@dataclass(frozen=True)
class WorkerSpec:
    """One worker's start-up: the proxy arguments `brownout run` would use, and its index and channel."""

    index: int
    listen: str
    mode: str = "regular"
    config_path: str | None = None
    confdir: str | None = None
    options: list[str] = field(default_factory=list)  # mitmproxy/brownout `--set` options, NAME=VALUE
    channel_fd: int = -1

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        return cls(**json.loads(text))


class WorkerChannel:
    """The worker's end of the channel: JSON lines out, and a blocking wait for the supervisor to go."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)

    def send(self, event: str, **fields: Any) -> None:
        try:
            self.sock.sendall((json.dumps({"event": event, **fields}) + "\n").encode())
        except OSError:
            pass  # the supervisor is gone: wait_closed() has seen it, and this worker is stopping

    def wait_closed(self) -> None:
        """Return once the supervisor's end is closed (the supervisor exited, however it exited)."""
        try:
            while self.sock.recv(4096):
                pass
        except OSError:
            pass
