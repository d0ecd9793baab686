"""The layers the README draws hold: nothing imports upward.

core/ (brownout.core) imports nothing else of brownout; faults/, invariants/ and exporters/ import
core and themselves, never each other or proxy; proxy/ may import them all. Every shipped module
is parsed with ast, and every import counts, including those inside functions and TYPE_CHECKING
blocks: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lower imports nothing above it; the middle packages sit side by side.
LAYERS: dict[str, int] = {
    "brownout.core": 0,
    "brownout.faults": 1,
    "brownout.invariants": 1,
    "brownout.exporters": 1,
    "brownout.proxy": 2,
}


def package_dirs() -> dict[str, Path]:
    """The installed packages and the folders they come from (pyproject's package-dir)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: ROOT / folder for name, folder in pyproject["tool"]["setuptools"]["package-dir"].items()}


def shipped_modules() -> Iterator[tuple[str, Path]]:
    """(module name, file) for every .py file installed under brownout.*."""
    for package, folder in package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def layer_of(module: str) -> str | None:
    """The top package (a key of LAYERS) a module belongs to, or None when it is not brownout's."""
    return next((top for top in LAYERS if module == top or module.startswith(top + ".")), None)


def imported_modules(module: str, tree: ast.AST, known: set[str], *, is_package: bool = False) -> Iterator[str]:
    """Every module the code imports; `from a import b` is `a.b` when that is a module, else `a`."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base


def upward_imports(module: str, tree: ast.AST, known: set[str], *, is_package: bool = False) -> set[tuple[str, str]]:
    """(module, imported) pairs that break the layering: upward, or sideways between middle packages."""
    own = layer_of(module)
    assert own is not None, module
    found = set()
    for imported in imported_modules(module, tree, known, is_package=is_package):
        other = layer_of(imported)
        if other is not None and other != own and LAYERS[other] >= LAYERS[own]:
            found.add((module, imported))
    return found


def all_upward_imports() -> set[tuple[str, str]]:
    modules = list(shipped_modules())
    known = {name for name, _ in modules}
    found: set[tuple[str, str]] = set()
    for module, path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found |= upward_imports(module, tree, known, is_package=path.name == "__init__.py")
    return found


def test_every_installed_package_has_a_layer() -> None:
    assert sorted(package_dirs()) == sorted(LAYERS)


def test_no_module_imports_upward() -> None:
    unexpected = sorted(all_upward_imports())
    assert unexpected == [], "upward or sideways imports (see the layer drawing in README.md)"


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("brownout.core.spans", "from brownout.faults.base import Fault", {"brownout.faults.base"}),
        ("brownout.core.spans", "def f():\n    import brownout.proxy.addon", {"brownout.proxy.addon"}),
        ("brownout.core.wire.base", "from ... import exporters", {"brownout.exporters"}),
        ("brownout.faults.engine", "from brownout import invariants", {"brownout.invariants"}),
        ("brownout.exporters.hub", "from brownout.proxy.config import BrownoutConfig", {"brownout.proxy.config"}),
        ("brownout.faults.engine", "from brownout.core.exchange import Exchange\nfrom . import base", set()),
        ("brownout.proxy.addon", "from brownout.faults import engine\nimport brownout.invariants", set()),
    ],
)
def test_the_checker_sees_upward_imports(module: str, source: str, expected: set[str]) -> None:
    known = {name for name, _ in shipped_modules()}
    assert {imported for _, imported in upward_imports(module, ast.parse(source), known)} == expected
