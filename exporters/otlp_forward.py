"""Forwarding what the OTLP receiver got, unchanged, to brownout's own OTLP endpoint (a collector).

So brownout can sit between an agent and its collector: the agent exports to brownout, brownout keeps
the GenAI spans it needs and passes every request on as it came (same body, content type and
encoding), with the headers of `exporters.otlp` (an API key). Posts run on the event loop as tasks,
at most `max_in_flight` at once; one more is dropped. Every outcome is counted (`on_result(signal,
outcome)`: ok, failed, dropped), so nothing is lost without a trace. Only `http/protobuf` endpoints
take OTLP/HTTP bodies: with `grpc` the forwarder is not built (the receiver says so at start).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

import httpx

from brownout.exporters.config import OtlpSettings

__all__ = ["OtlpForwarder", "signal_url"]

log = logging.getLogger(__name__)

_SIGNALS = ("traces", "metrics", "logs")


def signal_url(settings: OtlpSettings, signal: str) -> str:
    """The URL of `signal` at the endpoint brownout exports its own traces to (a collector's base URL)."""
    endpoint = settings.endpoint.rstrip("/")
    base = endpoint[: -len("/v1/traces")] if endpoint.endswith("/v1/traces") else endpoint
    return f"{base}/v1/{signal}"


class OtlpForwarder:
    """Posts OTLP/HTTP requests on to a collector, off the receiver's answer, counting each outcome."""

    def __init__(
        self,
        settings: OtlpSettings,
        *,
        on_result: Callable[[str, str], None],
        max_in_flight: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if settings.protocol != "http/protobuf":
            raise ValueError(f"settings.protocol: only http/protobuf endpoints take OTLP/HTTP, not {settings.protocol}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.urls = {signal: signal_url(settings, signal) for signal in _SIGNALS}
        self._headers = dict(settings.headers)
        self._timeout_s = settings.timeout_s
        self._on_result = on_result
        self._max = max_in_flight
        self._tasks: dict[asyncio.Task[None], str] = {}  # -> its signal
        # Never through a proxy from the environment (brownout's own, say): straight to the collector.
        self._client = httpx.AsyncClient(trust_env=False, timeout=settings.timeout_s, transport=transport)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def forward(self, signal: str, body: bytes, headers: Mapping[str, str]) -> None:
        """Post `body` to the collector's `signal` endpoint in a task (on the running loop)."""
        if len(self._tasks) >= self._max:
            self._on_result(signal, "dropped")
            log.warning("brownout: OTLP %s export dropped: %d forwards already in flight", signal, self._max)
            return
        sent = {k: v for k, v in headers.items() if k.lower() in ("content-type", "content-encoding")}
        task = asyncio.get_running_loop().create_task(self._post(signal, body, {**self._headers, **sent}))
        self._tasks[task] = signal
        task.add_done_callback(lambda done: self._tasks.pop(done, None))

    async def _post(self, signal: str, body: bytes, headers: dict[str, str]) -> None:
        try:
            answer = await self._client.post(self.urls[signal], content=body, headers=headers)
        except httpx.HTTPError as e:
            self._on_result(signal, "failed")
            log.warning("brownout: forwarding an OTLP %s export failed: %s", signal, type(e).__name__)
            return
        if answer.is_success:
            self._on_result(signal, "ok")
        else:
            self._on_result(signal, "failed")
            log.warning("brownout: the collector answered an OTLP %s export with %d", signal, answer.status_code)

    async def aclose(self, timeout_s: float = 3.0) -> None:
        """Let the forwards in flight finish (bounded; the rest are cancelled and counted), then close."""
        if self._tasks:
            signals = dict(self._tasks)
            _, late = await asyncio.wait(signals, timeout=timeout_s)
            for task in late:
                task.cancel()
                self._on_result(signals[task], "dropped")
        await self._client.aclose()
