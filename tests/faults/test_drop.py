"""drop: the matched event never reaches its peer (end to end: tests/proxy/test_realtime_faults.py)."""

from __future__ import annotations

from tests.faults.engine_support import engine
from tests.faults.realtime_support import OPENAI, act, event, session


def test_drop_drops_the_event_and_nothing_else() -> None:
    e = engine({"name": "d", "match": {"event": "response.output_text.delta"}, "fault": {"type": "drop"}})
    codec = session()
    ev = event(codec, {"type": "response.output_text.delta", "response_id": "resp_1", "delta": "x"})
    assert ev.generation is not None
    (fired,) = e.plan_event(ev.generation.exchange, OPENAI, ev)
    action = act(fired, ev)
    assert action is not None and action.drop and not (action.close or action.reset or action.copies or action.delay_s)
    assert [f.fault for f in ev.generation.exchange.faults] == ["drop"]  # recorded on the generation's span
