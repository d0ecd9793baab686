from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from brownout.faults.base import Reset, StreamTiming
from brownout.faults.reset import ResetFault, ResetParams


def test_request_phase_resets_before_upstream(make_ctx) -> None:
    fault = ResetFault(ResetParams(type="reset"))
    ctx = make_ctx()
    assert asyncio.run(fault.before_upstream(ctx)) == Reset()
    assert fault.stream_timing(ctx) is None


def test_mid_body_resets_after_bytes(make_ctx) -> None:
    fault = ResetFault(ResetParams(type="reset", phase="mid_body", after_bytes=120))
    ctx = make_ctx()
    assert asyncio.run(fault.before_upstream(ctx)) is None
    assert fault.stream_timing(ctx) == StreamTiming(reset_after_bytes=120)


@pytest.mark.parametrize(
    "bad", [{"phase": "mid_body"}, {"phase": "request", "after_bytes": 3}, {"phase": "mid_body", "after_bytes": -1}]
)
def test_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ResetParams.model_validate({"type": "reset", **bad})
