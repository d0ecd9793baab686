"""proxy/analysis_frames.py: what crosses to the analysis process comes back equal, in any pieces."""

from __future__ import annotations

import dataclasses
import threading
import typing

import pydantic
import pytest

from brownout.core import exchange as model
from brownout.core.exchange import Exchange
from brownout.proxy import analysis_frames
from brownout.proxy.analysis_frames import Frames, exchange_frame, frame, portable
from brownout.proxy.analysis_worker import _why
from brownout.proxy.config import BrownoutConfig


def _full() -> Exchange:
    """An exchange with every field that holds one of the model's dataclasses set."""
    return Exchange(
        id="e1",
        session="s1",
        provider="openai",
        model="gpt-4o-mini",
        stream=True,
        tools_declared=[model.ToolSpec("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}})],
        tool_results=[model.ToolResult("call_1", "18 C", "get_weather", is_error=False)],
        messages=[model.Message("user", "Weather in Paris?"), model.Message("assistant", "")],
        request_headers={"x-stainless-retry-count": "0"},
        usage=model.Usage(input_tokens=605, output_tokens=4, cache_read_tokens=0),
        cost=model.Cost(9.3e-05, 9.0e-05, 2.4e-06, "USD", "gpt-4o-mini", "openai"),
        tool_calls=[model.ToolCall("get_weather", '{"city": "Paris"}', "call_1", 0)],
        faults=[model.FaultRecord("bad-args", "malformed_json", {"target": "tool_arguments", "n": [1, 2]}, 1.5)],
        faults_skipped=[model.FaultRecord("late", "truncate", {"skipped": "buffered"}, 2.0)],
        timings=model.Timings(start=1.0, first_upstream_byte=1.1, first_client_byte=1.2, end=1.5),
        realtime=model.RealtimeInfo("sess_1", kind="session", generations=2, close_code=1000),
        finish_reasons=["tool_calls"],
        notes={"jsonrpc_id": 7, "server_notifications": ["notifications/tools/list_changed"]},
    )


def test_an_exchange_crosses_as_marshal_and_comes_back_equal() -> None:
    data = exchange_frame(_full())
    assert data[4:5] == b"M"
    (message,) = Frames().feed(data)
    assert message == ("x", _full())
    assert message[1].messages[0] == model.Message("user", "Weather in Paris?")  # the classes, not tuples


def test_every_field_holding_a_model_dataclass_is_encoded_as_one() -> None:
    classes = {cls for cls in vars(model).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)}
    hinted = typing.get_type_hints(Exchange)
    holding = {
        f.name for f in dataclasses.fields(Exchange) if any(cls in classes for cls in _classes_in(hinted[f.name]))
    }
    assert holding == set(analysis_frames._ONE) | set(analysis_frames._MANY)


def _classes_in(hint: typing.Any) -> set[typing.Any]:
    return {hint} | {c for arg in typing.get_args(hint) for c in _classes_in(arg)}


def test_a_note_marshal_cannot_write_is_left_out_by_the_pickled_path() -> None:
    ex = dataclasses.replace(_full(), notes={"jsonrpc_id": 7, "lock": threading.Lock()})
    with pytest.raises(ValueError):
        exchange_frame(ex)
    (message,) = Frames().feed(frame(("x", portable(ex))))
    assert message[1].notes == {"jsonrpc_id": 7} and message[1].messages == ex.messages


def test_frames_read_in_any_pieces_come_out_whole_and_in_order() -> None:
    stream = frame(("config", {"version": 1})) + exchange_frame(_full()) + frame(("close", 3.0))
    frames = Frames()
    out = [m for i in range(len(stream)) for m in frames.feed(stream[i : i + 1])]
    assert out == [("config", {"version": 1}), ("x", _full()), ("close", 3.0)]


def test_a_broken_stream_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="broken"):
        Frames().feed(b"\0\0\0\x05Zhello")


def test_what_the_child_reports_of_a_failure_carries_no_credential() -> None:
    """The analysis process's failures reach the proxy's log: a config error names fields, not values."""
    token = "sk-proj-" + "A1b2C3d4" * 6
    with pytest.raises(pydantic.ValidationError) as err:
        BrownoutConfig.model_validate({"control": {"token": ["hunter2-bearer"]}})
    assert "hunter2-bearer" in str(err.value)  # pydantic's own message quotes the value
    assert "control.token" in _why(err.value) and "hunter2" not in _why(err.value)
    assert token not in _why(RuntimeError(f"upstream said no to {token}"))
    assert _why(RuntimeError("plain")) == "RuntimeError: plain"
