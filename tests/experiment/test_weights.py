"""The robustness weight table names exactly the fault types the proxy can record."""

from __future__ import annotations

from brownout.faults import FAULTS
from brownout.faults.quota import QuotaExceeded
from brownout.proxy.experiment.analysis import robustness
from brownout.proxy.experiment.config import DEFAULT_WEIGHTS
from tests.experiment.builders import config, exchange, run

# A rule with a quota and no fault records its 429 under the quota fault's own type.
RECORDABLE = {cls.type for cls in FAULTS} | {QuotaExceeded.type}


def test_weights_name_only_registered_fault_types() -> None:
    unknown = sorted(set(DEFAULT_WEIGHTS) - RECORDABLE)
    assert not unknown, f"weights for fault types that do not exist: {unknown}"


def test_every_fault_type_has_a_weight() -> None:
    missing = sorted(RECORDABLE - set(DEFAULT_WEIGHTS))
    assert not missing, f"fault types that fall back to the default weight: {missing}"


def test_user_weights_merge_over_defaults() -> None:
    table = config(weights={"reset": 3.0}).weight_table()
    assert table["reset"] == 3.0 and table["latency"] == DEFAULT_WEIGHTS["latency"]
    runs = [
        run("chaos", 1, "passed", [exchange(faults=("reset",))]),
        run("chaos", 2, "failed", [exchange(faults=("latency",))]),
    ]
    score = robustness(runs, table)["score"]
    assert score == 3.0 / (3.0 + DEFAULT_WEIGHTS["latency"])
