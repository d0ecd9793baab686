"""The parameter tables in docs/ cannot drift from the pydantic models they describe.

A table lists each field once, by its config name (the alias when there is one), as the first code
span of its first column. Its "default" column says:

- "required ..." when the field has no default;
- "unset ..." when the default is null;
- otherwise its first code span, read as YAML, equals the default.

A field whose default is a nested model has a table of its own, so its default cell is free text.
A table without a "default" column (the match reference: every field is optional) is checked for
names only. Every field must be in the table, and the table may name no field the model lacks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from brownout.core.state import StateConfig
from brownout.exporters.config import ExportersConfig, JsonlConfig, OtlpConfig, PrometheusConfig
from brownout.faults import FAULTS
from brownout.faults.config import MatchConfig, QuotaConfig, ScheduleConfig
from brownout.invariants import INVARIANTS
from brownout.invariants.base import InvariantConfigBase
from brownout.invariants.tool_policy import ArgumentRule, OrderRule
from brownout.proxy.agent_config import AgentSpansConfig, ReceiverConfig
from brownout.proxy.config import BrownoutConfig, ControlConfig, ProxySettings
from brownout.proxy.experiment.staging.config import Check, PrometheusSource, StagingAbort, StagingPhase, Target
from brownout.proxy.record.config import RecordConfig, ReplayConfig
from tests.docs.mdpages import DOCS, Cell, Table, page

# Fields every invariant takes, documented once at the top of docs/invariants.md. `severity` is not
# among them: its default differs by type, so each invariant's own table has it.
COMMON_INVARIANT_FIELDS = frozenset({"type", "name", "enabled"})

# (page, heading of the section holding the table, model, fields the table may leave out)
CONFIG_TABLES: list[tuple[str, str, type[BaseModel], frozenset[str]]] = [
    ("configuration.md", "Top-level keys", BrownoutConfig, frozenset()),
    ("configuration.md", "proxy", ProxySettings, frozenset()),
    ("configuration.md", "state", StateConfig, frozenset()),
    ("schedules.md", "Match", MatchConfig, frozenset()),
    ("schedules.md", "Schedule", ScheduleConfig, frozenset()),
    ("schedules.md", "Quotas", QuotaConfig, frozenset()),
    ("telemetry.md", "exporters", ExportersConfig, frozenset()),
    ("telemetry.md", "exporters.prometheus", PrometheusConfig, frozenset()),
    ("telemetry.md", "exporters.otlp", OtlpConfig, frozenset()),
    ("telemetry.md", "exporters.jsonl", JsonlConfig, frozenset()),
    ("telemetry.md", "agent_spans", AgentSpansConfig, frozenset()),
    ("telemetry.md", "agent_spans.receiver", ReceiverConfig, frozenset()),
    ("control-api.md", "Configuration", ControlConfig, frozenset()),
    ("record-replay.md", "record", RecordConfig, frozenset()),
    ("record-replay.md", "replay", ReplayConfig, frozenset()),
    ("invariants.md", "Fields every invariant takes", InvariantConfigBase, frozenset({"severity"})),
    ("invariants.md", "Argument rules", ArgumentRule, frozenset()),
    ("invariants.md", "Order rules", OrderRule, frozenset()),
    ("experiments.md", "Target", Target, frozenset()),
    ("experiments.md", "Prometheus", PrometheusSource, frozenset()),
    ("experiments.md", "Timed phases", StagingPhase, frozenset()),
    ("experiments.md", "Checks", Check, frozenset()),
    ("experiments.md", "Abort", StagingAbort, frozenset()),
]


def _plain(value: Any) -> Any:
    """Tuples as lists, so a YAML list compares equal to a tuple default."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def default_problem(name: str, field: FieldInfo, cell: Cell) -> str | None:
    """Why the documented default of `name` is wrong, or None when it is right."""
    source = cell.source.strip()
    if field.is_required():
        return None if source.startswith("required") else f"`{name}` has no default: say 'required', not {source!r}"
    default = field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return None
    if default is None:
        return None if source.startswith("unset") else f"`{name}` defaults to null: start with 'unset', not {source!r}"
    if not cell.code:
        return f"`{name}` defaults to {default!r}: give it as code, not {source!r}"
    documented = yaml.safe_load(cell.code[0])
    if _plain(documented) != _plain(default):
        return f"`{name}` defaults to {default!r}, the docs say `{cell.code[0]}`"
    return None


def table_problems(table: Table, model: type[BaseModel], *, optional: Iterable[str] = ()) -> list[str]:
    """Every way the table and the model disagree (empty: they agree)."""
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    key = table.columns[0]
    problems: list[str] = []
    documented = {}
    for row in table.rows:
        cell = row[key]
        if not cell.code:
            problems.append(f"a row names no field as code: {cell.source!r}")
            continue
        documented[cell.code[0]] = row
    for name in sorted(documented.keys() - fields.keys()):
        problems.append(f"`{name}` is documented, but {model.__name__} has no such field")
    for name in sorted(fields.keys() - documented.keys() - set(optional)):
        problems.append(f"`{name}` of {model.__name__} is missing from the table")
    if "default" in table.columns:
        for name in sorted(documented.keys() & fields.keys()):
            problem = default_problem(name, fields[name], documented[name]["default"])
            if problem:
                problems.append(problem)
    return problems


def section_table(page_name: str, heading: str, first_column: str | None = None) -> Table | None:
    """The first table in the section with this heading (and this first column, if given), or None."""
    doc = page(DOCS / page_name)
    assert heading in [text for _, text in doc.headings], f"docs/{page_name} has no heading {heading!r}"
    tables = [t for t in doc.tables_under(heading) if first_column in (None, t.columns[0])]
    return tables[0] if tables else None


@pytest.mark.parametrize("fault", FAULTS, ids=[cls.type for cls in FAULTS])
def test_fault_parameter_table_matches_its_model(fault: Any) -> None:
    fields = set(fault.Params.model_fields) - {"type"}
    table = section_table("faults.md", fault.type, "parameter")
    if table is None:
        assert not fields, f"docs/faults.md '## {fault.type}' has no parameter table for {sorted(fields)}"
        return
    assert table_problems(table, fault.Params, optional={"type"}) == []


@pytest.mark.parametrize("invariant", INVARIANTS, ids=[cls.type for cls in INVARIANTS])
def test_invariant_parameter_table_matches_its_model(invariant: Any) -> None:
    table = section_table("invariants.md", invariant.type, "parameter")
    assert table is not None, f"docs/invariants.md '## {invariant.type}' has no parameter table"
    # severity is in every invariant's table, since its default is the invariant's own
    assert table_problems(table, invariant.Config, optional=COMMON_INVARIANT_FIELDS) == []


@pytest.mark.parametrize(("page_name", "heading", "model", "optional"), CONFIG_TABLES, ids=lambda v: str(v))
def test_config_table_matches_its_model(
    page_name: str, heading: str, model: type[BaseModel], optional: frozenset[str]
) -> None:
    table = section_table(page_name, heading)
    assert table is not None, f"docs/{page_name} '{heading}' has no table"
    assert table_problems(table, model, optional=optional) == []


class _Sample(BaseModel):
    """A model to show the checker catches each kind of drift."""

    needed: int
    maybe: str | None = None
    count: int = 3
    globs: tuple[str, ...] = ("a*", "b*")


def _table(*rows: tuple[str, str]) -> Table:
    cells = [
        {"parameter": Cell(f"`{name}`", (name,)), "default": Cell(default, tuple(default.split("`")[1::2]))}
        for name, default in rows
    ]
    return Table(("sample",), ("parameter", "default"), tuple(cells))


def test_the_checker_accepts_a_true_table() -> None:
    table = _table(("needed", "required"), ("maybe", "unset"), ("count", "`3`"), ("globs", "`[a*, b*]`"))
    assert table_problems(table, _Sample) == []


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ((("needed", "`1`"), ("maybe", "unset"), ("count", "`3`"), ("globs", "`[a*, b*]`")), "has no default"),
        ((("needed", "required"), ("maybe", "`x`"), ("count", "`3`"), ("globs", "`[a*, b*]`")), "defaults to null"),
        ((("needed", "required"), ("maybe", "unset"), ("count", "`4`"), ("globs", "`[a*, b*]`")), "defaults to 3"),
        ((("needed", "required"), ("maybe", "unset"), ("count", "`3`")), "`globs` of _Sample is missing"),
        (
            (("needed", "required"), ("maybe", "unset"), ("count", "`3`"), ("globs", "`[a*]`"), ("gone", "`1`")),
            "`gone` is documented, but _Sample has no such field",
        ),
    ],
)
def test_the_checker_reports_drift(rows: tuple[tuple[str, str], ...], problem: str) -> None:
    problems = table_problems(_table(*rows), _Sample)
    assert any(problem in p for p in problems), problems
