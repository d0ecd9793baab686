"""The OTLP receiver: agents export their spans to brownout (OTLP/HTTP, protobuf and JSON).

`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318` (what `brownout env` and `exec` set when
`agent_spans.receiver` is on) points an agent's exporter here. Served on mitmproxy's event loop, like
the join it feeds, by a small h11 server: `POST /v1/traces`, `/v1/metrics`, `/v1/logs` (any prefix)
with `application/x-protobuf` or `application/json` bodies, gzip-encoded or not, answered as a
collector answers (an empty Export*ServiceResponse). Trace exports' spans go to `on_spans`; every
request is passed to `forward` unchanged. gRPC is not served: it would need a second server and
protocol stack for what OTLP/HTTP already carries (every OTel SDK exports over HTTP).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Mapping

import h11

from brownout.core.agent_spans import AgentSpan, decode_traces
from brownout.core.config import parse_listen
from brownout.core.guard import Guard
from brownout.core.wire.otlp import signal_of
from brownout.proxy.agent_config import ReceiverConfig

__all__ = ["OtlpReceiver"]

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 30.0  # a connection that sends nothing for this long is closed (exporters keep them alive)
_READ = 65_536
_TYPES = {"application/x-protobuf": b"", "application/json": b"{}"}  # -> an empty Export*ServiceResponse

# signal ("traces", "metrics", "logs"), the request body as it came, its headers (lower-case names)
Forward = Callable[[str, bytes, Mapping[str, str]], None]


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class OtlpReceiver:
    """An OTLP/HTTP server on the running loop; `start` binds it (OSError naming the address)."""

    def __init__(
        self,
        config: ReceiverConfig,
        *,
        guard: Guard,
        on_spans: Callable[[list[AgentSpan]], None],
        forward: Forward | None = None,
    ) -> None:
        self.config = config
        self._guard = guard
        self._on_spans = on_spans
        self._forward = forward
        self._server: asyncio.Server | None = None
        self.port: int | None = None
        self.host = parse_listen(config.listen)[0]

    @property
    def endpoint(self) -> str | None:
        """http://host:port of the bound receiver (None before start)."""
        if self.port is None:
            return None
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else ("::1" if self.host == "::" else self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    async def start(self) -> None:
        host, port = parse_listen(self.config.listen)
        try:
            self._server = await asyncio.start_server(self._serve, host or None, port)
        except OSError as e:
            raise OSError(e.errno, f"cannot serve the OTLP receiver on {self.config.listen}: {e.strerror or e}") from e
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("brownout: OTLP receiver on %s", self.endpoint)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        request: h11.Request | None = None
        body = bytearray()
        too_large = False
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await asyncio.wait_for(reader.read(_READ), IDLE_TIMEOUT_S))
                elif isinstance(event, h11.Request):
                    request, body, too_large = event, bytearray(), False
                elif isinstance(event, h11.Data):
                    too_large = too_large or len(body) + len(event.data) > self.config.max_body_bytes
                    if not too_large:
                        body += event.data
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    status, ctype, out = self._answer(request, bytes(body), too_large)
                    headers = [("content-type", ctype), ("content-length", str(len(out)))]
                    for part in (h11.Response(status_code=status, headers=headers), h11.Data(data=out)):
                        writer.write(conn.send(part) or b"")
                    writer.write(conn.send(h11.EndOfMessage()) or b"")
                    await writer.drain()
                    if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                        break
                    conn.start_next_cycle()
                else:  # ConnectionClosed, or a state this server does not serve
                    break
        except (h11.ProtocolError, TimeoutError, ConnectionError):
            pass  # a broken or idle client: its connection ends, nothing else does
        finally:
            writer.close()

    def _answer(self, request: h11.Request, body: bytes, too_large: bool) -> tuple[int, str, bytes]:
        try:
            return self._accept(request, body, too_large)
        except _Refused as e:
            return e.status, "text/plain", f"{e}\n".encode()
        except Exception as e:  # noqa: BLE001 - a bug of brownout's: counted by the guard, the agent answered
            self._guard.failed("agent_spans", e, "OTLP receiver")
            return 500, "text/plain", b"brownout failed to read the export\n"

    def _accept(self, request: h11.Request, body: bytes, too_large: bool) -> tuple[int, str, bytes]:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        path = request.target.decode("latin-1").partition("?")[0]
        operation = signal_of(path)
        if operation is None:
            raise _Refused(404, "not an OTLP/HTTP path (/v1/traces, /v1/metrics, /v1/logs)")
        if request.method != b"POST":
            raise _Refused(405, "OTLP/HTTP takes POST")
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype not in _TYPES:
            raise _Refused(415, "OTLP/HTTP bodies are application/x-protobuf or application/json")
        if too_large:
            raise _Refused(413, f"larger than agent_spans.receiver.max_body_bytes ({self.config.max_body_bytes})")
        signal = operation.removeprefix("export_")
        if signal == "traces":
            spans = decode_traces(self._decoded(body, headers.get("content-encoding", "")), ctype)
            if spans is None:
                raise _Refused(400, "not an ExportTraceServiceRequest")
            self._guard.call("agent_spans", self._on_spans, spans, context="received OTLP export")
        if self._forward is not None:
            self._guard.call("agent_spans", self._forward, signal, body, headers, context="forwarding an OTLP export")
        return 200, ctype, _TYPES[ctype]

    def _decoded(self, body: bytes, encoding: str) -> bytes:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            return body
        if encoding not in ("gzip", "deflate"):
            raise _Refused(415, f"content-encoding {encoding!r} (gzip, deflate, identity)")
        inflate = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
        try:
            out = inflate.decompress(body, self.config.max_body_bytes)
        except zlib.error as e:
            raise _Refused(400, f"the {encoding} body does not decode") from e
        if inflate.unconsumed_tail:
            raise _Refused(
                413, f"decodes to more than agent_spans.receiver.max_body_bytes ({self.config.max_body_bytes})"
            )
        return out
