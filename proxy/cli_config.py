"""The config files on the command line: loading one for a command (exit 1 naming each bad field and line),
`brownout validate` and `brownout schema`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from brownout.proxy.config import BrownoutConfig

__all__ = ["check_config", "fail", "schema", "validate"]


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"brownout: {message}", err=True)
    sys.exit(code)


def check_config(path: str | None) -> BrownoutConfig:
    """The config at `path` (defaults without one); exit 1 naming each bad field and line."""
    from brownout.proxy.config import BrownoutConfig
    from brownout.proxy.configload import ConfigError, load_config

    if path is None:
        return BrownoutConfig()
    try:
        config: BrownoutConfig = load_config(path)
    except ConfigError as e:
        if is_experiment_file(path):
            fail(f"{path} is an experiment file (agent:, phases:): run it with `brownout experiment run {path}`")
        fail(str(e))
    return config


def is_experiment_file(path: str) -> bool:
    from pathlib import Path

    import yaml

    from brownout.proxy.configload import yaml_data
    from brownout.proxy.experiment.check import is_experiment

    try:
        return is_experiment(yaml_data(Path(path).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError):
        return False  # load_config then says what is wrong with it


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
def validate(file: str) -> None:
    """Check a chaos config or an experiment file, told apart by their keys (exit 1 naming each bad field and line)."""
    from pathlib import Path

    import yaml

    from brownout.proxy.configload import ConfigError, load_config, yaml_data
    from brownout.proxy.experiment.check import check_experiment, describe_experiment, is_experiment

    try:
        text = Path(file).read_text(encoding="utf-8")
        data = yaml_data(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError):
        data = None  # load_config reports it, with the line of a syntax error (or of nesting too deep)
    try:
        if is_experiment(data):
            exp = check_experiment(text, file, Path(file).resolve().parent)
            click.echo(f"{file}: ok ({describe_experiment(exp)})")
            return
        config: BrownoutConfig = load_config(file)
    except ConfigError as e:
        fail(str(e))
    click.echo(f"{file}: ok ({len(config.rules)} rules, seed {config.seed})")


@click.command()
@click.option("--kind", type=click.Choice(["config", "experiment", "staging"]), default="config", show_default=True)
def schema(kind: str) -> None:
    """Print the JSON Schema of a chaos config, an experiment file, or a staging experiment (one with a target)."""
    from brownout.proxy.config import BrownoutConfig
    from brownout.proxy.experiment.config import ExperimentConfig
    from brownout.proxy.experiment.staging.config import StagingExperiment

    models: dict[str, Any] = {"config": BrownoutConfig, "experiment": ExperimentConfig, "staging": StagingExperiment}
    click.echo(json.dumps(models[kind].model_json_schema(), indent=2))
