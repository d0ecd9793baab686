from __future__ import annotations

import pytest
from pydantic import ValidationError

from brownout.faults.base import StreamTiming
from brownout.faults.throttle import ThrottleFault, ThrottleParams


@pytest.mark.parametrize("stream", [True, False])
def test_throttle_paces_streamed_and_buffered_bodies(make_ctx, stream: bool) -> None:
    fault = ThrottleFault(ThrottleParams(type="throttle", bytes_per_s=512))
    ctx = make_ctx(stream=stream)
    assert fault.stream_timing(ctx) == StreamTiming(bytes_per_s=512)
    assert fault.stream_editor(ctx) is None and not fault.wants_body(ctx)


@pytest.mark.parametrize("rate", [0, -1])
def test_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValidationError):
        ThrottleParams(type="throttle", bytes_per_s=rate)
