"""A real `redis-server` (Debian's package, installed by `make test`) on a free loopback port, for tests.

`RedisServer` can be stopped and started again on the same port, so a test can take the store away
mid-run and bring it back. No persistence: every start is empty.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brownout.proxy.freeport import free_port as _free_port  # outside the kernel's ephemeral range

__all__ = ["REDIS_SERVER", "RedisServer", "redis_server", "running_redis"]

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    """One redis-server process on 127.0.0.1:`port`, no persistence."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        args = [
            REDIS_SERVER,
            "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(self.workdir), "--protected-mode", "no", "--loglevel", "warning",
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {err}")
            if self.ping():
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout_s} s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Kill it (SIGKILL: a crash, not a shutdown) and wait until the port is closed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def command(self, *args: str) -> bytes:
        """One command in Redis's inline form, its raw reply (for checks that need no client library)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(" ".join(args).encode() + b"\r\n")
            return s.recv(65536)


@contextlib.contextmanager
def running_redis(workdir: Path) -> Iterator[RedisServer]:
    server = RedisServer(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh, empty redis-server for this test."""
    if not Path(REDIS_SERVER).exists():  # a failure, not a skip: CI must never pass without the real server
        pytest.fail("redis-server absent: `make test` installs the Debian package redis-server")
    with running_redis(tmp_path) as server:
        yield server
