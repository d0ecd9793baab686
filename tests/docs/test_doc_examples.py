"""Every YAML example in README.md and docs/ is a valid config or experiment file: readers copy them.

A block is a whole config file, a fragment of one (`rules:`, `exporters:` ...), or a list of
invariant entries; each is validated the way `brownout validate` does. Blocks that load a plugin
are run by tests/docs/test_plugin_example.py instead, since the plugin must be importable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import parse_config
from brownout.proxy.experiment.config import ExperimentConfig
from brownout.proxy.experiment.staging.config import StagingExperiment
from tests.docs.mdpages import MARKDOWN_FILES, ROOT, page

BLOCKS = [
    pytest.param(path, text, id=f"{path.relative_to(ROOT)}#{n}")
    for path in MARKDOWN_FILES
    for n, (_, language, text) in enumerate(page(path).code)
    if language == "yaml"
]


def as_config(data: Any) -> dict[str, Any]:
    """The config file a block stands for."""
    if isinstance(data, list) and all(isinstance(entry, dict) and "type" in entry for entry in data):
        return {"invariants": data}
    assert isinstance(data, dict), f"a YAML block that is neither a config nor a list of invariants: {data!r}"
    return data


def test_there_are_examples() -> None:
    assert len(BLOCKS) >= 30


# Keys only an experiment file has: such a block is (a fragment of) an experiment file.
EXPERIMENT_KEYS = frozenset(ExperimentConfig.model_fields) - frozenset(BrownoutConfig.model_fields)
MINIMAL_EXPERIMENT = {"agent": {"command": ["true"], "tasks": ["t"]}, "phases": [{"name": "baseline"}]}
MINIMAL_STAGING = {"prometheus": {"url": "http://127.0.0.1:9090"}, "phases": [{"name": "p", "duration_s": 1}]}


@pytest.mark.parametrize(("path", "text"), BLOCKS)
def test_yaml_example_is_a_valid_config(path: Path, text: str) -> None:
    config = as_config(yaml.safe_load(text))
    if "plugins" in config:
        pytest.skip("loads a plugin: run by test_plugin_example.py")
    source = f"{path.relative_to(ROOT)} example"
    if "target" in config:  # a staging experiment (or a fragment of one)
        parse_config(yaml.safe_dump({**MINIMAL_STAGING, **config}), source=source, model=StagingExperiment)
    elif config.keys() & EXPERIMENT_KEYS:
        parse_config(yaml.safe_dump({**MINIMAL_EXPERIMENT, **config}), source=source, model=ExperimentConfig)
    else:
        parse_config(yaml.safe_dump(config), source=source)
