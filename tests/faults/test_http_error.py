from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from faults.base import CLOSE, Respond
from faults.http_error import HttpErrorFault, HttpErrorParams
from tests.faults.conftest import run_editor, sse


def fault(**kw: object) -> HttpErrorFault:
    return HttpErrorFault(HttpErrorParams.model_validate({"type": "http_error", **kw}))


def test_before_upstream_answers_with_wire_error(make_ctx) -> None:
    res = asyncio.run(fault(status=429, retry_after_s=2, error_type="insufficient_quota").before_upstream(make_ctx()))
    assert isinstance(res, Respond) and res.status == 429
    assert json.loads(res.body) == {"status": 429, "type": "insufficient_quota", "message": None, "retry_after_s": 2}


def test_mid_stream_on_non_stream_request_answers_up_front(make_ctx) -> None:
    f = fault(status=529, mid_stream=True)
    ctx = make_ctx(stream=False)
    assert isinstance(asyncio.run(f.before_upstream(ctx)), Respond)
    assert f.stream_editor(ctx) is None


def test_mid_stream_emits_error_event_after_n_events_then_closes(make_ctx) -> None:
    f = fault(mid_stream=True, after_events=2, error_type="overloaded_error", message="Overloaded")
    ctx = make_ctx(stream=True)
    assert asyncio.run(f.before_upstream(ctx)) is None
    events = sse({"n": 1}, {"n": 2}, {"n": 3}, {"n": 4})
    out, end = run_editor(f.stream_editor(ctx), events)
    assert end == CLOSE
    assert out == events[0].raw + events[1].raw + b'event: error\ndata: {"type": "overloaded_error", "message": "Overloaded"}\n\n'


def test_mid_stream_short_stream_replaces_terminal_event(make_ctx) -> None:
    f = fault(mid_stream=True, after_events=10)
    events = sse({"n": 1})
    out, end = run_editor(f.stream_editor(make_ctx(stream=True)), events)
    assert end is None and b"[DONE]" not in out and out.endswith(b"event: error\n" + out.split(b"event: error\n")[1])


@pytest.mark.parametrize("bad", [{"status": 200}, {"status": 600}, {"after_events": -1}, {"retry_after_s": -1}])
def test_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        HttpErrorParams.model_validate({"type": "http_error", **bad})
