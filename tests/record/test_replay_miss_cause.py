"""A replay miss that follows a fault in the same session names the fault as a likely cause, and the exchange
log says which exchanges were answered from a cassette. The official openai SDK, a real proxy, the demo upstream."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from brownout.faults.decisions import Decision
from brownout.proxy.record.earlier import EarlierFaults
from tests.record.support import mock_upstream, player, recorder, wait_recorded

CUT = """
seed: 1
rules:
  - name: cut
    match: {provider: openai, stream: true}
    fault: {type: truncate, after_events: 2}
    schedule: {first: 1}
exporters:
  jsonl: {exchanges_path: EXCHANGES}
"""
CAUSE = "rule 'cut' (truncate) fired earlier in this session and may be why"


def conversation(client: Any) -> str:
    """A streamed answer, then a follow-up that carries it: what the agent sends second depends on the first."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Tell me about Paris."}]
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "And the weather?"}]
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content or ""


def _log_lines(path: Path, n: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    lines: list[dict[str, Any]] = []
    while len(lines) < n and time.monotonic() < deadline:
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        time.sleep(0.02)
    return lines


def test_a_miss_after_a_fault_names_it(
    brownout_proxy, openai_client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cassettes, exchanges = tmp_path / "cassettes", tmp_path / "exchanges.jsonl"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        assert conversation(openai_client(rec, up, session="agent-1"))
        wait_recorded(rec, 2)
        url = up.url
    play = player(brownout_proxy, cassettes, CUT.replace("EXCHANGES", str(exchanges)), speed=0)
    caplog.set_level(logging.WARNING, logger="brownout.proxy.record.tape")
    client = openai_client(play, url, session="agent-1")
    with pytest.raises(openai.NotFoundError) as err:
        conversation(client)  # the cut answer goes into the follow-up, which was never recorded
    assert "no recorded answer" in str(err.value) and CAUSE in str(err.value)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay miss")]
    assert CAUSE in line and "normalised request" in line
    first, second = _log_lines(exchanges, 2)
    assert (first["replayed"], first["faults"][0]["rule"]) == (True, "cut")
    assert (second["replayed"], second["status"]) == (False, 404)

    # Another session, never faulted, missing: nothing to blame.
    caplog.clear()
    with pytest.raises(openai.NotFoundError) as err:
        openai_client(play, url, session="agent-2").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "never recorded"}]
        )
    assert "no recorded answer" in str(err.value) and "fired earlier" not in str(err.value)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay miss")]
    assert "fired earlier" not in line


def _decision(exchange_id: str, outcome: str = "fired", session: str = "s", rule: str = "cut") -> Decision:
    return Decision(exchange_id, session, rule, outcome, "", 1, 0.0, fault="truncate")


def test_earlier_faults_skip_the_missing_exchange_its_own_and_those_that_did_not_apply() -> None:
    earlier = EarlierFaults()
    earlier(_decision("e1"))
    earlier(_decision("e2", rule="slow"))
    assert earlier.before("s", "e3").rule == "slow"  # type: ignore[union-attr]
    assert earlier.before("s", "e2").rule == "cut"  # type: ignore[union-attr]  # its own fault is not "earlier"
    earlier(_decision("e2", "skipped_not_applicable", rule="slow"))  # fired, then could not act
    assert earlier.before("s", "e3").rule == "cut"  # type: ignore[union-attr]
    earlier(_decision("e4", "skipped_probability"))
    assert earlier.before("s", "e5").exchange_id == "e1"  # type: ignore[union-attr]
    assert earlier.before("other", "e5") is None
