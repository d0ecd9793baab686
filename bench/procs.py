"""Benchmark subprocesses: the mock upstream, plain mitmdump, and brownout, each in its own process."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from brownout.proxy.freeport import free_port  # outside the kernel's ephemeral range

__all__ = [
    "ROOT",
    "Proc",
    "free_port",
    "start_brownout",
    "start_mitmdump",
    "start_module",
    "start_redis",
    "start_upstream",
    "wait_http",
]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


@dataclass
class Proc:
    """A started server process and where it listens."""

    name: str
    popen: subprocess.Popen[bytes]
    port: int
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def wait_http(port: int, path: str = "/ping", timeout_s: float = 30.0, proc: Proc | None = None) -> bool:
    """Poll until `GET path` on the port answers with any HTTP status line."""
    deadline = time.monotonic() + timeout_s
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
    while time.monotonic() < deadline:
        if proc is not None and proc.popen.poll() is not None:
            return False
        with contextlib.suppress(OSError):  # not listening yet: poll again
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(request)
                if s.recv(16).startswith(b"HTTP/1."):
                    return True
        time.sleep(0.05)
    return False


def _spawn(name: str, cmd: list[str], port: int, workdir: Path, env: dict[str, str] | None = None) -> Proc:
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    log.debug("started %s (pid %d): %s", name, popen.pid, " ".join(cmd))
    return Proc(name, popen, port, log_path)


def start_upstream(workdir: Path) -> Proc:
    port = free_port()
    proc = _spawn(
        "upstream",
        [sys.executable, "-m", "brownout.proxy.demo.upstream", "--port", str(port), "--no-record"],
        port,
        workdir,
    )
    if not wait_http(port, proc=proc):
        proc.stop()
        raise RuntimeError(f"mock upstream did not start:\n{proc.log_tail()}")
    return proc


def start_module(name: str, module: str, args: list[str], workdir: Path) -> Proc:
    """`python -m module --port N *args`, started and answering HTTP."""
    port = free_port()
    proc = _spawn(name, [sys.executable, "-m", module, "--port", str(port), *args], port, workdir)
    if not wait_http(port, proc=proc):
        proc.stop()
        raise RuntimeError(f"{name} did not start:\n{proc.log_tail()}")
    return proc


def start_mitmdump(upstream_port: int, workdir: Path, *, stream_all: bool = False) -> Proc:
    """Plain mitmdump in reverse mode; `stream_all` streams every body (stream_large_bodies=1)."""
    port = free_port()
    name = "mitmdump-stream" if stream_all else "mitmdump"
    confdir = workdir / f"{name}-conf"
    confdir.mkdir(exist_ok=True)
    cmd = [
        str(VENV_BIN / "mitmdump"),
        "--mode",
        f"reverse:http://127.0.0.1:{upstream_port}",
        "--listen-host",
        "127.0.0.1",
        "-p",
        str(port),
        "-q",
        "--set",
        "flow_detail=0",
        "--set",
        f"confdir={confdir}",
    ]
    if stream_all:
        cmd += ["--set", "stream_large_bodies=1"]
    proc = _spawn(name, cmd, port, workdir)
    if not wait_http(port, proc=proc):
        proc.stop()
        raise RuntimeError(f"mitmdump did not start:\n{proc.log_tail()}")
    return proc


def start_brownout(
    upstream_port: int,
    workdir: Path,
    config: str | None = None,
    *,
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Proc | str:
    """Start `python -m proxy run` (the `brownout` CLI) in reverse mode; a string says why it could not.

    `python -m proxy.cli` would not do: that module has no `__main__` guard, `proxy/__main__.py` does.
    """
    port = free_port()
    confdir = workdir / "brownout-conf"
    confdir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "brownout.proxy",
        "run",
        "--mode",
        f"reverse:http://127.0.0.1:{upstream_port}",
        "--listen",
        f"127.0.0.1:{port}",
        "--confdir",
        str(confdir),
    ]
    if config:
        cmd += ["-c", config]
    cmd += extra_args or []
    # Its own free ports for /metrics and the control API: a bench never clashes with another brownout.
    named = " ".join(extra_args or [])
    for option in ("brownout_metrics_listen", "brownout_control_listen"):
        if option not in named:
            cmd += ["--set", f"{option}=127.0.0.1:0"]
    try:
        proc = _spawn("brownout", cmd, port, workdir, env)
    except OSError as e:
        return f"cannot run brownout: {e}"
    if not wait_http(port, proc=proc):
        proc.stop()
        return f"brownout did not start (is proxy.cli ready?):\n{proc.log_tail()}"
    return proc


def _redis_answers(port: int) -> bool:
    with contextlib.suppress(OSError):  # not listening yet
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    return False


def start_redis(workdir: Path, server: str | None = None) -> Proc:
    """A redis-server on a free loopback port, no persistence (Debian's package: `make system-deps`)."""
    path = server or shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(path).exists():
        raise RuntimeError(f"{path} not found: install redis-server (`make system-deps`) or pass --redis-server")
    port = free_port()
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = _spawn("redis", [path, *args, "--dir", str(workdir), "--loglevel", "warning"], port, workdir)
    deadline = time.monotonic() + 10
    while not _redis_answers(port):
        if proc.popen.poll() is not None or time.monotonic() > deadline:
            proc.stop()
            raise RuntimeError(f"redis-server did not start:\n{proc.log_tail()}")
        time.sleep(0.02)
    proc.extra["url"] = f"redis://127.0.0.1:{port}/0"
    return proc
