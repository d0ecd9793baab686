"""Compiled JSON Schema validators for declared tools, built once per distinct schema.

Agents repeat their tool declarations in every request, so the same schemas arrive parsed anew
thousands of times. Checking a schema against its metaschema costs far more than validating a
call's arguments with it; the cache makes that cost once per distinct schema text, shared by every
session. The key is the schema's canonical JSON (sorted keys): equal content, one validator; a
changed schema, a new one. Never an object's id, which a later, different schema can reuse.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

__all__ = ["SCHEMAS_MAX", "ValidatorCache", "first_error"]

logger = logging.getLogger(__name__)

SCHEMAS_MAX = 1024  # distinct schemas kept compiled; the first compiled go first
_MISSING = object()


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

    def get(self, schema: dict[str, Any]) -> Any:
        """The validator for `schema`, compiled on first sight of its content; None when the schema is invalid."""
        try:
            key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):  # not JSON data (no wire schema is): compile it, keep nothing
            return _compile(schema)
        validator = self._validators.get(key, _MISSING)
        if validator is not _MISSING:
            return validator
        validator = self._validators[key] = _compile(schema)
        if len(self._validators) > self.max_entries:
            del self._validators[next(iter(self._validators))]
        return validator


def _compile(schema: dict[str, Any]) -> Any:
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except schema_errors.SchemaError:
        logger.debug("a declared tool schema is not valid JSON Schema; skipping schema validation")
        return None
    return cls(schema)


def first_error(validator: Any, value: Any) -> tuple[str, str, str] | None:
    """The most relevant error of `value` against the validator: (keyword, JSON path, message), or None."""
    error = schema_errors.best_match(validator.iter_errors(value))
    if error is None:
        return None
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return str(error.validator), path, error.message
