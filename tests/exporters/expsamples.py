"""Realistic exchanges, violations and decisions for the exporter tests."""

from __future__ import annotations

import itertools
import time
from typing import Any

from brownout.core import wire
from brownout.core.cost import Pricer
from brownout.core.exchange import Exchange, FaultRecord, Timings, Usage
from brownout.faults.decisions import Decision
from brownout.invariants.records import Violation

__all__ = ["decision", "exchange", "traffic", "violation"]

_ids = itertools.count(1)


def exchange(**overrides: Any) -> Exchange:
    """A finished OpenAI chat exchange (2xx, 1.2 s, 80 ms TTFC, 12+34 tokens) unless overridden."""
    now = time.time()
    fields: dict[str, Any] = {
        "id": f"ex-{next(_ids)}",
        "session": "s-1",
        "method": "POST",
        "scheme": "https",
        "host": "api.openai.com",
        "port": 443,
        "path": "/v1/chat/completions",
        "provider": "openai",
        "operation": "chat",
        "model": "gpt-4o-mini",
        "status": 200,
        "usage": Usage(12, 34),
        "timings": Timings(start=now - 1.2, first_upstream_byte=now - 1.12, end=now),
    }
    fields.update(overrides)
    # As the wire format would stamp it on a recognised request.
    if fields["provider"] in wire.BUILTIN.providers:
        fields.setdefault("gen_ai_provider", wire.BUILTIN.by_provider(fields["provider"]).gen_ai_provider)
    return Exchange(**fields)


def violation(**overrides: Any) -> Violation:
    fields: dict[str, Any] = {
        "invariant": "latency_budget",
        "severity": "error",
        "message": "total 1.2 s over budget 1 s",
        "session_id": "s-1",
        "timestamp": time.time(),
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
        "exchange_id": "ex-1",
        "provider": "openai",
        "model": "gpt-4o-mini",
    }
    fields.update(overrides)
    return Violation(**fields)


def decision(**overrides: Any) -> Decision:
    fields: dict[str, Any] = {
        "exchange_id": "ex-1",
        "session": "s-1",
        "rule": "slow-openai",
        "outcome": "fired",
        "reason": "p=0.5",
        "counter": 1,
        "at": time.time(),
        "fault": "latency",
    }
    fields.update(overrides)
    return Decision(**fields)


def traffic() -> list[Exchange]:
    """A mixed chaos run: every provider, faults, errors, streams, retries, tools; priced as the pipeline prices."""
    now = time.time()
    t = lambda d, f=None: Timings(start=now - d, first_upstream_byte=None if f is None else now - d + f, end=now)
    exchanges = [
        exchange(),
        exchange(faults=[FaultRecord("slow-openai", "latency", {"delay_ms": 500}, now)], timings=t(0.7, 0.6)),
        exchange(
            status=429,
            retry_count=1,
            error_type="rate_limit_exceeded",
            faults=[FaultRecord("openai-429", "http_error", {}, now)],
            timings=t(0.01, 0.01),
        ),
        exchange(
            provider="anthropic",
            operation="messages",
            model="claude-sonnet-4-5",
            host="api.anthropic.com",
            stream=True,
            streamed=True,
            usage=Usage(100, 250),
            timings=t(4.0, 0.3),
        ),
        exchange(
            provider="anthropic",
            operation="messages",
            model="claude-sonnet-4-5",
            status=529,
            faults=[FaultRecord("anthropic-overload", "http_error", {}, now)],
            timings=t(0.02, 0.02),
        ),
        exchange(
            provider="gemini",
            operation="generate_content",
            model="gemini-2.0-flash",
            usage=Usage(50, 60),
            timings=t(2.5, 0.9),
        ),
        exchange(provider="ollama", operation="chat", model="llama3.2", usage=Usage(20, 5), timings=t(95.0, 3.0)),
        exchange(
            provider="mcp", operation="tools/call", model=None, tool_name="search", usage=Usage(), timings=t(0.05, 0.05)
        ),
        exchange(
            provider="openai",
            operation="chat",
            model="my-secret-finetune-xyz",
            status=None,
            error_type="connection",
            timings=t(0.3),
        ),
        exchange(provider="http", operation="http", model=None, usage=Usage(), status=503, timings=t(0.1, 0.1)),
    ]
    pricer = Pricer()
    for ex in exchanges:
        ex.cost = pricer.price(ex)
    return exchanges
