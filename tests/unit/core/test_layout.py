"""memobench.core.layout is the one home of the results tree: its patterns fill
in and re-root as the rules and the package use them, and no path, table
name or dataset-format list is spelled a second time in src/ or workflow/."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.helpers import REPO
from memobench.core import layout


def test_patterns_are_the_rules_outputs_and_fill_in():
    assert layout.path(layout.SEGMENT_TABLE, suffix=".deep.parquet") == \
        "results/{dataset}/{variant}/segments/{segment}.deep.parquet"
    assert layout.path(layout.METRICS, dataset="s", variant="v0.8.0") == "results/s/v0.8.0/metrics.json"
    assert layout.path(layout.NORMALIZED_TABLE, table="events") == "results/{dataset}/normalized/events.parquet"
    assert layout.path(layout.RETRIEVE_PLAN, root="/w/results") == "/w/results/cache/retrieve_plan.json"
    assert layout.path(layout.SHARED_CACHE, root=Path("r"), dataset="s", segment="seg2") == "r/s/cache/seg2"


def test_segment_names_and_table_paths():
    assert [layout.segment_name(i) for i in (1, 12)] == ["seg1", "seg12"]
    assert layout.segment_index("seg12") == 12 and re.fullmatch(layout.SEGMENT_PATTERN, "seg3")
    for bad in ("seg", "seg1a", "part1"):
        with pytest.raises(ValueError):
            layout.segment_index(bad)
    paths = layout.table_paths(Path("n"))
    assert list(paths) == list(layout.TABLE_NAMES)
    assert paths["events"] == Path("n/events.parquet") == \
        Path("n") / Path(layout.path(layout.NORMALIZED_TABLE, dataset="x", table="events")).name


@pytest.mark.parametrize("made", ["results/s/v/segments/seg1.parquet", "/abs/w/results/s/v/segments/seg1.parquet"])
def test_root_of_finds_the_results_folder(made):
    root = layout.root_of(made, layout.path(layout.SEGMENT_TABLE, suffix=".parquet"))
    assert root == Path(made).parents[3]
    assert layout.root_of(layout.path(layout.STATS, dataset="s"), layout.STATS) == Path("results")


def _sources():
    files = [*(REPO / "src").rglob("*.py"), *(REPO / "workflow").rglob("*.smk"),
             *(REPO / "workflow").rglob("*.py"), REPO / "Snakefile"]
    return {f: f.read_text(encoding="utf-8") for f in files}


@functools.lru_cache(maxsize=None)
def _code() -> dict:
    """Every source's code, less its docstrings and comments (read once)."""
    return {f: _strip_docs(text) for f, text in _sources().items()}


# A string literal (any prefix, single or triple quoted) or a comment, read left
# to right: a comment is a "#" outside the strings (the tokenize module finds
# the same comments, several times slower).
_STRING_OR_COMMENT = re.compile(r'(?P<string>[rRbBuUfF]{0,2}(?:"""(?:\\.|[^\\])*?"""' r"|'''(?:\\.|[^\\])*?'''"
                                r'|"(?:\\.|[^"\\\n])*"' r"|'(?:\\.|[^'\\\n])*'))|#[^\n]*", re.S)


def _docstrings(tree: ast.AST):
    """The docstrings of a module and of the statements under it (only
    statements have bodies of statements)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            yield body[0]
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                todo.extend(children)


def _strip_docs(text: str) -> str:
    """The code less comments and docstrings (prose may name a path) and the
    rule folders of log and benchmark paths (LOGS/<rule>/..., named for the
    rule). Python sources lose exactly their docstrings and comments (other
    strings, code run with ``-c`` included, are kept); Snakemake files, which
    are not Python, lose their triple-quoted blocks and comments."""
    try:
        tree = ast.parse(text)
    except SyntaxError:  # a .smk file
        text = re.sub(r'"""(?:.|\n)*?"""', '""', text)
        text = re.sub(r"(?m)^\s*#.*$|\s#.*$", "", text)
    else:
        lines = text.splitlines(keepends=True)
        for doc in _docstrings(tree):
            for n in range(doc.lineno - 1, doc.end_lineno):
                lines[n] = "\n"
        text = _STRING_OR_COMMENT.sub(lambda m: m.group() if m.group("string") is not None else "", "".join(lines))
    return re.sub(r"\{(?:LOGS|BENCHMARKS)\}/\w+/", "{LOGS}/", text)


# One fact, one place: each result path (its file name, its folder under a
# dataset or variant, the results root itself) and each list of names is
# spelled in exactly one file's code (comments and docstrings may name them).
MEASURES = "src/memobench/evaluation/measures.py"
_FILES = ["raw.json", "verified.json", "summary.json", "sessions.bin", "qrels.trec", "stats.json", "falsifier.json",
          "falsifier.md", "analyze.md", "rankings.parquet", "metrics.json", "official.json", "run.trec",
          "retrievallog.jsonl", "deep.parquet", "outcomes.parquet", ".outcomes.parquet", ".deep.parquet", "report.md", "report.html",
          "manifest.json", "datasets.json", "retrieve_plan.json", "run-file.json", "hitk.png", "forest.png", "heatmap.png", "frontier.png"]
_FOLDERS = ["normalized", "tokens", "context_tokens", "embeddings", "prepared", "exports", "analyze", "segments", "cache", "logs",
            "benchmarks", ".score"]
FACTS = {
    **{f"file {name}": (re.compile(r"""["'/}]%s["']""" % re.escape(name)), "src/memobench/core/layout.py")
       for name in _FILES},
    # a folder as a path component: "x/", "/x/", "/x", or a pathlib part joined with /
    **{f"folder {name}": (re.compile(r"""["'}/]%s/|/%s["']|["']%s["']\s*/|/\s*["']%s["']"""
                                     % ((re.escape(name),) * 4)), "src/memobench/core/layout.py") for name in _FOLDERS},
    "results root": (re.compile(r"""["']results/|["']results["']\s*/|/\s*["']results["']|(?m:^\w+\s*=\s*["']results["'])"""),
                     "src/memobench/core/layout.py"),
    # the normalized tables' names, assigned at module level (memobench.core.tables.TABLES)
    "table names": (re.compile(r"""(?m)^\w+\s*=\s*[\[({]\s*["']questions["'][^\n]*["']haystacks["'][^\n]*"""
                               r"""["']sessions["'][^\n]*["']events["']"""), "src/memobench/core/layout.py"),
    # the normalized tables' file names (normalize writes to the paths the rule gives it: layout.table_paths)
    "table file names": (re.compile(r"""(?:questions|haystacks|sessions|events)\.parquet|\{+(?:table|name|t)\}+\.parquet"""),
                         "src/memobench/core/layout.py"),
    # a segment's name and its pattern (layout.segment_name, segment_index, SEGMENT_PATTERN)
    "segment name": (re.compile(r"""seg\{|["']seg["']|["'/.]seg[0-9]+[./]|seg\[0-9\]|seg\(?(?:\\d|\[0-9)|"""
                                r"""segment\[3:\]"""), "src/memobench/core/layout.py"),
    # the list depths: the harness list and the deep list (memobench.core.protocol), as module constants or defaults
    "list depths": (re.compile(r"""(?m)^(?:DEPTH|DEEP|TOP)\s*=\s*\d|depth: int = \d"""), "src/memobench/core/protocol.py"),
    # the dataset formats: one row each (memobench.core.formats), no list of them anywhere else
    "dataset formats": (re.compile(r"""DatasetFormat\(["']|["']longmemeval["'],\s*["']longmemeval_cn["']|"""
                                   r"""["']longmemeval_cn["']:|["']embedded["']:"""), "src/memobench/core/formats.py"),
    # a measure's facts: one row each (memobench.evaluation.measures): its label, its paired test's name, the
    # lists of measures and cutoffs a report, the statistics or memobench score go through
    "measure labels": (re.compile(r"""["']MRR["']"""), MEASURES),
    "paired tests": (re.compile(r"""["'](?:McNemar|t-test)["']"""), MEASURES),
    "lists of measures": (re.compile(r"""["']hit@1["']\s*,\s*["']hit@5["']|["']recall_any@5["']\s*,|"""
                                     r"""\(\s*1\s*,\s*5\s*,\s*10\s*\)|\(\s*5\s*,\s*10\s*\)"""), MEASURES),
}
# what no module does: choose a measure's unit, digits or test by its name (its row in measures.py says them)
MEASURE_BY_NAME = re.compile(
    r"""(?:==|!=)\s*["'](?:mrr|hit@\d+|recall\w*|ndcg\w*)["']|["'](?:mrr|hit@\d+)["']\s*(?:==|!=)|"""
    r"""\.startswith\(\s*["'](?:hit@|recall|ndcg|mrr)|"""  # a unit or a test told apart by the name
    r"""to_fixed\([^()\n]*mrr[^()\n]*,\s*\d\s*\)|fmt_ci\([^()\n]*,\s*[\d.]+\s*,\s*\d\s*\)""")  # digits spelled


@pytest.mark.parametrize("fact", FACTS)
def test_each_fact_is_defined_once(fact):
    pattern, home = FACTS[fact]
    sites = sorted(str(f.relative_to(REPO)) for f, code in _code().items() if pattern.search(code))
    assert sites == [home], f"{fact}: spelled in {sites}; define it in {home} and import it"


def test_no_module_chooses_a_measures_unit_or_digits_by_its_name():
    sites = sorted(f"{f.relative_to(REPO)}: {m.group(0)}" for f, code in _code().items()
                   for m in MEASURE_BY_NAME.finditer(code))
    assert not sites, f"a measure's unit, digits or test chosen by its name: {sites}; read its row in {MEASURES}"


def test_no_second_definition_of_the_removed_copies():
    for f, code in _code().items():
        for name in ("LME_FORMATS", "TABLE_NAMES", "RETRIEVAL_LOG_FORMATS", "DEFAULT_FAMILY", "USER_TURNS_ONLY",
                     "_USER_TURNS", "HAYSTACK_FORMATS"):
            defs = re.findall(r"(?m)^%s\s*=" % name, code)
            home = {"LME_FORMATS": "formats.py", "DEFAULT_FAMILY": "formats.py", "TABLE_NAMES": "layout.py"}.get(name)
            assert not defs or f.name == home, f"{f}: defines {name} (the package's: {home})"
