"""One control API for a fleet of workers: the supervisor's, which passes each call to every worker's own.

Each worker keeps its control API (on a free loopback port, the same token); the supervisor serves
the configured `control.listen` with this target behind the usual ControlServer (token, limits,
errors), and forwards: pause, resume, reload and rule toggles go to every worker and succeed when
each one did; /violations and /exchanges are every worker's, merged by time, each record naming its
`worker`; /status lists the workers (pid, restarts, exchanges served, each one's own status).

Forwarding, rather than writing switches into the shared store, acts on every local worker at once
and needs nothing the workers do not already have. Where the store holds the fleet's switches too,
a forwarded call also writes them there (each worker's API does), which reaches other replicas; the
two never disagree, since both carry the same call. The supervisor remembers the kill switch, so a
worker started after a pause (a restart) starts paused (the `brownout_paused` option).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import httpx

from brownout.proxy.workers.supervisor import WorkerState

__all__ = ["FleetControl", "FleetError"]

log = logging.getLogger(__name__)

Answer = tuple[int, Any] | Exception  # (HTTP status, JSON body), or why there is none


class FleetError(RuntimeError):
    """A call some workers did not carry out; the message names them."""


def _failure(answer: Answer, ok: Sequence[int] = (200,)) -> str | None:
    if isinstance(answer, Exception):
        return f"unreachable ({type(answer).__name__}: {answer})"
    status, body = answer
    if status in ok:
        return None
    error = body.get("error") or body.get("message") if isinstance(body, dict) else body
    return f"HTTP {status}: {error}"


class FleetControl:
    """A ControlTarget (proxy/control.py) over the workers' own control APIs."""

    def __init__(
        self,
        workers: Callable[[], Sequence[WorkerState]],
        *,
        token: str | None,
        exchanges: Callable[[WorkerState], int | None] = lambda w: None,
        timeout_s: float = 5.0,
        max_workers: int = 8,
    ) -> None:
        self.workers = workers
        self._exchanges = exchanges
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # trust_env=False: a HTTP_PROXY in the environment must not carry calls meant for loopback.
        self._http = httpx.Client(timeout=timeout_s, trust_env=False, headers=headers)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="brownout-fleet-control")
        self.paused = False  # the fleet's kill switch as last set through this API

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    # --- fan-out ----------------------------------------------------------------------------

    def _ask(self, worker: WorkerState, method: str, path: str, body: Any = None) -> Answer:
        try:
            response = self._http.request(method, f"{worker.control_url}{path}", json=body)
        except httpx.HTTPError as e:
            return e
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text

    def _each(self, method: str, path: str, body: Any = None) -> list[tuple[WorkerState, Answer]]:
        live = [w for w in self.workers() if w.alive and w.control_url]
        answers = self._pool.map(lambda w: self._ask(w, method, path, body), live)
        return list(zip(live, answers, strict=True))

    def _all(self, method: str, path: str, body: Any = None, ok: Sequence[int] = (200,)) -> None:
        failed = [
            f"worker {w.index}: {why}"
            for w, a in self._each(method, path, body)
            if (why := _failure(a, ok)) is not None
        ]
        if failed:
            raise FleetError(f"{method} {path} failed on {len(failed)} worker(s): " + "; ".join(failed))

    # --- the ControlTarget ------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        answers = {w.index: a for w, a in self._each("GET", "/status")}
        workers, paused = [], []
        for w in self.workers():
            entry: dict[str, Any] = {
                "worker": w.index,
                "pid": w.pid,
                "alive": w.alive,
                "restarts": w.restarts,
                "exchanges": self._exchanges(w) if w.alive else None,
                "metrics_url": w.metrics_url,
                "control_url": w.control_url,
            }
            answer = answers.get(w.index)
            if answer is not None:
                if (why := _failure(answer)) is not None:
                    entry["error"] = why
                else:
                    assert not isinstance(answer, Exception)
                    entry["status"] = answer[1]
                    paused.append(bool(answer[1].get("paused")))
            workers.append(entry)
        return {
            "workers": workers,
            "workers_alive": sum(w["alive"] for w in workers),
            # Paused when every worker that answered is: one injecting worker means chaos is on.
            "paused": all(paused) if paused else self.paused,
        }

    def pause(self) -> None:
        self.paused = True  # first: a worker starting now starts paused (see the module docstring)
        self._all("POST", "/faults/pause")

    def resume(self) -> None:
        self.paused = False
        self._all("POST", "/faults/resume")

    def sync(self, worker: WorkerState, paused_at_start: bool) -> None:
        """Tell a worker that just started about a pause or resume that came after its start-up options."""
        if self.paused != paused_at_start:
            why = _failure(self._ask(worker, "POST", "/faults/pause" if self.paused else "/faults/resume"))
            if why is not None:
                switch = "pause" if self.paused else "resume"
                log.error("worker %d missed the fleet's %s: %s", worker.index, switch, why)

    def reload(self) -> tuple[bool, str]:
        results = []
        ok = True
        for w, answer in self._each("POST", "/reload"):
            why = _failure(answer, ok=(200, 422))
            if why is None and not isinstance(answer, Exception):
                ok = ok and answer[0] == 200
                results.append(f"worker {w.index}: {answer[1].get('message')}")
            else:
                ok = False
                results.append(f"worker {w.index}: {why}")
        return ok, "; ".join(results) or "no worker is running"

    def set_rule_enabled(self, name: str, enabled: bool) -> bool:
        answers = self._each("PUT", f"/rules/{quote(name, safe='')}", {"enabled": enabled})
        if any(not isinstance(a, Exception) and a[0] == 404 for _, a in answers):
            return False  # one config, so an unknown rule is unknown to every worker
        failed = [f"worker {w.index}: {why}" for w, a in answers if (why := _failure(a)) is not None]
        if failed:
            raise FleetError(f"rule {name}: " + "; ".join(failed))
        return True

    def violations(self, since: float | None) -> list[dict[str, Any]]:
        return self._merged("/violations", "violations", {} if since is None else {"since": since})

    def exchanges(self, since: float | None, limit: int | None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {} if since is None else {"since": since}
        if limit is not None:
            params["limit"] = limit
        records = self._merged("/exchanges", "exchanges", params)
        return records[-limit:] if limit else records

    def _merged(self, path: str, key: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        query = str(httpx.QueryParams(params))
        records: list[dict[str, Any]] = []
        for w, answer in self._each("GET", f"{path}?{query}" if query else path):
            if (why := _failure(answer)) is not None or isinstance(answer, Exception):
                raise FleetError(f"GET {path}: worker {w.index}: {why}")
            records.extend({**r, "worker": w.index} for r in answer[1].get(key, []))
        records.sort(key=lambda r: float(r.get("timestamp") or 0.0))
        return records
