"""duplicate: the matched event arrives again right after itself (end to end: tests/proxy/test_realtime_faults.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.faults.engine_support import config, engine
from tests.faults.realtime_support import OPENAI, act, event, session


def test_copies_follow_the_event() -> None:
    e = engine({"name": "d", "match": {"event": "*"}, "fault": {"type": "duplicate", "copies": 3}})
    codec = session()
    ev = event(codec, {"type": "response.output_text.done", "response_id": "resp_1", "text": "hi"})
    (fired,) = e.plan_event(codec.session, OPENAI, ev)
    action = act(fired, ev)
    assert action is not None and action.copies == 3 and not action.drop


@pytest.mark.parametrize("copies", [0, 11])
def test_copies_are_bounded(copies: int) -> None:
    with pytest.raises(ValidationError, match="copies"):
        config({"name": "d", "match": {"event": "*"}, "fault": {"type": "duplicate", "copies": copies}})
