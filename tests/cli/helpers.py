"""Helpers for the CLI tests: run `brownout` and other tools as real subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from brownout.proxy.freeport import free_port  # outside the kernel's ephemeral range

__all__ = ["BIN", "REPO", "brownout_cmd", "clean_env", "free_port", "wait_for_port"]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: brownout, mitmdump


def brownout_cmd() -> list[str]:
    script = BIN / "brownout"
    return [str(script)] if script.exists() else [sys.executable, "-m", "brownout.proxy"]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any proxy or CA settings, with the venv's bin first on PATH."""
    drop = {
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "ssl_cert_file",
        "requests_ca_bundle",
        "curl_ca_bundle",
        "aws_ca_bundle",
        "node_extra_ca_certs",
        "brownout_confdir",
    }
    env = {k: v for k, v in os.environ.items() if k.lower() not in drop}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def wait_for_port(port: int, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listening on {port} after {timeout_s} s")
