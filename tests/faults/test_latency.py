from __future__ import annotations

import asyncio
import random
import statistics

import pytest
from pydantic import ValidationError

from brownout.faults.base import StreamTiming
from brownout.faults.latency import LatencyFault, LatencyParams, sample_delay_s
from brownout.faults.plan import merge_timings


def params(**kw: object) -> LatencyParams:
    return LatencyParams.model_validate({"type": "latency", **kw})


def test_fixed_request_phase_sleeps_before_upstream(make_ctx, sleeps) -> None:
    fault = LatencyFault(params(delay_ms=500))
    ctx = make_ctx()
    assert asyncio.run(fault.before_upstream(ctx)) is None
    asyncio.run(fault.on_response_headers(ctx, {}))
    assert sleeps.calls == [0.5]
    assert fault.holds_response(ctx) is False  # the answer itself is never held back


def test_first_byte_phase_sleeps_on_headers_only(make_ctx, sleeps) -> None:
    fault = LatencyFault(params(delay_ms=250, phase="first_byte"))
    ctx = make_ctx()
    asyncio.run(fault.before_upstream(ctx))
    assert sleeps.calls == []
    asyncio.run(fault.on_response_headers(ctx, {}))
    assert sleeps.calls == [0.25]
    assert fault.holds_response(ctx) is True


@pytest.mark.parametrize("dist", ["uniform", "normal", "lognormal"])
def test_distributions_are_seeded_and_never_negative(dist: str) -> None:
    p = params(delay_ms=100, jitter_ms=300, distribution=dist)
    a = [sample_delay_s(p, random.Random(7)) for _ in range(3)]
    b = [sample_delay_s(p, random.Random(7)) for _ in range(3)]
    assert a == b
    rng = random.Random(3)
    samples = [sample_delay_s(p, rng) for _ in range(2000)]
    assert min(samples) >= 0.0


def test_uniform_stays_in_range_and_lognormal_mean() -> None:
    rng = random.Random(1)
    u = [sample_delay_s(params(delay_ms=100, jitter_ms=20), rng) for _ in range(1000)]
    assert min(u) >= 0.08 and max(u) <= 0.12
    ln = [sample_delay_s(params(delay_ms=200, jitter_ms=50, distribution="lognormal"), rng) for _ in range(5000)]
    assert statistics.mean(ln) == pytest.approx(0.2, rel=0.05)
    assert statistics.stdev(ln) == pytest.approx(0.05, rel=0.15)


@pytest.mark.parametrize(
    "bad",
    [
        {"delay_ms": -1},
        {"delay_ms": 1, "jitter_ms": -1},
        {"delay_ms": 1, "distribution": "pareto"},
        {"delay_ms": 1, "jitter_ms": 5, "distribution": "fixed"},
        {"delay_ms": 1, "phase": "body"},
        {"delay_ms": 1, "x": 1},
    ],
)
def test_invalid_params_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        params(**bad)


def test_events_phase_delays_the_stream_not_the_request(make_ctx) -> None:
    fault = LatencyFault(LatencyParams(type="latency", delay_ms=250, phase="events"))
    ctx = make_ctx()
    assert asyncio.run(fault.before_upstream(ctx)) is None and not fault.holds_response(ctx)
    timing = fault.stream_timing(ctx)
    assert timing is not None and timing.event_delay_s == 0.25 and timing.paced
    assert ctx.extra["delay_s"] == 0.25 and not fault.acts_on_handshake()
    assert LatencyFault(LatencyParams(type="latency", delay_ms=250)).stream_timing(ctx) is None


def test_stream_delays_merge_to_the_longest() -> None:
    merged = merge_timings(
        [StreamTiming(event_delay_s=0.2), StreamTiming(event_delay_s=0.5), StreamTiming(bytes_per_s=9)]
    )
    assert merged is not None and (merged.event_delay_s, merged.bytes_per_s) == (0.5, 9)
