"""Each invariant's tests run twice: in one process, and through the fleet's shared-session path (JSON round trip)."""

from __future__ import annotations

from typing import Any

import pytest

from brownout.invariants import REGISTRY
from tests.invariants.builders import Harness

# The tests of one invariant type each (test_<type>.py): their Harness runs in both modes.
_PER_INVARIANT = {f"test_{name}" for name in REGISTRY}


@pytest.fixture(autouse=True)
def harness_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    mode = getattr(request, "param", "memory")
    monkeypatch.setattr(Harness, "mode", mode)
    return mode


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rpartition(".")[2] in _PER_INVARIANT:
        metafunc.parametrize("harness_mode", ["memory", "fleet"], indirect=True)
