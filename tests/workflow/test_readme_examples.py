"""The README's examples run as copied, the way a user runs them: inside a
copy of the project (as a fresh clone is), with the real LoCoMo file placed
in `data/` as the README says and a venv's `bin` at `.venv/bin` (the
environment running the tests). Every shell line of the README runs there
with bash, in the README's order, except the few listed in NOT_RUN with
why; every YAML block is a config overlay run with
`.venv/bin/snakemake --cores 2 --configfile <block>`, as the README says
("each YAML block below is such a file, and runs as it is"), and a Python
block headed by its file name is written beside the config. A new command
or block is run too, or the test fails until it is listed in NOT_RUN."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import REPO
from tests.helpers.doc_examples import DocServer, blocks, python_file, run_line, sections, steps, user_project

README = REPO / "README.md"
EXAMPLE_SECTIONS = ("Choosing what runs", "Variants", "Your own retriever, or another system's run",
                    "Your memory service")
# the README's shell lines a test cannot run here, each with why (every other line runs)
NOT_RUN = {
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


def test_the_readme_blocks_are_found_and_every_unrun_line_is_in_the_readme():
    text = README.read_text(encoding="utf-8")
    assert len(blocks(text, "yaml")) >= 4
    for name in EXAMPLE_SECTIONS:  # each section with an example block has its YAML
        assert blocks(sections(text)[name], "yaml"), name
    lines = {line for kind, line in steps(text) if kind == "sh"}
    assert set(NOT_RUN) <= lines, set(NOT_RUN) - lines  # a stale entry would hide nothing, but says a wrong thing


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory, locomo_path):
    """Every step of the README in a copy of the project: (the copy, [(the
    step, its completed process)])."""
    text = README.read_text(encoding="utf-8")
    proj, env = user_project(tmp_path_factory.mktemp("readme") / "memobench", locomo_path)  # the venv not activated
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
            elif body in NOT_RUN:
                continue
            else:
                line = body
            if line.endswith("&"):  # a server the next blocks use, until the module's tests end
                servers.append(DocServer(line, proj, env))
                continue
            done.append(((kind, body), run_line(line, proj, env)))
        yield proj, done
    finally:
        for server in servers:
            server.stop()


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
