from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from brownout.faults.base import Hang
from brownout.faults.hang import HangFault, HangParams


def test_hang_with_duration(make_ctx) -> None:
    fault = HangFault(HangParams(type="hang", duration_ms=1500))
    assert asyncio.run(fault.before_upstream(make_ctx())) == Hang(1.5)


def test_hang_until_client_gives_up(make_ctx) -> None:
    fault = HangFault(HangParams(type="hang"))
    assert asyncio.run(fault.before_upstream(make_ctx())) == Hang(None)
    assert fault.describe() == {"type": "hang"}


def test_negative_duration_rejected() -> None:
    with pytest.raises(ValidationError):
        HangParams(type="hang", duration_ms=-5)
