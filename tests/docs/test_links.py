"""README.md and docs/ hold together: every relative link and #anchor resolves, every page is linked.

External links (http, https, mailto) are not fetched: there is no network, and they are not ours.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.docs.mdpages import DOCS, MARKDOWN_FILES, ROOT, page

PAGES = sorted(DOCS.glob("*.md"))


def link_problems(source: Path, root: Path = ROOT) -> list[str]:
    """Links in `source` that point at no file, outside the repository `root`, or at no heading."""
    problems = []
    for link in page(source).links:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc:
            continue
        target = (source.parent / unquote(parts.path)).resolve() if parts.path else source
        where = f"{source.relative_to(root)}: {link}"
        if not target.is_relative_to(root):
            problems.append(f"{where}: outside the repository")
        elif not target.exists():
            problems.append(f"{where}: no such file")
        elif parts.fragment:
            if target.suffix != ".md":
                problems.append(f"{where}: an anchor into a file that is not markdown")
            elif parts.fragment not in page(target).anchors:
                problems.append(f"{where}: no heading or anchor #{parts.fragment} in {target.relative_to(root)}")
    return problems


def test_there_are_docs_pages() -> None:
    assert len(PAGES) >= 10


@pytest.mark.parametrize("source", MARKDOWN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(source: Path) -> None:
    assert link_problems(source) == []


def test_readme_links_every_docs_page() -> None:
    linked = {(ROOT / urlsplit(link).path).resolve() for link in page(ROOT / "README.md").links}
    assert [p.name for p in PAGES if p.resolve() not in linked] == []


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: p.name)
def test_every_page_opens_with_a_title_and_an_introduction(doc: Path) -> None:
    blocks = page(doc).blocks
    assert blocks[:2] == ["h1", "paragraph"], blocks[:3]
    assert blocks.count("h1") == 1


def test_the_checker_catches_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Repo\n", encoding="utf-8")
    (tmp_path / "docs" / "faults.md").write_text("# Faults\n\n## latency\n", encoding="utf-8")
    probe = tmp_path / "docs" / "probe.md"
    probe.write_text(
        "# Probe\n\n## A heading\n\n"
        "[ok](faults.md#latency) [ok](#a-heading) [ok](../README.md) [ok](https://example.com/x)\n"
        "[gone](no-such-page.md) [bad anchor](faults.md#no-such-fault) [bad local](#nowhere)\n"
        "[outside](../../elsewhere.md)\n\n"
        "| t |\n|---|\n| [in a table](nope.md) |\n",
        encoding="utf-8",
    )
    problems = link_problems(probe, root=tmp_path)
    assert len(problems) == 5, problems
    for expected in (
        "no-such-page.md: no such file",
        "#no-such-fault",
        "#nowhere",
        "outside the repository",
        "nope.md",
    ):
        assert any(expected in p for p in problems), (expected, problems)
