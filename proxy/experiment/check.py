"""`brownout validate` for experiment files: the file itself, its inline rules, its invariants, its phase configs.

An experiment file validates its phases' inline `rules:` and its `invariants:` only as lists of
mappings; here each is validated as the chaos config it becomes, and problems point at the
experiment file's own lines (`exp.yaml:14: phases[2].rules[0].fault.status: ...`). Phase `config:`
files are checked with their own lines. Last, the phases are resolved exactly as a run resolves
them, so a file that passes here is one `brownout experiment run` accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import ConfigError, ConfigProblem, load_config, parse_config, problems_in
from brownout.proxy.experiment.config import ExperimentConfig, ExperimentError
from brownout.proxy.experiment.manifest import resolve_phases

__all__ = ["check_experiment", "is_experiment"]


def is_experiment(data: Any) -> bool:
    """Whether parsed YAML is an experiment file rather than a chaos config (by its top-level keys)."""
    return isinstance(data, dict) and bool({"agent", "phases"} & set(data))


def _part(text: str, source: str, data: dict[str, Any], prefix: tuple[str | int, ...]) -> list[ConfigProblem]:
    try:
        BrownoutConfig.model_validate(data)
    except pydantic.ValidationError as e:
        return problems_in(text, source, e, prefix)
    return []


def check_experiment(text: str, source: str, base_dir: Path) -> ExperimentConfig:
    """The validated experiment; ConfigError naming every problem's field and line."""
    config: ExperimentConfig = parse_config(text, source, model=ExperimentConfig)
    problems = _part(text, source, {"invariants": config.invariants}, ())
    for j, phase in enumerate(config.phases):
        if phase.rules:
            problems += _part(text, source, {"rules": phase.rules}, ("phases", j))
        elif phase.config is not None:
            try:
                load_config(base_dir / phase.config)
            except ConfigError as e:
                problems += e.problems
    if problems:
        raise ConfigError(problems)
    try:
        resolve_phases(config, base_dir, config.seed)
    except ExperimentError as e:
        raise ConfigError([ConfigProblem(source, None, "phases", str(e))]) from None
    return config
