"""ExchangeSummary.light(): the session history's copy, without the large text and declared tools."""

from __future__ import annotations

import dataclasses

from brownout.invariants.summary import ExchangeSummary, ToolCallView
from tests.invariants.test_state_codecs import _full_summary

_LONG = '{"query": "' + "x" * 400 + '"}'


def _reference(summary: ExchangeSummary) -> ExchangeSummary:
    """What light() keeps, spelled out field by field."""
    cut = [dataclasses.replace(c, arguments=c.arguments[:256]) for c in summary.requested_calls]
    executed = summary.executed_call
    return dataclasses.replace(
        summary,
        messages=(),
        tool_results=(),
        request_body="",
        output_text="",
        tools_declared=(),
        requested_calls=tuple(cut),
        executed_call=None if executed is None else dataclasses.replace(executed, arguments=executed.arguments[:256]),
    )


def test_light_keeps_every_other_field_and_cuts_long_arguments() -> None:
    full = _full_summary()
    long_call = ToolCallView("search_docs", _LONG, "c2", from_object=True)
    summary = dataclasses.replace(
        full, requested_calls=(*full.requested_calls, long_call), request_body="{...}", executed_call=long_call
    )
    light = summary.light()
    assert light == _reference(summary)
    assert light.requested_calls[1].arguments == _LONG[:256] and light.executed_call.arguments == _LONG[:256]
    assert dataclasses.replace(summary, executed_call=None).light().executed_call is None


def test_light_shares_short_tool_calls_instead_of_copying_them() -> None:
    summary = _full_summary()
    light = summary.light()
    assert light.requested_calls[0] is summary.requested_calls[0]  # frozen: the history may share it
    assert light.executed_call is summary.executed_call
