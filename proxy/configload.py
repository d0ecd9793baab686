"""Load brownout's YAML config into a validated `BrownoutConfig`.

Every problem becomes one `ConfigError` whose message has one line per error, in the form
`chaos.yaml:7: rules[0].fault.status: Input should be greater than or equal to 400`.
Line numbers come from the YAML node tree (`proxy.yamlnodes.compose`: no recursion, a limit on
nesting), walked along pydantic's error location, so they point at the offending value (or, for a
missing field, at its parent).

Relative paths in a config file (logs, cassette directories, custom invariant files) are resolved
here, against the file's directory, as Prometheus and Docker Compose do: whoever loads the file
(start-up, hot reload, `brownout validate`, an experiment) gets the same absolute paths.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from brownout.core.config import BASE_DIR
from brownout.proxy import yamlnodes
from brownout.proxy.config import BrownoutConfig

__all__ = ["ConfigError", "ConfigProblem", "load_config", "parse_config", "problems_in", "yaml_data"]

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=pydantic.BaseModel)


@dataclass(frozen=True)
class ConfigProblem:
    """One config error: where it is (file, 1-based line or None, field path) and what is wrong."""

    source: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class ConfigError(ValueError):
    """A config file that cannot be used; `str()` is the user-facing message, `.problems` the details."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def load_config[M: pydantic.BaseModel](path: str | PathLike[str], *, model: type[M] = BrownoutConfig) -> M:  # type: ignore[assignment]
    """Read and validate the config file at `path` (as `model`: other YAML files reuse this); its
    relative paths resolve against its directory.

    An empty or comment-only file is an error: most likely a slip (the wrong file, an unsaved
    editor); a proxy that only observes says so with `version: 1`."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([ConfigProblem(source, None, "", f"cannot read config: {e.strerror or e}")]) from e
    except UnicodeDecodeError as e:
        raise ConfigError([ConfigProblem(source, None, "", f"config is not UTF-8: {e}")]) from e
    base_dir = Path(path).resolve().parent
    return parse_config(text, source=source, model=model, allow_empty=False, base_dir=base_dir)


def parse_config[M: pydantic.BaseModel](
    text: str,
    source: str = "<string>",
    *,
    model: type[M] = BrownoutConfig,  # type: ignore[assignment]
    allow_empty: bool = True,
    base_dir: str | PathLike[str] | None = None,
) -> M:
    """Validate YAML `text`; an empty document means all defaults unless `allow_empty` is off.

    With `base_dir`, relative paths in it resolve against that directory (else they stay relative
    to the working directory)."""
    try:
        # compose once and build the data from the same tree, so lines and values agree
        root = yamlnodes.compose(text)
        duplicates = _duplicate_keys(root, source)  # before construction merges `<<:` keys into the mappings
        data = _construct(root)
    except yamlnodes.TooDeep as e:
        raise ConfigError([ConfigProblem(source, e.line, "", f"{e}; a config needs a few")]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (e.context, e.problem) if p) or str(e)
        raise ConfigError([ConfigProblem(source, line, "", f"YAML syntax error: {problem}")]) from e
    except yaml.YAMLError as e:
        raise ConfigError([ConfigProblem(source, None, "", f"YAML error: {e}")]) from e
    if data is None and not allow_empty:
        raise ConfigError(
            [ConfigProblem(source, None, "", "the config is empty; for a proxy that only observes, write `version: 1`")]
        )
    if data is not None and not isinstance(data, dict):
        line = root.start_mark.line + 1 if root is not None else None
        kind = "a list" if isinstance(data, list) else f"the single value {data!r}"
        raise ConfigError(
            [ConfigProblem(source, line, "", f"the file must be a mapping of settings (`version: 1`, ...), not {kind}")]
        )
    if duplicates:
        raise ConfigError(duplicates)
    try:
        context = {BASE_DIR: str(base_dir)} if base_dir is not None else None
        config = model.model_validate(data if data is not None else {}, context=context)
    except pydantic.ValidationError as e:
        problems = [_problem(source, root, err) for err in e.errors(include_url=False)]
        raise ConfigError(problems) from None  # the problems say it all; pydantic's trace is noise
    except RecursionError:  # the nesting the composer allows is far from this; kept as a last line of defence
        raise ConfigError([ConfigProblem(source, None, "", "nested too deeply to validate")]) from None
    yamlnodes.release(root)
    return config


def problems_in(
    text: str, source: str, error: pydantic.ValidationError, prefix: tuple[str | int, ...] = ()
) -> list[ConfigProblem]:
    """`error`, from validating the part of `text` found at `prefix`, as problems on `text`'s own lines."""
    root = yamlnodes.compose(text)
    return [
        _problem(source, root, {**err, "loc": (*prefix, *err.get("loc", ()))})
        for err in error.errors(include_url=False)
    ]


def yaml_data(text: str) -> Any:
    """The data of the YAML document in `text`, as `yaml.safe_load` gives it, through the bounded composer: fast
    and flat on any nesting. Raises yaml.YAMLError for bad YAML, yamlnodes.TooDeep past its depth limit."""
    root = yamlnodes.compose(text)
    try:
        return _construct(root)
    finally:
        yamlnodes.release(root)


def _construct(root: yaml.Node | None) -> Any:
    if root is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _duplicate_keys(root: yaml.Node | None, source: str) -> list[ConfigProblem]:
    """Keys written twice in one mapping: YAML keeps the last silently, so a second `rules:` would drop the first."""
    problems: list[ConfigProblem] = []
    seen: set[int] = set()  # each node once: aliases share nodes (and could nest exponentially)
    todo: list[tuple[yaml.Node | None, list[str | int]]] = [(root, [])]
    while todo:
        node, path = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo += [(item, [*path, i]) for i, item in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":  # `<<` merges, it is not a key
                    line = key.start_mark.line + 1
                    if (key.tag, key.value) in first:
                        where = _format_path([*path, key.value])
                        message = (
                            f"written twice (first on line {first[key.tag, key.value]}); only the last would count"
                        )
                        problems.append(ConfigProblem(source, line, where, message))
                    first.setdefault((key.tag, key.value), line)
                    todo.append((value, [*path, key.value]))
    return sorted(problems, key=lambda p: p.line or 0)


def _problem(source: str, root: yaml.Node | None, err: Any) -> ConfigProblem:
    loc: tuple[str | int, ...] = tuple(err.get("loc", ()))
    if err.get("type") == "invalid_key" or loc[-1:] == ("[key]",):
        # a key that is not a name (null, a number, a YAML 1.1 boolean such as `on`): pydantic's loc
        # ends with the key itself (then "[key]" for a dict field); point at the key's own line
        parent = loc[:-2] if loc[-1:] == ("[key]",) else loc[:-1]
        line, shown = _locate(root, parent)
        node = _node_at(root, shown)
        line = _key_line(node, err.get("input")) or line
        return ConfigProblem(source, line, _format_path(shown), _bad_key(err.get("input")))
    line, shown = _locate(root, loc)
    return ConfigProblem(source, line, _format_path(shown), err.get("msg", "invalid value"))


def _bad_key(key: Any) -> str:
    if key is None:
        return "a key is empty (null): every key must be a name"
    kind = "boolean" if isinstance(key, bool) else "number" if isinstance(key, int | float) else type(key).__name__
    return f"key {key!r} is a {kind}, not a name; quote it if it is meant as one"


def _node_at(root: yaml.Node | None, path: list[str | int]) -> yaml.Node | None:
    node = root
    for seg in path:
        found = _child(node, seg) if node is not None else None
        node = found[0] if found is not None else None
    return node


def _key_line(node: yaml.Node | None, key: Any) -> int | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            value = _construct(key_node) if isinstance(key_node, yaml.ScalarNode) else object()
            if value == key and type(value) is type(key):  # 1 == True, yet they are different keys
                return key_node.start_mark.line + 1
    return None


def _locate(root: yaml.Node | None, loc: tuple[str | int, ...]) -> tuple[int | None, list[str | int]]:
    """Walk the node tree along `loc`; return the best line and the path segments worth showing.

    pydantic puts union member tags (`http_error`, `function-after[...]`) into `loc`; they have no
    node in the YAML, so a segment that matches nothing is skipped when a later one matches again.
    """
    if root is None:
        return (None, list(loc))
    node: yaml.Node = root
    line = root.start_mark.line + 1
    shown: list[str | int] = []
    i = 0
    while i < len(loc):
        seg = loc[i]
        found = _child(node, seg)
        if found is not None:
            node, line = found
            shown.append(seg)
            i += 1
            continue
        # a tag segment: skip it if the rest of the path resumes inside the current node
        rest = next((j for j in range(i + 1, len(loc)) if _child(node, loc[j]) is not None), None)
        if rest is None:
            shown.extend(loc[i:])  # a missing field or a trailing union tag: keep it, point at the parent
            break
        i = rest
    return (line, shown)


def _child(node: yaml.Node, seg: str | int) -> tuple[yaml.Node, int] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(seg):
                # point at the key's line: for a nested block the value starts on the next line
                return (value, key.start_mark.line + 1)
    elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
        item = node.value[seg]
        return (item, item.start_mark.line + 1)
    return None


def _format_path(loc: list[str | int]) -> str:
    out = ""
    for seg in loc:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out
