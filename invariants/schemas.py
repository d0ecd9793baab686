"""Compiled JSON Schema validators for declared tools, built once per distinct schema.

Agents repeat their tool declarations in every request, so the same schemas arrive parsed anew
thousands of times. Checking a schema against its metaschema costs far more than validating a
call's arguments with it; the cache makes that cost once per distinct schema text, shared by every
session. The key is the schema's canonical JSON (sorted keys): equal content, one validator; a
changed schema, a new one. Never an object's id, which a later, different schema can reuse.

Each schema is compiled twice: by jsonschema-rs, which answers "valid?" in a fraction of the time,
and by python-jsonschema, which says what is wrong and stays the judge of every call the fast one
does not pass. A call the fast validator passes is valid (`bench/schemas.py` measures both side by
side); a schema it cannot compile is checked by python-jsonschema alone.

Neither ever fetches a document a schema's `$ref` names: a declared schema comes from traffic, so a
fetch would let any agent or MCP server make brownout open connections (to a cloud metadata address,
say) and hold up the event loop while it waits. References inside the schema resolve as usual; a call
whose check needs another document is not judged by the schema.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

__all__ = [
    "SCHEMAS_MAX",
    "Compiled",
    "ValidatorCache",
    "compile_schema",
    "first_error",
    "first_problem",
    "outside_refs",
]

logger = logging.getLogger(__name__)

SCHEMAS_MAX = 1024  # distinct schemas kept compiled; the first compiled go first
_MISSING = object()
# Keywords whose messages name schema properties, never argument values (the others may quote a value).
_NAMES_ONLY = frozenset({"required", "additionalProperties", "dependentRequired"})


def _refuse(uri: str) -> Any:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy reads without its __init__


# Immutable: each validator crawls into its own copy. (An attrs class mypy reads without its __init__.)
_OFFLINE: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


def outside_refs(schema: Any) -> list[str]:
    """The `$ref`s (and `$dynamicRef`s) that name a document other than the schema itself: neither a
    fragment (`#/$defs/x`) nor an `$id` the schema gives one of its parts."""
    refs: list[str] = []
    ids: set[str] = {""}  # a bare fragment is the schema itself
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    refs.append(value)
                elif key == "$id" and isinstance(value, str):
                    ids.add(value.partition("#")[0])
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return [ref for ref in refs if ref.partition("#")[0] not in ids]


@dataclass(frozen=True, slots=True)
class Compiled:
    """One schema's validators: `fast` (jsonschema-rs, None when it cannot compile the schema) passes valid
    values; `full` (python-jsonschema) judges the rest and says what is wrong."""

    full: Any
    fast: Any | None


class ValidatorCache:
    """Bounded map of schema text -> compiled validator (None for a schema that is not valid JSON Schema);
    past the bound, the schema compiled longest ago goes first."""

    def __init__(self, max_entries: int = SCHEMAS_MAX) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._validators: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self._validators)

    def get(self, schema: dict[str, Any]) -> Compiled | None:
        """The validator for `schema`, compiled on first sight of its content; None when the schema is invalid."""
        try:
            key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):  # not JSON data (no wire schema is): compile it, keep nothing
            return compile_schema(schema)
        validator = self._validators.get(key, _MISSING)
        if validator is not _MISSING:
            return validator
        validator = self._validators[key] = compile_schema(schema)
        if len(self._validators) > self.max_entries:
            del self._validators[next(iter(self._validators))]
        return validator


def compile_schema(schema: dict[str, Any]) -> Compiled | None:
    """Both validators of one schema (uncached), or None when it is not valid JSON Schema."""
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except schema_errors.SchemaError:
        logger.debug("a declared tool schema is not valid JSON Schema; skipping schema validation")
        return None
    try:
        # offline: a declared schema never makes brownout fetch a URL (jsonschema-rs would, by default);
        # no format assertions, as python-jsonschema without a format checker.
        fast = jsonschema_rs.validator_for(schema, offline=True, validate_formats=False)
    except Exception:  # noqa: BLE001 - a schema jsonschema-rs cannot take (a regex dialect, a remote $ref)
        logger.debug("jsonschema-rs cannot compile a declared tool schema; python-jsonschema alone checks it")
        fast = None
    return Compiled(cls(schema, registry=_OFFLINE), fast)


def first_error(validator: Compiled, value: Any) -> tuple[str, str, str] | None:
    """The most relevant error of `value` against the validator: (keyword, JSON path, message), or None."""
    if validator.fast is not None and _passes(validator.fast, value):
        return None
    try:
        error = schema_errors.best_match(validator.full.iter_errors(value))
    except Unresolvable:
        logger.debug("a declared tool schema refers to a document brownout does not fetch; call not judged")
        return None
    if error is None:
        return None
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return str(error.validator), path, error.message


def first_problem(validator: Compiled, value: Any) -> tuple[str, str] | None:
    """The most relevant error as (what failed, JSON path), in words that never quote an argument value:
    the message for keywords that only name properties, else "`keyword` failed"."""
    error = first_error(validator, value)
    if error is None:
        return None
    keyword, path, message = error
    return (message if keyword in _NAMES_ONLY else f"`{keyword}` failed"), path


def _passes(fast: Any, value: Any) -> bool:
    try:
        return bool(fast.is_valid(value))
    except Exception:  # noqa: BLE001 - a value it cannot take (an int past 64 bits): the full validator judges
        return False
