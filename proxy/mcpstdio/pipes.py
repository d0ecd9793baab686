"""The two pipes of `brownout mcp-stdio`: newline-delimited JSON-RPC frames, and the server child.

MCP's stdio transport is one JSON-RPC message per line, UTF-8, no embedded newlines. Framing it
is a `readuntil(b"\\n")`: the MCP SDK is not needed at run time (it is a test dependency), and
brownout must pass through, and on purpose produce, lines no SDK would accept (a truncated or
garbled frame), which a typed message layer would refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

__all__ = ["Child", "Frame", "exit_code", "frames", "server_label", "spawn"]

log = logging.getLogger(__name__)

STDIN_GRACE_S = 2.0  # after its stdin closes, a server has this long to exit before SIGTERM
TERM_GRACE_S = 2.0  # then this long before SIGKILL


@dataclass(slots=True, frozen=True)
class Frame:
    """One line without its newline; `whole` is False for a piece of a line longer than the reader's limit."""

    data: bytes
    whole: bool = True


async def frames(reader: asyncio.StreamReader) -> AsyncIterator[Frame]:
    """The reader's lines until EOF. A line longer than the limit passes on in pieces: never dropped."""
    in_long_line = False
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:
            if e.partial:
                yield Frame(e.partial, whole=not in_long_line)
            return
        except asyncio.LimitOverrunError as e:
            in_long_line = True
            yield Frame(await reader.read(max(1, e.consumed)), whole=False)
            continue
        if in_long_line:
            in_long_line = False
            yield Frame(line, whole=False)  # the tail of the long line, with its newline
            continue
        yield Frame(line[:-1])


def exit_code(returncode: int | None) -> int:
    """The status a shell reports: 128 + N for a child killed by signal N."""
    if returncode is None:
        return 1
    return 128 - returncode if returncode < 0 else returncode


class Child:
    """The MCP server process: its stdin and stdout are ours, its stderr is the client's."""

    def __init__(self, proc: asyncio.subprocess.Process, label: str) -> None:
        self.proc = proc
        self.label = label
        self.killed_by: str | None = None  # the rule whose fault killed it
        self._reaped = False  # the group is empty: its id may belong to someone else now

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.proc.stdout is not None
        return self.proc.stdout

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def send(self, data: bytes) -> bool:
        """Queue bytes for the server's stdin; False once it cannot take them."""
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return False
        stdin.write(data)
        return True

    async def drain(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError):
                await stdin.drain()

    def signal(self, signum: int) -> None:
        """Signal the server's whole process group: a launcher (npx, uvx, a shell) keeps the real server as a
        grandchild, which must get it too. Only while the group can still be ours (see `_group_alive`)."""
        if self.alive or self._group_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signum)

    def _group_alive(self) -> bool:
        """True while a process of the server's group is left. The group's id is the leader's pid, which the
        kernel does not reuse while the group has a member; once `_reaped` is set we never signal it again."""
        if self._reaped:
            return False
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            self._reaped = True
            return False
        return True

    def kill(self, rule: str) -> None:
        """The server dies at once (SIGKILL), as a crashed server does."""
        if self.alive and self.killed_by is None:
            self.killed_by = rule
            log.warning("rule %r killed the MCP server %s", rule, self.label)
        self.signal(signal.SIGKILL)

    async def stop(self) -> int:
        """Close its stdin and wait; then SIGTERM, then SIGKILL (the MCP stdio shutdown sequence). The status
        is the server's (the command's own process); what is left of its group after it ends is ended too."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        returncode: int | None = None
        for signum, wait_s in ((None, STDIN_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, None)):
            if signum is not None:
                self.signal(signum)
            with contextlib.suppress(TimeoutError):
                returncode = await asyncio.wait_for(self.proc.wait(), wait_s)
                break
        await self._end_group()
        return returncode if returncode is not None else await self.proc.wait()

    async def _end_group(self) -> None:
        """Processes the server left behind in its group get SIGTERM, then SIGKILL after a bound."""
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if not self._group_alive():
                return
            self.signal(signum)
            deadline = time.monotonic() + TERM_GRACE_S
            while self._group_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)

    def describe_exit(self) -> str:
        code = self.proc.returncode
        if code is None:
            return f"{self.label} is still running"
        cause = f" by brownout rule {self.killed_by!r}" if self.killed_by else ""
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"{self.label} was killed{cause} ({name})"
        return f"{self.label} exited with status {code}"


async def spawn(command: Sequence[str], *, limit: int) -> Child:
    """Start the server with piped stdin/stdout and the inherited stderr and environment."""
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
        limit=limit,
        env=dict(os.environ),
        # Its own session and process group: signals reach the launcher's grandchildren too, and a
        # terminal's Ctrl-C reaches brownout alone, which passes it on (see run.py).
        start_new_session=True,
    )
    return Child(proc, server_label(command))


def server_label(command: Sequence[str]) -> str:
    """A short name for the server: `npx server-filesystem`, `python weather.py`."""
    words = [os.path.basename(command[0])]
    # The script or package after the interpreter; a `-c` program is no name.
    arg = next((a for a in command[1:] if not a.startswith("-")), None) if "-c" not in command[1:2] else None
    if arg is not None:
        words.append(os.path.basename(arg.rstrip("/")) or arg)
    return " ".join(words)
