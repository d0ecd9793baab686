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
from brownout.proxy.configload import ConfigError, ConfigProblem, load_config, problems_in
from brownout.proxy.experiment.config import ExperimentConfig, ExperimentError
from brownout.proxy.experiment.manifest import resolve_phases
from brownout.proxy.experiment.staging.config import StagingExperiment, parse_any_config

__all__ = ["check_experiment", "describe_experiment", "is_experiment"]


def is_experiment(data: Any) -> bool:
    """Whether parsed YAML is an experiment file rather than a chaos config (by its top-level keys)."""
    return isinstance(data, dict) and bool({"agent", "phases"} & set(data))


def _part(text: str, source: str, data: dict[str, Any], prefix: tuple[str | int, ...]) -> list[ConfigProblem]:
    try:
        BrownoutConfig.model_validate(data)
    except pydantic.ValidationError as e:
        return problems_in(text, source, e, prefix)
    return []


def check_experiment(text: str, source: str, base_dir: Path) -> ExperimentConfig | StagingExperiment:
    """The validated experiment (either shape); ConfigError naming every problem's field and line."""
    config = parse_any_config(text, source)
    if isinstance(config, StagingExperiment):
        return _check_staging(config, text, source, base_dir)
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
    if config.search is not None:
        _check_search(config, base_dir)
    return config


def _check_search(config: ExperimentConfig, base_dir: Path) -> None:
    """The search's levels at both ends of the range, resolved as a search resolves them (invariants included)."""
    from brownout.proxy.experiment.search.runner import level_phase, make_search

    scale = make_search(config).scale
    for index, u in enumerate((0.0, 1.0)):
        try:
            level_phase(config, scale.value(u), index, base_dir, config.seed)
        except ExperimentError as e:
            raise ConfigError([ConfigProblem("search", None, "search", str(e))]) from None


def _check_staging(config: StagingExperiment, text: str, source: str, base_dir: Path) -> StagingExperiment:
    """A staging file's phase rules as the config they become on the fleet (its own plugins aside)."""
    problems: list[ConfigProblem] = []
    for j, phase in enumerate(config.phases):
        if phase.rules:
            problems += _part(text, source, {"rules": phase.rules}, ("phases", j))
        elif phase.config is not None:
            try:
                if not load_config(base_dir / phase.config).rules:
                    problems.append(ConfigProblem(source, None, f"phases[{j}].config", "its config has no rules"))
            except ConfigError as e:
                problems += e.problems
    if problems:
        raise ConfigError(problems)
    return config


def describe_experiment(config: ExperimentConfig | StagingExperiment) -> str:
    """What `brownout validate` says a valid experiment file is."""
    rules = sum(len(p.rules or []) for p in config.phases)
    if isinstance(config, StagingExperiment):
        target = "its store" if config.target.control is None else "its control API"
        return (
            f"staging experiment, {len(config.phases)} timed phases, {rules} inline rules, the fleet through {target}"
        )
    text = f"experiment, {len(config.phases)} phases, {rules} inline rules, seed {config.seed}"
    if config.search is not None:
        s = config.search
        text += f"; a search over {s.parameter} from {s.range[0]:g} to {s.range[1]:g} for {s.goal.label}"
    return text
