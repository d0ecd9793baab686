"""The config base shared by every section: strict frozen models, one listen-address parser."""

from __future__ import annotations

import pydantic
import pytest

from brownout.core.config import Model, parse_listen


@pytest.mark.parametrize(
    ("spec", "default_port", "expected"),
    [
        ("127.0.0.1:9465", None, ("127.0.0.1", 9465)),
        (":9000", None, ("127.0.0.1", 9000)),
        ("0.0.0.0", 8080, ("0.0.0.0", 8080)),
        ("[::1]:7000", None, ("::1", 7000)),
        ("[::1]", 9464, ("::1", 9464)),
        ("localhost:0", None, ("localhost", 0)),
        ("8090", 8080, ("127.0.0.1", 8090)),  # where a bare host is allowed, a bare number is the port
    ],
)
def test_parse_listen(spec: str, default_port: int | None, expected: tuple[str, int]) -> None:
    assert parse_listen(spec, default_port) == expected


@pytest.mark.parametrize("spec", ["9464", "h:port", "h:70000", "[::1", "[::1]x", "::1:80", "host:http"])
def test_parse_listen_rejects_naming_the_value(spec: str) -> None:
    with pytest.raises(ValueError, match="listen address"):
        parse_listen(spec)


def test_models_are_strict_and_frozen() -> None:
    class Section(Model):
        size: int = 1

    with pytest.raises(pydantic.ValidationError, match="siz"):
        Section.model_validate({"siz": 2})
    with pytest.raises(pydantic.ValidationError):
        Section().size = 3  # type: ignore[misc]


def test_every_config_model_keeps_the_bases_strictness() -> None:
    """Sections extend the one base; none loosens it (extra fields stay errors, values stay frozen)."""
    import brownout.proxy.config
    import brownout.proxy.experiment.config  # the experiment file's models register as subclasses

    def subclasses(cls: type[Model]) -> list[type[Model]]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    models = subclasses(Model)
    assert brownout.proxy.config.BrownoutConfig in models and len(models) > 50
    loose = [
        m.__qualname__ for m in models if m.model_config.get("extra") != "forbid" or not m.model_config.get("frozen")
    ]
    assert loose == []


class _Inner(Model):
    delay_ms: int = 0
    label: str = ""

    @pydantic.field_validator("label")
    @classmethod
    def _no_braces(cls, v: str) -> str:
        if "{" in v:
            raise ValueError("label {x} must not hold braces")
        return v


class _Outer(Model):
    inner: _Inner = _Inner()
    seed: int = 0


def test_an_unknown_key_gets_the_closest_field_of_its_own_model() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        _Outer.model_validate({"inner": {"delay": 5, "label": "{"}, "sed": 1, "zzz": 2})
    messages = {e["loc"]: e["msg"] for e in info.value.errors()}
    assert messages == {
        ("inner", "delay"): "Extra inputs are not permitted; did you mean 'delay_ms'?",
        # the other errors keep their messages verbatim (braces are not a template)
        ("inner", "label"): "Value error, label {x} must not hold braces",
        ("sed",): "Extra inputs are not permitted; did you mean 'seed'?",
        ("zzz",): "Extra inputs are not permitted; valid fields: inner, seed",
    }
    assert {e["type"] for e in info.value.errors()} == {"extra_forbidden", "value_error"}
