"""invariants/schemas.py: one compiled validator per distinct schema content, bounded, never keyed by identity."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from brownout.invariants import schemas
from brownout.invariants.schemas import ValidatorCache, first_error
from tests.invariants.builders import Harness, llm, weather_tool

CITY: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
QUERY: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every schema the cache compiles (checks against its metaschema), in order."""
    seen: list[dict[str, Any]] = []
    real = schemas.compile_schema

    def counting(schema: dict[str, Any]) -> Any:
        seen.append(schema)
        return real(schema)

    monkeypatch.setattr(schemas, "compile_schema", counting)
    return seen


def test_equal_content_compiles_once_whatever_the_object_or_key_order(compiles: list[dict[str, Any]]) -> None:
    cache = ValidatorCache()
    first = cache.get(CITY)
    reordered = {"required": ["city"], "properties": {"city": {"type": "string"}}, "type": "object"}
    assert cache.get(copy.deepcopy(CITY)) is first
    assert cache.get(reordered) is first
    assert len(compiles) == 1 and len(cache) == 1


def test_changed_content_gets_its_own_validator(compiles: list[dict[str, Any]]) -> None:
    cache = ValidatorCache()
    assert first_error(cache.get(CITY), {"q": "x"}) is not None
    assert first_error(cache.get(QUERY), {"q": "x"}) is None  # not the CITY validator again
    # A value that compares equal in Python but not in JSON (1 == True) is another schema.
    assert cache.get({"maximum": 1}) is not cache.get({"maximum": True})
    assert len(compiles) == 4


def test_the_schema_compiled_first_goes_first_past_the_bound(compiles: list[dict[str, Any]]) -> None:
    cache = ValidatorCache(max_entries=2)
    cache.get(CITY)
    cache.get(QUERY)
    cache.get(CITY)  # a hit: compiled once
    assert len(compiles) == 2
    cache.get({"type": "object"})  # CITY, compiled first, makes room
    assert len(cache) == 2
    cache.get(QUERY)
    assert len(compiles) == 3  # QUERY still cached
    cache.get(CITY)
    assert len(compiles) == 4  # CITY was evicted and compiled again
    with pytest.raises(ValueError, match="max_entries"):
        ValidatorCache(max_entries=0)


def test_an_invalid_schema_is_none_and_remembered(compiles: list[dict[str, Any]]) -> None:
    cache = ValidatorCache()
    assert cache.get({"type": "no-such-type"}) is None
    assert cache.get({"type": "no-such-type"}) is None
    assert len(compiles) == 1


def test_first_error_names_keyword_and_path() -> None:
    validator = ValidatorCache().get(weather_tool().schema or {})
    assert first_error(validator, {"city": "Oslo"}) is None
    keyword, path, message = first_error(validator, {"city": "Oslo", "days": 0}) or ("", "", "")
    assert (keyword, path) == ("minimum", "$.days") and "0" in message


def test_redeclared_schema_applies_and_sessions_share_compiled_validators(compiles: list[dict[str, Any]]) -> None:
    h = Harness([{"type": "tool_arguments_json", "schema": True}])
    tool = weather_tool()
    # Every request repeats its declarations: parsed anew, equal content, compiled once for all sessions.
    for t, session in enumerate(("a", "b", "a", "c")):
        again = type(tool)(tool.name, copy.deepcopy(tool.schema))
        assert h.run(llm(t, session=session, tools=[again], calls=[("get_weather", '{"city": "Oslo"}')])) == []
    assert len(compiles) == 1
    # The agent changes the tool's schema: calls are held to the new one, not the cached old one.
    changed = type(tool)(tool.name, QUERY)
    (v,) = h.run(llm(9, session="a", tools=[changed], calls=[("get_weather", '{"city": "Oslo"}')]))
    assert "'q' is a required property" in v.message
    assert h.run(llm(10, session="a", tools=[changed], calls=[("get_weather", '{"q": "rain"}')])) == []
