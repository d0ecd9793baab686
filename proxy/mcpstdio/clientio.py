"""The MCP client's side of `brownout mcp-stdio`: our stdin and stdout, as asyncio streams.

A client normally gives us pipes, but a script may redirect a file (`< requests.jsonl > replies.jsonl`),
which asyncio's pipe transports refuse: a regular file is read in a worker thread and written with
plain writes (a regular file never blocks for long, and never fills up the way a pipe does). The end of
a file on stdin is the end of the requests, not the client leaving: the relay waits for their answers.
A closed descriptor or another kind of file fails at once, before the server starts, with a message
naming it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from typing import IO, Any, Protocol

__all__ = ["CLIENT_WRITE_TIMEOUT_S", "FILE_REPLIES_TIMEOUT_S", "ClientIOError", "ClientOut", "client_streams"]

CLIENT_WRITE_TIMEOUT_S = 30.0  # a client that takes no byte of its replies for this long counts as gone
FILE_REPLIES_TIMEOUT_S = 30.0  # after a regular file's end, the requests read have this long to be answered
_READ_CHUNK = 1 << 16


class ClientIOError(Exception):
    """stdin or stdout cannot carry the MCP client's messages."""


class ClientOut(Protocol):
    """Where replies to the client go: a StreamWriter's surface, as the relay uses it."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def is_closing(self) -> bool: ...

    def pending(self) -> int:
        """Bytes written and not yet taken by the client."""
        ...

    def close(self, *, abort: bool = False) -> None:
        """Close; with `abort`, drop what the client has not taken (it left, or stopped reading)."""
        ...


class _PipeOut:
    """A pipe, socket or terminal on stdout, through asyncio's write transport (with flow control)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()

    def is_closing(self) -> bool:
        return self.writer.is_closing()

    def pending(self) -> int:
        return self.writer.transport.get_write_buffer_size()

    def close(self, *, abort: bool = False) -> None:
        if self.writer.transport.is_closing():
            return  # the client's end is gone: so is the transport
        if abort:
            self.writer.transport.abort()
        else:
            self.writer.close()


class _FileOut:
    """A regular file on stdout: plain writes, nothing to wait for."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.closed:
            try:
                view = view[os.write(self.fd, view) :]
            except OSError:
                self.closed = True  # a full disk, a file closed under us: the client is gone

    async def drain(self) -> None:
        if self.closed:
            raise ConnectionError("stdout can no longer be written")

    def is_closing(self) -> bool:
        return self.closed

    def pending(self) -> int:
        return 0

    def close(self, *, abort: bool = False) -> None:
        self.closed = True


def _fd(stream: IO[Any] | None, name: str) -> int:
    """The descriptor of our stdin or stdout; a ClientIOError unless it is a pipe, socket, terminal or
    regular file. Python sets sys.stdin/stdout to None when the descriptor was closed at startup."""
    try:
        if stream is None:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) else str(e)
        raise ClientIOError(f"{name} is closed ({reason}): mcp-stdio speaks to its MCP client there") from e
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISREG(mode)):
        raise ClientIOError(f"{name} is no stream: mcp-stdio needs a pipe, socket, terminal or regular file there")
    return fd


async def _read_file(fd: int, reader: asyncio.StreamReader) -> None:
    try:
        while data := await asyncio.to_thread(os.read, fd, _READ_CHUNK):
            reader.feed_data(data)
    except OSError as e:
        reader.set_exception(ConnectionError(f"stdin: {e.strerror}"))
        return
    reader.feed_eof()


async def client_streams(
    limit: int, *, stdin: IO[Any] | None, stdout: IO[Any] | None
) -> tuple[asyncio.StreamReader, ClientOut, asyncio.Task[None] | None]:
    """Our stdin as a reader and stdout as a ClientOut; raises ClientIOError for what cannot carry them.
    The task, when there is one, feeds the reader from a regular file (cancel it at the end)."""
    stdin_fd, stdout_fd = _fd(stdin, "stdin"), _fd(stdout, "stdout")
    in_mode, out_mode = os.fstat(stdin_fd).st_mode, os.fstat(stdout_fd).st_mode
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    feeding: asyncio.Task[None] | None = None
    # closefd=False: the descriptors stay open to the end, whatever the transports do with their files.
    if stat.S_ISREG(in_mode):
        feeding = loop.create_task(_read_file(stdin_fd, reader))
    else:
        pipe_in = open(stdin_fd, "rb", buffering=0, closefd=False)  # noqa: SIM115 - the transport closes it
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe_in)
    if stat.S_ISREG(out_mode):
        return reader, _FileOut(stdout_fd), feeding
    pipe_out = open(stdout_fd, "wb", buffering=0, closefd=False)  # noqa: SIM115 - the transport closes it
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe_out)
    return reader, _PipeOut(asyncio.StreamWriter(transport, protocol, None, loop)), feeding
