"""The README is a user's manual that a clone can follow: short, free of
development-log residue (commit hashes, paths outside the repository), and
every relative link in it and in docs/ leads somewhere that exists, anchor
included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code removed."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(CODE_SPAN.sub("", line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation other
    than '-' and '_' dropped, spaces turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    links = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        links += [t for t in LINK.findall(line) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]
    return links


def test_slug_and_link_helpers_read_markdown_as_github_does():
    assert slug("Working offline: placing files by hand") == "working-offline-placing-files-by-hand"
    assert slug("LoCoMo's categories") == "locomos-categories"
    assert slug("The test suite and CI (2026-12-01)") == "the-test-suite-and-ci-2026-12-01"
    assert slug("`minilm` and [links](x.md)") == "minilm-and-links"
    text = "see [a](a.md#x) and [b](https://e.org), ![img](i.png)\n```\n[c](c.md)\n```\n`[d](d.md)` [e](#y)"
    assert [t for line in prose_lines(text) for t in LINK.findall(line)] == ["a.md#x", "https://e.org", "#y"]


def test_readme_is_under_400_lines():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n < 400, f"README.md has {n} lines; move reference detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_path_outside_the_repository(page):
    assert "../shared" not in page.read_text(encoding="utf-8"), f"{page.name} names ../shared, which a clone lacks"


def test_readme_names_no_commit():
    hashes = re.findall(r"\b[0-9a-f]{40}\b", README.read_text(encoding="utf-8"))
    assert hashes == []


def test_readme_keeps_the_two_quick_start_commands():
    text = README.read_text(encoding="utf-8")
    assert ("python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/snakemake --cores 4\n") in text
    assert ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -n 2 --dist loadfile\n") in text
    # .ci/run runs the same test command
    assert ".venv/bin/python -m pytest -n 2 --dist loadfile" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_to_an_existing_file_and_anchor(page):
    bad = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif not dest.is_relative_to(REPO):
            bad.append(f"{target}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(REPO)}")
    assert bad == [], f"{page.relative_to(REPO)}: " + "; ".join(bad)


def test_the_readme_links_every_docs_page():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README) if t.partition("#")[0]}
    unlinked = [p.name for p in DOCS if p.resolve() not in linked]
    assert unlinked == [], f"docs pages the README does not link: {unlinked}"


def test_citation_file_is_cff_with_the_works_it_reproduces():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):
        assert cff[key], key
    refs = cff["references"]
    for ref in refs:
        assert ref["type"] and ref["title"] and ref["authors"], ref
    titles = " | ".join(r["title"] for r in refs)
    for work in ("Memo", "LongMemEval", "Very Long-Term Conversational Memory"):
        assert work in titles
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_every_listed_variant_is_in_the_readmes_variant_table():
    """`memobench variants` lists what the README's Variants table names (a
    `name` or a `prefix-*` pattern in its first column)."""
    import fnmatch

    from memobench.cli import variant_rows
    from memobench.catalog.variant import FAMILIES

    section = README.read_text(encoding="utf-8").split("\n## Variants\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    names = [n for line in rows for n in re.findall(r"`([^`]+)`", line.split("|")[1])]
    listed = [r[0] for r in variant_rows(FAMILIES)]
    assert len(listed) > 40
    assert [v for v in listed if not any(fnmatch.fnmatchcase(v, n) for n in names)] == []


def test_testing_doc_and_readme_name_one_place_for_the_real_locomo_file():
    """docs/testing.md and the README's troubleshooting name one place for the
    real LoCoMo file, the README's `data/locomo10.json`, and none outside the clone."""
    import yaml as _yaml

    section = (REPO / "docs" / "testing.md").read_text(encoding="utf-8").split("## The real LoCoMo file", 1)[1]
    section = section.split("\n## ", 1)[0]
    data_dir = _yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))["data_dir"]
    placed = f"{data_dir}/locomo10.json"
    trouble = README.read_text(encoding="utf-8").split("exactness tests skipped", 1)[1].split("\n- ", 1)[0]
    for text in (section, trouble):
        assert placed in text and "MEMOBENCH_LOCOMO" not in text and "cache" not in text, text


def test_each_users_question_has_one_page():
    """What is measured is defined in protocol.md alone, how to read the result
    files in results.md alone: the other pages link there instead of repeating
    the definitions (a repeated one drifts)."""
    definitions = {  # a phrase only the home page's definition uses -> its page
        "(k = 1, 5, 10)": "protocol.md",  # hit@k's definition
        "sum of 1/rank": "protocol.md",  # MRR's
        "undiscounted": "protocol.md",  # ndcg_any@k's discount
        "`mrr_mean_of_printed_segments` reproduces": "results.md",  # metrics.json's fields
    }
    for phrase, home in definitions.items():
        where = [p.name for p in PAGES if phrase in p.read_text(encoding="utf-8")]
        assert where == [home], (phrase, where)


def test_benchmarks_show_current_figures_and_the_changelog_states_changes():
    """benchmarks.md holds one set of figures (no dated rounds in its headings);
    the changelog's Unreleased entries are short statements of a change, with no
    run timings."""
    heads = [h for h in (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
             if h.startswith("#")]
    assert "## How to measure" in heads
    assert [h for h in heads if re.search(r"\d{4}-\d{2}-\d{2}|round", h)] == []
    text = (REPO / "docs" / "changelog.md").read_text(encoding="utf-8")
    unreleased = text.split("\n## Unreleased\n", 1)[1].split("\n## ", 1)[0]
    entries = [e for block in unreleased.split("\n\n") for e in re.split(r"\n(?=- )", block)]
    long = [e[:60] for e in entries if e.startswith("- ") and len(e.rstrip().splitlines()) > 3]
    timed = [e[:60] for e in entries if re.search(r"\b\d+(\.\d+)? ?(s|ms|min)\b|\d+(\.\d+)?x\b", e)]
    assert long == [] and timed == [], (long, timed)
