"""The normalised request body that record and replay match on: what decides the answer, nothing volatile.

Each wire format names the body fields that decide its provider's answer (`WireFormat.replay_fields`)
or overrides `WireFormat.replay_key`; this module holds the shared mechanics. A body that is not JSON
is matched on its SHA-256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from brownout.core.wire.jsonutil import loads

__all__ = ["VOLATILE_FIELDS", "normalised_body", "without"]

# Fields that change from call to call without changing the answer: end-user ids, tracing metadata,
# usage reporting switches, client-side request ids and timestamps.
VOLATILE_FIELDS = frozenset(
    {
        "user",
        "metadata",
        "stream_options",
        "request_id",
        "requestId",
        "idempotency_key",
        "timestamp",
        "created",
        "created_at",
        "prompt_cache_key",
        "safety_identifier",
        "store",
    }
)


def without(data: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A copy of `data` without `fields`, keys sorted (dict order must not change the key)."""
    drop = frozenset(fields)
    return {k: data[k] for k in sorted(data) if k not in drop}


def normalised_body(body: bytes, keep: frozenset[str] | None = None) -> Any:
    """The decoded JSON body reduced to `keep` (None: every field but the volatile ones), or a digest."""
    if not body or body.isspace():
        return None
    try:
        data = loads(body)
    except (ValueError, RecursionError):
        return {"sha256": hashlib.sha256(body).hexdigest()}
    if not isinstance(data, dict):
        return data
    if keep is None:
        return without(data, VOLATILE_FIELDS)
    return {k: data[k] for k in sorted(keep) if k in data}
