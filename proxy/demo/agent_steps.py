"""Step bookkeeping for the demo agent: what each call did, how long, how many HTTP attempts."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["AgentSummary", "StepRecord", "StepRecorder"]

log = logging.getLogger(__name__)


@dataclass
class StepRecord:
    """One agent step (an SDK call or a tool call) and how it ended."""

    api: str  # openai.chat, anthropic.messages, tool
    name: str
    stream: bool = False
    ok: bool = True
    status: int | None = None
    attempts: int = 0  # HTTP requests sent, SDK retries included
    duration_ms: float = 0.0
    ttfc_ms: float | None = None  # time to first streamed chunk
    error: str | None = None  # "ExceptionType: message" when the step failed
    error_type: str | None = None
    answer: str | None = None
    _t0: float = field(default=0.0, repr=False)

    def mark_first_chunk(self) -> None:
        if self.ttfc_ms is None:
            self.ttfc_ms = (time.perf_counter() - self._t0) * 1000


@dataclass
class AgentSummary:
    """What the agent run did: every step, errors caught, and its final answer."""

    steps: list[StepRecord]
    final_answer: str | None
    summary_text: str | None
    elapsed_s: float

    @property
    def calls_made(self) -> int:
        return len(self.steps)

    @property
    def errors(self) -> int:
        return sum(not s.ok for s in self.steps)

    @property
    def http_attempts(self) -> int:
        return sum(s.attempts for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        steps = []
        for s in self.steps:
            d = asdict(s)
            d.pop("_t0", None)
            d["duration_ms"] = round(s.duration_ms, 1)
            d["ttfc_ms"] = None if s.ttfc_ms is None else round(s.ttfc_ms, 1)
            steps.append(d)
        return {
            "calls_made": self.calls_made,
            "errors": self.errors,
            "http_attempts": self.http_attempts,
            "final_answer": self.final_answer,
            "summary_text": self.summary_text,
            "elapsed_s": round(self.elapsed_s, 3),
            "steps": steps,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentSummary:
        steps = [StepRecord(**s) for s in data.get("steps", [])]
        return cls(steps, data.get("final_answer"), data.get("summary_text"), float(data.get("elapsed_s", 0)))


class StepRecorder:
    """Opens steps, counts their HTTP attempts, and turns exceptions into recorded errors."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self._current: StepRecord | None = None

    def on_http_request(self, request: Any) -> None:
        """An httpx event hook: every attempt (retries too) lands on the open step."""
        if self._current is not None:
            self._current.attempts += 1

    @contextmanager
    def step(self, api: str, name: str, *, stream: bool = False) -> Iterator[Any]:
        """Run one step; any exception is recorded on it and swallowed so the agent goes on."""
        rec = StepRecord(api=api, name=name, stream=stream, _t0=time.perf_counter())
        self.steps.append(rec)
        self._current = rec
        handle = _StepHandle(rec)
        try:
            yield handle
        except Exception as e:  # noqa: BLE001 - the demo agent's point: survive and report any failure
            rec.ok = False
            rec.error_type = f"{type(e).__module__.split('.')[0]}.{type(e).__name__}"
            rec.error = f"{type(e).__name__}: {str(e)[:300]}"
            rec.status = getattr(e, "status_code", rec.status if rec.status != 200 else None)
            log.info("agent step %s failed: %s", name, rec.error)
        finally:
            rec.duration_ms = (time.perf_counter() - rec._t0) * 1000
            self._current = None

    def summary(self, *, final_answer: str | None, summary_text: str | None, elapsed_s: float) -> AgentSummary:
        return AgentSummary(list(self.steps), final_answer, summary_text, elapsed_s)


class _StepHandle:
    """What the agent holds inside a step: status, first-chunk mark, answer, error."""

    __slots__ = ("_rec",)

    def __init__(self, rec: StepRecord) -> None:
        self._rec = rec

    @property
    def status(self) -> int | None:
        return self._rec.status

    @status.setter
    def status(self, value: int | None) -> None:
        self._rec.status = value

    @property
    def error(self) -> str | None:
        return self._rec.error

    def mark_first_chunk(self) -> None:
        self._rec.mark_first_chunk()

    def answer(self, text: str) -> str:
        self._rec.answer = text
        return text
