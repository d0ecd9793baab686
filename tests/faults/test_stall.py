from __future__ import annotations

import pytest
from pydantic import ValidationError

from brownout.faults.base import StreamTiming
from brownout.faults.stall import StallFault, StallParams


def test_stall_timing(make_ctx) -> None:
    fault = StallFault(StallParams(type="stall", after_events=3, pause_ms=2500))
    assert fault.stream_timing(make_ctx(stream=True)) == StreamTiming(pause_after_events=3, pause_s=2.5)
    assert not fault.wants_body(make_ctx())


@pytest.mark.parametrize("bad", [{"pause_ms": 0}, {"pause_ms": 10, "after_events": -1}, {}])
def test_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        StallParams.model_validate({"type": "stall", **bad})


def test_zero_events_means_before_the_first_event(make_ctx) -> None:
    fault = StallFault(StallParams(type="stall", after_events=0, pause_ms=100))
    assert fault.stream_timing(make_ctx(stream=True)) == StreamTiming(pause_after_events=0, pause_s=0.1)
    assert "0 pauses before the first event" in StallParams.model_fields["after_events"].description
