"""The proxy's side of the join: the agent's spans in, wire calls held for them, settled traces out.

On mitmproxy's event loop, like everything that touches it: intercepted OTLP exports (the pipeline) and
the OTLP receiver hand their spans to `receive`; a finished LLM or tool exchange goes through `admit`
before its span is built. One that propagated trace context is joined at once (its span is the child
of the agent's span already); one without waits up to `join_wait_s` for the agent span that contains
it in time, since agents' exporters send in batches every few seconds, and is released (`release`)
when it arrives or the wait ends. `tick` (twice a second) releases what is due and hands each
settled trace to `judge`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from brownout.core.agent_spans import AgentSpan
from brownout.core.config import parse_listen
from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.joined_trace import JoinedTrace
from brownout.core.span_join import BY_CONTEXT, BY_TIME, call_kind, parse_traceparent
from brownout.core.span_join import wire_call as make_wire_call
from brownout.core.span_match import join_by_time
from brownout.core.span_store import SpanStore
from brownout.core.spans import ExchangeSpan
from brownout.exporters.config import OtlpSettings
from brownout.exporters.otlp_forward import OtlpForwarder
from brownout.proxy.agent_config import AgentSpansConfig
from brownout.proxy.otlp_receiver import OtlpReceiver

__all__ = ["TICK_S", "AgentJoin"]

log = logging.getLogger(__name__)

TICK_S = 0.5
PENDING_MAX = 10_000  # exchanges waiting for their agent span; past it they go unjoined (counted)
# While a call waits, only a span that holds it will do (started before it, ended after it give or take
# this: the proxy may mark a response's end a moment after the client read it); the span it belongs to may
# not have arrived yet.
WAIT_SKEW_S = 0.01
TAKEN_MAX = 50_000  # agent spans lately joined to a call by time: others are preferred for the next call

# (what, label, how many): "received" by source, "evicted" by reason, "joins" by how (or "none").
Count = Callable[[str, str, int], None]


class AgentJoin:
    """Agent spans and wire calls per trace (a SpanStore), and the wire calls waiting for their span."""

    def __init__(
        self,
        config: AgentSpansConfig,
        *,
        guard: Guard,
        release: Callable[[Exchange], None],
        judge: Callable[[JoinedTrace], None],
        count: Count | None = None,
    ) -> None:
        self.config = config
        self._guard = guard
        self._release = release
        self._judge = judge
        self._count: Count = count or (lambda what, label, n: None)
        self.store = SpanStore(
            max_traces=config.max_traces,
            max_spans=config.max_spans,
            ttl_s=config.ttl_s,
            settle_s=config.settle_s,
            skew_s=config.skew_ms / 1000,
            on_evicted=lambda reason, n: self._count("evicted", reason, n),
        )
        self._skew_s = config.skew_ms / 1000
        self._pending: OrderedDict[str, tuple[float, Exchange]] = OrderedDict()  # by deadline (FIFO)
        self._ticking: asyncio.Task[None] | None = None
        self._taken: OrderedDict[str, None] = OrderedDict()
        self._client_trace: OrderedDict[str, str] = OrderedDict()  # client connection -> trace its last call joined
        self.receiver: OtlpReceiver | None = None
        self.forwarder: OtlpForwarder | None = None

    @property
    def waiting(self) -> int:
        return len(self._pending)

    def receive(self, spans: Iterable[AgentSpan], source: str) -> None:
        """A batch of the agent's spans (`source`: "receiver" or "proxy"); waiting calls it completes go on."""
        spans = list(spans)
        self._count("received", source, len(spans))
        if self.store.add_spans(spans) and self._pending:
            for key, (_, exchange) in list(self._pending.items()):
                if self._by_time(exchange, skew_s=WAIT_SKEW_S):
                    del self._pending[key]
                    self._release(exchange)

    def admit(self, exchange: Exchange) -> bool:
        """True: `exchange` waits for its agent span, and `release` gets it later; False: go on now."""
        if call_kind(exchange.operation if exchange.mcp_method != "tools/call" else "tools/call") is None:
            return False
        context = parse_traceparent(exchange.traceparent)
        if context is not None:
            exchange.agent_trace_id, exchange.agent_span_id = context
            exchange.agent_join = BY_CONTEXT
            self._count("joins", BY_CONTEXT, 1)
            return False
        if self._by_time(exchange, skew_s=WAIT_SKEW_S):
            return False
        if self.config.join_wait_s <= 0 or len(self._pending) >= PENDING_MAX or not self._loop_running():
            self._count("joins", "none", 1)
            return False
        self._pending[exchange.id] = (time.monotonic() + self.config.join_wait_s, exchange)
        return True

    def _by_time(self, exchange: Exchange, *, skew_s: float) -> bool:
        """Join by time. While the wait lasts only a span that holds the call (WAIT_SKEW_S) will do (the span
        the call really belongs to may not have arrived yet, and an earlier one can be within the skew); at its
        end, the best one within `skew_ms` (the agent's clock may be another machine's)."""
        candidates = self.store.around(exchange.timings.start, skew_s)
        last = self._client_trace.get(exchange.client)
        # The agent opens its span before the call starts: only the clocks' difference may make it look later.
        start_skew = 0.0 if skew_s == WAIT_SKEW_S else self._skew_s
        span = join_by_time(
            exchange, candidates, skew_s=skew_s, taken=self._taken, trace_id=last, start_skew_s=start_skew
        )
        if span is None:
            return False
        self._taken[span.span_id] = None
        self._client_trace[exchange.client] = span.trace_id
        self._client_trace.move_to_end(exchange.client)
        for bounded in (self._taken, self._client_trace):
            if len(bounded) > TAKEN_MAX:
                bounded.popitem(last=False)
        exchange.agent_trace_id, exchange.agent_span_id, exchange.agent_join = span.trace_id, span.span_id, BY_TIME
        self._count("joins", BY_TIME, 1)
        return True

    def record(self, exchange: Exchange, span: ExchangeSpan) -> None:
        """Keep a finished call (its span built) for the judgement of its trace."""
        call = make_wire_call(exchange, trace_id=span.trace_id_hex, span_id=span.span_id_hex, failed=span.failed)
        if call is not None:
            self.store.add_wire(call, exchange.agent_trace_id or span.trace_id_hex)

    def tick(self, *, final: bool = False) -> None:
        """Release the calls whose wait is over (all with `final`), then judge the traces that settled."""
        now = time.monotonic()
        while self._pending:
            key, (deadline, exchange) = next(iter(self._pending.items()))
            if deadline > now and not final:
                break
            del self._pending[key]
            if not self._by_time(exchange, skew_s=self._skew_s + WAIT_SKEW_S):
                self._count("joins", "none", 1)
            self._release(exchange)
        oldest = next(iter(self._pending.values()), None)
        waiting_since = None if oldest is None else oldest[1].timings.start - self._skew_s
        for trace in self.store.take_settled(force=final, waiting_since=waiting_since):
            self._judge(trace)

    def own_receiver(self, host: str, port: int) -> bool:
        """An intercepted export addressed to brownout's own receiver: the receiver takes its spans."""
        receiver = self.receiver
        return receiver is not None and port == receiver.port and host in ("127.0.0.1", "localhost", receiver.host)

    # -- on the loop ---------------------------------------------------------------------------

    async def start_receiver(self, otlp: OtlpSettings | None, on_forward: Callable[[str, str], None]) -> None:
        """Bind the OTLP receiver when configured (OSError naming the address), forwarding to `otlp`'s
        endpoint when that is OTLP/HTTP."""
        config = self.config.receiver
        if config is None:
            return
        if otlp is not None and _same_address(otlp.endpoint, config.listen):
            raise OSError(
                errno.EINVAL,
                f"exporters.otlp's endpoint {otlp.endpoint} is brownout's own OTLP receiver (agent_spans.receiver."
                "listen): brownout would receive its own spans as the agent's, and forward them to itself",
            )
        if config.forward and otlp is not None:
            if otlp.protocol == "http/protobuf":
                self.forwarder = OtlpForwarder(otlp, on_result=on_forward)
            else:
                log.warning("brownout: the OTLP receiver forwards nothing: exporters.otlp speaks %s", otlp.protocol)
        self.receiver = OtlpReceiver(
            config,
            guard=self._guard,
            on_spans=lambda spans: self.receive(spans, "receiver"),
            forward=self.forwarder.forward if self.forwarder is not None else None,
        )
        await self.receiver.start()

    async def stop_receiver(self) -> None:
        if self.receiver is not None:
            await self.receiver.stop()
        if self.forwarder is not None:
            await self.forwarder.aclose()

    @staticmethod
    def _loop_running() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False  # driven synchronously (a test harness): nothing would ever release it
        return True

    def start(self) -> None:
        """Tick on the running loop until stop()."""
        if self._ticking is None and self._loop_running():
            self._ticking = asyncio.get_running_loop().create_task(self._tick_forever())

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._guard.call("agent_spans", self.tick)  # counted, and the ticker lives on

    def stop(self) -> None:
        """Release everything still waiting and judge every trace held (shutdown)."""
        if self._ticking is not None:
            self._ticking.cancel()
            self._ticking = None
        self.tick(final=True)


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""})


def _same_address(endpoint: str, listen: str) -> bool:
    """Whether an OTLP endpoint URL names the receiver's listen address (port 0 is never anyone's)."""
    host, port = parse_listen(listen)
    url = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if port == 0 or url.port != port:
        return False
    there = (url.hostname or "").lower()
    return there == host or (there in _LOOPBACK and host in _LOOPBACK)
