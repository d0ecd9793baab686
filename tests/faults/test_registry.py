"""Every registered fault has its params contract, its test file and its section in docs/faults.md."""

from __future__ import annotations

import importlib
import re
import typing
from pathlib import Path

import pytest
from pydantic import Field, TypeAdapter, ValidationError

from brownout import faults
from brownout.core.registry import build_registry
from brownout.faults.base import Fault, FaultParams

ROOT = Path(__file__).resolve().parents[2]


def test_registry_is_built_from_the_tuple() -> None:
    assert list(faults.REGISTRY) == [cls.type for cls in faults.FAULTS]
    with pytest.raises(TypeError):
        faults.REGISTRY["extra"] = faults.FAULTS[0]  # type: ignore[index]  # read-only: plugins never touch it


def test_duplicate_names_fail_loudly() -> None:
    with pytest.raises(ValueError, match="duplicate fault type 'latency'"):
        build_registry("fault", [faults.REGISTRY["latency"], faults.REGISTRY["latency"]], "Params")


def test_type_literal_must_match_the_name() -> None:
    class Wrong(Fault):
        type = "wrong"
        Params = faults.REGISTRY["hang"].Params

    with pytest.raises(ValueError, match="Literal"):
        build_registry("fault", [Wrong], "Params")


@pytest.mark.parametrize("name", list(faults.REGISTRY))
def test_fault_contract(name: str) -> None:
    cls = faults.REGISTRY[name]
    assert issubclass(cls, Fault) and issubclass(cls.Params, FaultParams)
    assert cls.__doc__ and cls.Params.__doc__
    assert cls.Params.model_config.get("extra") == "forbid" and cls.Params.model_config.get("frozen")
    module = importlib.import_module(cls.__module__)
    assert set(module.__all__) >= {cls.__name__, cls.Params.__name__}
    # unknown fields are config errors that name the field
    with pytest.raises(ValidationError, match="no_such_field"):
        cls.Params.model_validate({"type": name, "no_such_field": 1})


@pytest.mark.parametrize("name", list(faults.REGISTRY))
def test_every_fault_has_a_test_file(name: str) -> None:
    assert (ROOT / "tests" / "faults" / f"test_{name}.py").is_file()


def test_union_discriminates_on_type() -> None:
    params = tuple(cls.Params for cls in faults.FAULTS)
    union = typing.Annotated[typing.Union[params], Field(discriminator="type")]  # noqa: UP007
    adapter: TypeAdapter[FaultParams] = TypeAdapter(union)
    for name, cls in faults.REGISTRY.items():
        schema = cls.Params.model_json_schema()
        assert schema["properties"]["type"]["const"] == name
    with pytest.raises(ValidationError):
        adapter.validate_python({"type": "no_such_fault"})


def test_every_fault_has_a_docs_section() -> None:
    # The section's parameter table is checked against the Params model in tests/docs/test_param_tables.py.
    text = (ROOT / "docs" / "faults.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## `?([a-z_]+)`?\s*$", text, re.M))
    missing = sorted(set(faults.REGISTRY) - sections)
    assert not missing, f"docs/faults.md lacks '## <type>' sections for: {missing}"
