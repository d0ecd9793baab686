"""The replica harness starts a replica again on other ports when one it picked was taken meanwhile (by
another test of the suite), and still fails at once for any other reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import helpers
from tests.fleet import replicas


def test_a_port_taken_before_the_replica_binds_it_gets_the_replica_started_again(
    taken_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([helpers.free_port(), helpers.free_port(), taken_port])  # the first metrics port is taken
    monkeypatch.setattr(replicas, "free_port", lambda: next(picks, None) or helpers.free_port())
    with replicas.replica_set({"version": 1}, "http://127.0.0.1:9", tmp_path, n=1) as fleet:
        (replica,) = fleet.replicas
        assert replica.metrics_port != taken_port and replica.proc.poll() is None


def test_any_other_start_failure_fails_at_once(tmp_path: Path) -> None:
    with (
        pytest.raises(AssertionError, match="unknown"),
        replicas.replica_set({"version": 1, "unknown": 1}, "http://127.0.0.1:9", tmp_path, n=1),
    ):
        pass
