"""Launch one attempt of the agent command and judge it: passed, failed, error or timeout."""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from brownout.proxy.experiment.config import SuccessConfig

__all__ = ["Attempt", "format_command", "kill_process", "placeholders", "run_attempt", "tail"]

logger = logging.getLogger(__name__)

TAIL_CHARS = 2000


@dataclass(slots=True)
class Attempt:
    """The outcome of one process launch."""

    status: str
    exit_code: int | None
    duration_s: float
    stdout: str
    stderr: str
    reason: str = ""


def format_command(command: str | list[str], values: Mapping[str, str]) -> tuple[str | list[str], bool]:
    """Fill {run}, {task}, {phase}, {python}; returns (command, shell). Shell strings get quoted values."""

    def fill(text: str, quote: bool) -> str:
        for key, value in values.items():
            text = text.replace("{" + key + "}", shlex.quote(value) if quote else value)
        return text

    if isinstance(command, str):
        return fill(command, True), True
    return [fill(part, False) for part in command], False


def kill_process(proc: subprocess.Popen[str]) -> None:
    # The agent may have children (a shell, a tool server): kill its whole process group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        proc.kill()


def run_attempt(
    command: str | list[str],
    *,
    shell: bool,
    env: Mapping[str, str],
    cwd: str,
    timeout_s: float,
    success: SuccessConfig,
    track: Callable[[subprocess.Popen[str] | None], None] = lambda p: None,
) -> Attempt:
    """Run the command to completion (or timeout) and apply the success criteria."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            command,
            shell=shell,
            env=dict(env),
            cwd=cwd,
            text=True,
            errors="replace",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        return Attempt("error", None, time.monotonic() - start, "", "", f"cannot start agent: {e}")
    track(proc)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process(proc)
        out, err = proc.communicate()
        return Attempt("timeout", None, time.monotonic() - start, out, err, f"no exit within {timeout_s:g} s")
    finally:
        track(None)
    duration = time.monotonic() - start
    if proc.returncode < 0:
        return Attempt("error", proc.returncode, duration, out, err, f"killed by signal {-proc.returncode}")
    reason = _judge(success, proc.returncode, out, env, cwd, timeout_s)
    return Attempt("failed" if reason else "passed", proc.returncode, duration, out, err, reason)


def _judge(success: SuccessConfig, code: int, out: str, env: Mapping[str, str], cwd: str, timeout_s: float) -> str:
    if success.exit_code is not None and code != success.exit_code:
        return f"exit code {code} (expected {success.exit_code})"
    if success.stdout_regex is not None and not re.search(success.stdout_regex, out):
        return f"stdout does not match {success.stdout_regex!r}"
    if success.check is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".stdout", delete=False) as f:
            f.write(out)
        try:
            check_env = {**env, "BROWNOUT_STDOUT_FILE": f.name}
            shell = isinstance(success.check, str)
            done = subprocess.run(
                success.check, shell=shell, env=check_env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s
            )
            if done.returncode != 0:
                return f"check exited {done.returncode}: {done.stdout.strip()[-200:] or done.stderr.strip()[-200:]}"
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"check could not run: {e}"
        finally:
            os.unlink(f.name)
    return ""


def tail(text: str) -> str:
    return text[-TAIL_CHARS:]


def placeholders(run: str, task: str, phase: str) -> dict[str, str]:
    return {"run": run, "task": task, "phase": phase, "python": sys.executable}
