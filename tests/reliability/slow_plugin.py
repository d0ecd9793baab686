"""A test-only brownout plugin whose work takes a while without using the CPU (it sleeps).

While it sleeps, another client on the same proxy must keep getting answers: a sleep on the
event loop would hold every exchange up; one in a worker thread holds up nobody.

- `slow_edit_plugin`: fault type `slow_edit`, whose `edit_body` sleeps `seconds` and appends the
  name of the thread it ran on to EDIT_THREADS; `slow_request_edit` does the same to the request.
- `slow_load_plugin`: the same fault, but reading the plugin's `faults` (as every config load and
  hot reload does) takes LOAD_S.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar, Literal

from brownout.faults.base import Fault, FaultContext, FaultParams

__all__ = ["EDIT_THREADS", "LOAD_S", "SlowEditFault", "SlowRequestEditFault", "slow_edit_plugin", "slow_load_plugin"]

LOAD_S = 1.0
EDIT_THREADS: list[str] = []


class SlowEditParams(FaultParams):
    type: Literal["slow_edit"]
    seconds: float = 1.0


class SlowEditFault(Fault):
    """Needs the whole body and takes `seconds` to "edit" it (returning it unchanged)."""

    type = "slow_edit"
    Params = SlowEditParams

    def wants_body(self, ctx: FaultContext) -> bool:
        return True

    params: SlowEditParams

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        EDIT_THREADS.append(threading.current_thread().name)
        time.sleep(self.params.seconds)
        return body


class SlowRequestEditParams(FaultParams):
    type: Literal["slow_request_edit"]
    seconds: float = 1.0


class SlowRequestEditFault(Fault):
    """Takes `seconds` to "edit" the request body (appending a space, so the body is re-encoded)."""

    type = "slow_request_edit"
    Params = SlowRequestEditParams
    params: SlowRequestEditParams

    def edit_request(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        EDIT_THREADS.append(threading.current_thread().name)
        time.sleep(self.params.seconds)
        return body + b" "


class _Plugin:
    faults: ClassVar[list[type[Fault]]] = [SlowEditFault, SlowRequestEditFault]


class _SlowLoad:
    @property
    def faults(self) -> list[type[Fault]]:
        time.sleep(LOAD_S)
        return [SlowEditFault]


slow_edit_plugin = _Plugin()
slow_load_plugin = _SlowLoad()
