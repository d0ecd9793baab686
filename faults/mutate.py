"""mutate: change what the agent sends before the model sees it (request-side chaos)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field, model_validator

from brownout.faults import mutations
from brownout.faults.base import Fault, FaultContext, FaultParams
from brownout.faults.jsonedit import NOT_JSON, dumps, load

__all__ = ["MutateFault", "MutateParams"]

log = logging.getLogger(__name__)

Kind = Literal["typos", "inject", "drop", "duplicate", "reorder", "truncate_history"]

# The parameters each kind reads besides `type` and `kind`; any other one given is a config error.
_KIND_FIELDS: dict[str, frozenset[str]] = {
    "typos": frozenset({"rate"}),
    "inject": frozenset({"text", "position", "separator"}),
    "drop": frozenset({"roles"}),
    "duplicate": frozenset({"roles"}),
    "reorder": frozenset(),
    "truncate_history": frozenset({"count"}),
}


class MutateParams(FaultParams):
    """Parameters of the mutate fault: `kind` selects the mutation; each kind reads only its own fields."""

    type: Literal["mutate"]
    kind: Kind
    rate: float = Field(0.1, gt=0, le=1, description="typos: share of the words that get a typo.")
    text: str | None = Field(None, min_length=1, description="inject: the instruction to plant.")
    position: Literal["end", "start"] = Field("end", description="inject: after or before the tool result's text.")
    separator: str = Field("\n\n", description="inject: between the tool result's text and `text`.")
    roles: list[str] = Field(default_factory=list, description="drop/duplicate: only messages with these roles.")
    count: int = Field(1, ge=1, description="truncate_history: how many of the oldest messages to cut.")

    @model_validator(mode="after")
    def _fields_of_kind(self) -> MutateParams:
        stray = sorted(self.model_fields_set - _KIND_FIELDS[self.kind] - {"type", "kind"})
        if stray:
            raise ValueError(f"kind {self.kind}: {', '.join(stray)} does not apply (it reads only its own fields)")
        if self.kind == "inject" and self.text is None:
            raise ValueError("kind inject needs `text`: the instruction to plant")
        return self


class MutateFault(Fault):
    """Rewrites the request's conversation (typos, planted instruction, lost, repeated, reordered or cut messages)."""

    type = "mutate"
    Params = MutateParams
    params: MutateParams

    def describe(self) -> dict[str, Any]:
        p = self.params
        # Only the kind's own fields: a typos record listing inject's separator would mislead.
        return {"type": p.type, "kind": p.kind, **{k: getattr(p, k) for k in sorted(_KIND_FIELDS[p.kind])}}

    def edit_request(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        doc = load(body)
        history = ctx.wire.request_history(ctx.exchange, doc) if doc is not NOT_JSON else None
        if history is None:
            ctx.extra.update(mutated=False, reason=f"no conversation in this {ctx.exchange.provider} request")
            return body
        outcome = self._mutate(history, ctx)
        ctx.extra.update(outcome)
        if not outcome["mutated"]:
            log.info("mutate %s: %s in %s; request unchanged", self.params.kind, outcome["reason"], ctx.exchange.id)
            return body
        return dumps(doc, compact=True).encode()

    def _mutate(self, history: Any, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        if p.kind == "typos":
            return mutations.typos(history, ctx.rng, rate=p.rate)
        if p.kind == "inject":
            assert p.text is not None  # the validator requires it
            return mutations.inject(history, text=p.text, at_start=p.position == "start", separator=p.separator)
        if p.kind == "drop":
            return mutations.drop(history, ctx.rng, roles=p.roles)
        if p.kind == "duplicate":
            return mutations.duplicate(history, ctx.rng, roles=p.roles)
        if p.kind == "reorder":
            return mutations.reorder(history, ctx.rng)
        return mutations.truncate_history(history, count=p.count)
