"""A plain `pip install` of brownout brings everything its shipped code imports.

The test suite installs the lock file with the test extras, which would hide a module that only a
test dependency brings: this reads every shipped module's imports with `ast` and checks each
third-party one against the closure of pyproject's runtime `dependencies` (extras ignored).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
HOST_PROVIDED = {"pytest", "_pytest"}  # the pytest plugin only runs inside pytest


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(req: str) -> str | None:
    if ";" in req and "extra ==" in req.split(";", 1)[1]:
        return None  # wanted only by an extra
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return _norm(match.group(1)) if match else None


@cache
def runtime_closure() -> frozenset[str]:
    todo = [n for r in PROJECT["project"]["dependencies"] if (n := _requirement(r))]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [n for r in metadata.requires(name) or [] if (n := _requirement(r))]
        except metadata.PackageNotFoundError:
            continue
    return frozenset(seen)


def shipped_files() -> list[Path]:
    dirs = PROJECT["tool"]["setuptools"]["package-dir"]
    return sorted(path for folder in set(dirs.values()) for path in (ROOT / folder).rglob("*.py"))


def third_party_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in HOST_PROVIDED and m != "brownout"}


def test_every_package_folder_is_installed() -> None:
    dirs = PROJECT["tool"]["setuptools"]["package-dir"]
    packages = set(PROJECT["tool"]["setuptools"]["packages"])
    for name, folder in dirs.items():
        subpackages = {
            ".".join([name, *p.parent.relative_to(ROOT / folder).parts]) for p in (ROOT / folder).rglob("__init__.py")
        }
        assert subpackages <= packages, f"add to [tool.setuptools] packages: {sorted(subpackages - packages)}"


def test_shipped_imports_are_declared_runtime_dependencies() -> None:
    distributions = metadata.packages_distributions()
    missing: dict[str, list[str]] = {}
    for path in shipped_files():
        for module in third_party_imports(path):
            if not {_norm(d) for d in distributions.get(module, [])} & runtime_closure():
                missing.setdefault(module, []).append(str(path.relative_to(ROOT)))
    assert missing == {}, "imported by shipped code but not brought by [project].dependencies"
