"""Prometheus' HTTP API, as the staging runner asks it: instant queries and range queries, over httpx.

The runner talks to Prometheus directly, whatever HTTP(S)_PROXY says (an agent's shell often points
it at brownout). Every failure, HTTP or PromQL, is one `PromError` whose message names the query.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from brownout.proxy.experiment.staging.config import PrometheusSource

__all__ = ["PromError", "Prometheus", "Sample", "Series"]

log = logging.getLogger(__name__)


class PromError(Exception):
    """Prometheus did not answer a query, or refused it; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One element of an instant vector: its labels and value (None for NaN or infinity)."""

    labels: dict[str, str]
    value: float | None


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a range query: its labels and (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float | None]]


def _number(raw: Any) -> float | None:
    value = float(raw)
    return value if math.isfinite(value) else None


class Prometheus:
    """Queries one Prometheus (an async client: open it with `async with`)."""

    def __init__(
        self,
        source: PrometheusSource,
        *,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        headers = {}
        if source.token_env:
            token = env.get(source.token_env)
            if not token:
                raise PromError(f"prometheus.token_env: {source.token_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
        self.url = source.url
        self.http = httpx.AsyncClient(
            base_url=source.url, headers=headers, timeout=source.timeout_s, trust_env=False, transport=transport
        )

    async def __aenter__(self) -> Prometheus:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def _data(self, path: str, query: str, params: dict[str, str]) -> dict[str, Any]:
        try:
            response = await self.http.post(path, data={"query": query, **params})
            body = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise PromError(f"{self.url}: no answer to {query!r}: {type(e).__name__}: {e}") from e
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            kind = body.get("errorType") if isinstance(body, dict) else None
            raise PromError(f"{query!r}: {kind or f'HTTP {response.status_code}'}: {error or response.text[:200]}")
        data = body.get("data")
        if not isinstance(data, dict):
            raise PromError(f"{query!r}: Prometheus answered without data")
        return data

    async def query(self, query: str, at: float | None = None) -> list[Sample]:
        """An instant query (at `at`, unix time, or now); a scalar is one sample without labels."""
        params = {} if at is None else {"time": f"{at:.3f}"}
        data = await self._data("/api/v1/query", query, params)
        kind, result = data.get("resultType"), data.get("result") or []
        if kind == "scalar":
            return [Sample({}, _number(result[1]))]
        if kind != "vector":
            raise PromError(f"{query!r} returns a {kind}, not an instant vector or a scalar")
        return [Sample(dict(r.get("metric", {})), _number(r["value"][1])) for r in result]

    async def query_range(self, query: str, start: float, end: float, step_s: float) -> list[Series]:
        """A range query from `start` to `end` (unix times) every `step_s`."""
        params = {"start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        data = await self._data("/api/v1/query_range", query, params)
        if data.get("resultType") != "matrix":
            raise PromError(f"{query!r}: a range query answered a {data.get('resultType')}")
        return [
            Series(dict(r.get("metric", {})), [(float(t), _number(v)) for t, v in r.get("values", [])])
            for r in data.get("result", [])
        ]
