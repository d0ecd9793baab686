"""close: the provider's warning, then a close frame with a chosen code (end to end, with the official clients:
tests/proxy/test_realtime_faults.py; the close path itself: tests/proxy/test_realtime_close.py)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from brownout.core.wire.realtime import CloseSpec
from brownout.faults.close import CloseFault, CloseParams
from tests.faults.engine_support import config
from tests.faults.realtime_support import GEMINI, OPENAI, session


def _fault(**params: object) -> CloseFault:
    return CloseFault(CloseParams.model_validate({"type": "close", **params}))


def test_openai_closes_with_session_expired_then_1001() -> None:
    action = _fault().action(session(OPENAI))
    assert action.spec == CloseSpec(1001, "") and action.warning_s == 0
    (warning,) = action.warning
    assert json.loads(warning.content)["error"]["code"] == "session_expired"


def test_gemini_warns_with_go_away_and_its_time_left_then_1011() -> None:
    action = _fault(warning_ms=1500).action(session(GEMINI))
    assert action.spec.code == 1011 and action.warning_s == 1.5
    assert json.loads(action.warning[0].content) == {"goAway": {"timeLeft": "1.5s"}}


def test_a_chosen_code_and_reason_without_warning() -> None:
    action = _fault(code=1008, reason="Session resumption handle is invalid.", warning=False).action(session(GEMINI))
    assert action.spec == CloseSpec(1008, "Session resumption handle is invalid.") and action.warning == ()


def test_other_websockets_get_1001_and_no_warning() -> None:
    assert _fault().action(None).spec == CloseSpec(1001, "") and _fault().action(None).warning == ()


def test_after_s_makes_it_a_session_fault_decided_at_the_upgrade() -> None:
    assert _fault(after_s=3600).acts_on_handshake() and not _fault(after_s=3600).event_only()
    assert not _fault().acts_on_handshake() and _fault().event_only()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"code": 1006}, "cannot be sent"),
        ({"code": 1015}, "cannot be sent"),
        ({"code": 2000}, "cannot be sent"),
        ({"code": 999}, "greater than or equal to 1000"),
        ({"reason": "é" * 62}, "123 bytes"),
        ({"warning_ms": -1}, "greater than or equal to 0"),
    ],
)
def test_codes_and_reasons_a_close_frame_cannot_carry_are_config_errors(
    params: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        config({"name": "c", "match": {"event": "*"}, "fault": {"type": "close", **params}})
