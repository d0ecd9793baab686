"""A test-only brownout plugin whose work takes a while without using the CPU (it sleeps).

While it sleeps, another client on the same proxy must keep getting answers: a sleep on the
event loop would hold every exchange up; one in a worker thread holds up nobody.

- `slow_edit_plugin`: fault type `slow_edit`, whose `edit_body` sleeps `seconds` and appends the
  name of the thread it ran on to EDIT_THREADS; with `phase: request` it does so to the request.
- `slow_load_plugin`: the same fault, but reading the plugin's `faults` (as every config load and
  hot reload does) takes LOAD_S.
- `slow_key_plugin`: wire format `slowkey`, claiming requests with an `x-slow-key` header, whose
  replay key takes KEY_S to work out: indexing a cassette of such requests for replay is slow. It
  appends the name of the thread it ran on to KEY_THREADS.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar, Literal

from brownout.core.wire.base import RequestInfo
from brownout.core.wire.generic import GenericFormat
from brownout.faults.base import Fault, FaultContext, FaultParams

__all__ = [
    "EDIT_THREADS",
    "KEY_S",
    "KEY_THREADS",
    "LOAD_S",
    "SLOW_KEY_HEADER",
    "SlowEditFault",
    "SlowKeyFormat",
    "slow_edit_plugin",
    "slow_key_plugin",
    "slow_load_plugin",
]

LOAD_S = 1.0
KEY_S = 0.5
SLOW_KEY_HEADER = "x-slow-key"
EDIT_THREADS: list[str] = []
KEY_THREADS: list[str] = []


class SlowEditParams(FaultParams):
    type: Literal["slow_edit"]
    seconds: float = 1.0
    phase: Literal["response", "request"] = "response"  # the body it "edits"


class SlowEditFault(Fault):
    """Takes `seconds` to "edit" the response body (returned unchanged) or, with `phase: request`, the
    request body (a space appended, so that it is re-encoded)."""

    type = "slow_edit"
    Params = SlowEditParams
    params: SlowEditParams

    def wants_body(self, ctx: FaultContext) -> bool:
        return self.params.phase == "response"

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        self._take_time()
        return body

    def edit_request(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        if self.params.phase != "request":
            return body
        self._take_time()
        return body + b" "

    def _take_time(self) -> None:
        EDIT_THREADS.append(threading.current_thread().name)
        time.sleep(self.params.seconds)


class _Plugin:
    faults: ClassVar[list[type[Fault]]] = [SlowEditFault]


class _SlowLoad:
    @property
    def faults(self) -> list[type[Fault]]:
        time.sleep(LOAD_S)
        return [SlowEditFault]


class SlowKeyFormat(GenericFormat):
    """A plain tool API whose replay key takes KEY_S to work out."""

    provider = "slowkey"  # type: ignore[assignment]

    def recognise(self, req: RequestInfo) -> str:  # type: ignore[override]
        return "execute_tool" if req.headers.get(SLOW_KEY_HEADER) else None  # type: ignore[return-value]

    def replay_key(self, req: RequestInfo) -> Any:
        KEY_THREADS.append(threading.current_thread().name)
        time.sleep(KEY_S)
        return super().replay_key(req)


class _SlowKey:
    wire_formats: ClassVar[list[GenericFormat]] = [SlowKeyFormat()]


slow_edit_plugin = _Plugin()
slow_key_plugin = _SlowKey()
slow_load_plugin = _SlowLoad()
