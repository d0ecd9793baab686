"""rate_limits: a rate-limit update with nothing remaining, in place of the provider's or after the event; Gemini
Live sends none, so the fault is recorded as not applicable there (end to end: tests/proxy/test_realtime_faults.py)."""

from __future__ import annotations

import json

import pytest

from brownout.faults.base import NotApplicable
from tests.faults.engine_support import engine
from tests.faults.realtime_support import GEMINI, OPENAI, act, event, session

RULE = {"name": "rl", "match": {"event": "*"}, "fault": {"type": "rate_limits", "reset_s": 12, "limits": ["tokens"]}}


def test_it_replaces_the_providers_own_update() -> None:
    codec = session(OPENAI)
    ev = event(codec, {"type": "rate_limits.updated", "rate_limits": []})
    (fired,) = engine(RULE).plan_event(codec.session, OPENAI, ev)
    action = act(fired, ev)
    assert action is not None and action.replace is not None and not action.after
    limits = json.loads(action.replace.content)["rate_limits"]
    assert limits == [{"name": "tokens", "limit": 40000, "remaining": 0, "reset_seconds": 12}]


def test_after_any_other_event() -> None:
    codec = session(OPENAI)
    ev = event(codec, {"type": "response.done", "response": {"id": "resp_1"}})
    (fired,) = engine(RULE).plan_event(codec.session, OPENAI, ev)
    action = act(fired, ev)
    assert action is not None and action.replace is None and len(action.after) == 1


def test_gemini_live_has_no_rate_limit_updates() -> None:
    codec = session(GEMINI)
    ev = event(codec, {"serverContent": {"turnComplete": True}})
    (fired,) = engine(RULE).plan_event(codec.session, GEMINI, ev)
    with pytest.raises(NotApplicable, match="gemini_live sends no rate-limit updates"):
        act(fired, ev)
