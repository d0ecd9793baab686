"""Argument shapes: the structure of tool arguments with type names, never a value."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from brownout.core.shapes import CAPPED, INVALID, arguments_shape, json_shape, query_shape


def test_values_become_type_names() -> None:
    args = {"city": "Paris", "days": 3, "metric": True, "ratio": 0.5, "note": None, "tags": ["a", "b"]}
    assert json_shape(args) == {
        "city": "string",
        "days": "integer",
        "metric": "boolean",
        "ratio": "number",
        "note": "null",
        "tags": ["string"],
    }


def test_nested_objects_and_mixed_lists() -> None:
    shape = arguments_shape('{"to": {"name": "Ann", "ids": [1, "x", 2]}, "items": [{"a": 1}, {"a": 2}, {"b": "c"}]}')
    assert shape == {
        "items": [{"a": "integer"}, {"b": "string"}],
        "to": {"ids": ["integer", "string"], "name": "string"},
    }


def test_keys_that_are_data_fold_into_one() -> None:
    # An e-mail address or a phone number used as a key is data, not structure.
    shape = json_shape({"alice@example.com": 1, "+33 6 12 34 56 78": 2, "4111111111111111": 3, "limit": 4})
    assert shape == {"*": "integer", "limit": "integer"}
    assert json_shape({"bob@example.org": "x", "carol@example.org": 1}) == {"*": "any"}


def test_broken_capped_and_empty_arguments() -> None:
    assert arguments_shape('{"city": "Par') == INVALID
    assert arguments_shape('{"city": "Paris"}', capped=True) == CAPPED
    assert arguments_shape("") == {}


def test_bounded_depth_and_width() -> None:
    deep: dict[str, object] = {"v": "secret-value"}
    for _ in range(20):
        deep = {"n": deep}
    text = json.dumps(json_shape(deep))
    assert text.count("{") <= 7 and "secret" not in text
    wide = json_shape({f"k{i}": i for i in range(500)})
    assert len(wide) <= 41 and wide["..."] == "460 more keys"


def test_query_parameters_are_names_only() -> None:
    assert query_shape("city=Paris&units=metric&email=a%40b.c") == {
        "city": "string",
        "email": "string",
        "units": "string",
    }
    assert query_shape("") == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(min_size=3),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


TYPE_NAMES = {"string", "integer", "number", "boolean", "null", "any", "object", "array"}


@given(json_values)
def test_every_leaf_is_a_type_name(value: object) -> None:
    """Whatever the arguments hold, a shape's leaves are type names, and its keys are the value's own."""
    shape = json_shape(value)
    assert all(leaf in TYPE_NAMES or leaf.endswith(" more keys") for leaf in _leaves(shape))
    assert _keys(shape) <= _keys(value) | {"*", "..."}


def _leaves(shape: object) -> list[str]:
    if isinstance(shape, list):
        return [leaf for s in shape for leaf in _leaves(s)]
    if isinstance(shape, dict):
        return [leaf for s in shape.values() for leaf in _leaves(s)]
    assert isinstance(shape, str)
    return [shape]


def _keys(value: object) -> set[str]:
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    return set()
