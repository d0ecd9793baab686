"""invariants/schemas.py's fast path: jsonschema-rs passes valid calls, python-jsonschema judges the rest.

The contract: `first_error` says exactly what python-jsonschema alone says, for any value, and never
makes brownout fetch a URL a declared schema names.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brownout.invariants.schemas import Compiled, ValidatorCache, first_error
from tests.threadserver import serving_handler

# Shapes tool declarations take in the wild: nested objects, arrays, enums, patterns, bounds, unions, $defs.
SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["city"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 20, "pattern": "^[a-z ]+$"},
            "filters": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "uniqueItems": True},
            "limit": {"type": ["integer", "null"], "exclusiveMinimum": 0, "multipleOf": 5},
        },
        "required": ["query"],
    },
    {
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
        "type": "object",
        "properties": {"at": {"$ref": "#/$defs/point"}, "mode": {"anyOf": [{"const": 1}, {"type": "boolean"}]}},
        "dependentRequired": {"at": ["mode"]},
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email"}, "n": {"type": "number", "maximum": 1.5}},
        "additionalProperties": {"type": "integer"},
    },
]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=25),
    st.sampled_from(["a", "b", "c", "oslo", "Oslo", "x y", "a@b.example", 1, 5, 10, 1.5, 0, True]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["city", "days", "query", "filters", "limit", "at", "mode", "x", "y", "email", "n", "z"]),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=12,
)


# Values close to each schema: mostly of the declared types, so many pass it and many fail it by one keyword.
_numbers = st.one_of(st.integers(min_value=-3, max_value=20), st.sampled_from([0.0, 1.5, 1.4999, 5.0, 10.0, 2**64]))
_NEAR = [
    st.fixed_dictionaries({"city": st.text(max_size=8)}, optional={"days": st.integers(min_value=0, max_value=15)}),
    st.fixed_dictionaries(
        {"query": st.text(alphabet="ab xyzA\n", max_size=22)},
        optional={
            "filters": st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3),
            "limit": st.one_of(st.none(), st.sampled_from([5, 10, 15, 0, 7, 10.0, True])),
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "at": st.fixed_dictionaries({}, optional={"x": _numbers, "y": st.one_of(_numbers, st.text(max_size=2))}),
            "mode": st.sampled_from([1, 1.0, True, False, "1"]),
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={"email": st.sampled_from(["a@b.example", "nope"]), "n": _numbers, "extra": _numbers},
    ),
]


def _full_only(compiled: Compiled) -> Compiled:
    return Compiled(compiled.full, None)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_every_declared_shape_gets_the_fast_validator(index: int) -> None:
    compiled = ValidatorCache().get(SCHEMAS[index])
    assert compiled is not None and compiled.fast is not None


@settings(max_examples=300, deadline=None)
@given(data=st.data(), index=st.integers(min_value=0, max_value=len(SCHEMAS) - 1))
def test_the_fast_path_says_what_python_jsonschema_alone_says(data: st.DataObject, index: int) -> None:
    compiled = ValidatorCache().get(SCHEMAS[index])
    assert compiled is not None
    value = data.draw(st.one_of(_NEAR[index], _values))
    assert first_error(compiled, value) == first_error(_full_only(compiled), value)


def test_known_edge_values_agree() -> None:
    compiled = ValidatorCache().get(SCHEMAS[1])
    assert compiled is not None
    for value in (
        {"query": "abc\n"},  # python's `$` matches before a final newline; the fast regex does not
        {"query": "ok", "limit": 10.0},
        {"query": "ok", "limit": True},  # a boolean is no integer, in either
        {"query": "ok", "filters": ["a", "a"]},
        {"query": "ok", "limit": 2**80},  # past 64 bits
    ):
        assert first_error(compiled, value) == first_error(_full_only(compiled), value), value


def test_a_schema_naming_a_url_is_checked_without_fetching_it() -> None:
    fetched: list[str] = []

    class SchemaServer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # what a fetch would get: a schema that any value passes
            fetched.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/schema+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    with serving_handler(SchemaServer) as url:
        schema = {
            "type": "object",
            "properties": {"a": {"$ref": f"{url}/schema.json"}, "b": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {"type": "integer"}},
        }
        compiled = ValidatorCache().get(schema)
        assert compiled is not None and compiled.fast is None  # jsonschema-rs cannot take it offline
        # A reference inside the schema still resolves: "b" is held to the integer of its $defs.
        assert (first_error(compiled, {"b": "x"}) or ())[:2] == ("type", "$.b")
        assert first_error(compiled, {"b": 1}) is None
        # A call whose check needs the other document is not judged, and nothing is fetched.
        assert first_error(compiled, {"a": 1}) is None
        assert first_error(compiled, {"a": 1, "b": "x"}) is None
    assert fetched == []
