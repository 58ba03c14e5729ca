"""`memobench score` finds the workflow without assuming where the package is
installed: --workflow DIR, else $MEMOBENCH_WORKFLOW, else the current folder
or the nearest parent holding the project's Snakefile (beside
workflow/rules/), else one `memobench:` line saying how to point at it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO
from memobench.score_engine import WORKFLOW_ENV, ScoreError, find_workflow

NOT_CONFIGURED = "memobench: --dataset 'no-such-dataset' is not configured"


def _score(run, cwd, *args, env_workflow=None):
    """`memobench score` in ``cwd``, on a dataset no config has: it stops, in
    one line, right after reading the workflow's config (no Snakemake run)."""
    env = {k: v for k, v in os.environ.items() if k != WORKFLOW_ENV}
    env["PYTHONPATH"] = str(REPO / "src")
    if env_workflow is not None:
        env[WORKFLOW_ENV] = str(env_workflow)
    return subprocess.run([sys.executable, "-m", "memobench.cli", "score", str(run), "--dataset", "no-such-dataset",
                           *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def run(tmp_path):
    path = tmp_path / "theirs.trec"
    path.write_text("q Q0 s 1 1 theirs\n", encoding="utf-8")
    return path


def test_score_from_another_folder_with_workflow_or_its_variable(tmp_path, run):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for proc in (_score(run, elsewhere, "--workflow", str(REPO)), _score(run, elsewhere, env_workflow=REPO)):
        assert proc.returncode == 1
        assert proc.stderr.splitlines()[0].startswith(NOT_CONFIGURED), proc.stderr


def test_score_inside_the_checkout_finds_it_in_a_parent(run):
    proc = _score(run, REPO / "docs")
    assert proc.returncode == 1 and proc.stderr.splitlines()[0].startswith(NOT_CONFIGURED), proc.stderr


def test_score_without_a_workflow_says_how_to_point_at_it(tmp_path, run):
    proc = _score(run, tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"memobench: no memobench workflow in {tmp_path.resolve()} or a folder above it; run memobench score inside "
        f"the project's checkout, or point at it with --workflow DIR or {WORKFLOW_ENV}=DIR"]
    wrong = _score(run, tmp_path, "--workflow", str(tmp_path))
    assert wrong.returncode == 1
    assert wrong.stderr.splitlines() == [
        f"memobench: --workflow {tmp_path}: no memobench workflow there (a Snakefile beside workflow/rules/); "
        "give the folder of the project's checkout"]


def test_find_workflow_order(tmp_path):
    assert find_workflow(str(REPO), env={}) == REPO / "Snakefile"
    assert find_workflow(None, env={WORKFLOW_ENV: str(REPO)}, cwd=tmp_path) == REPO / "Snakefile"
    assert find_workflow(None, env={}, cwd=REPO / "workflow" / "rules") == REPO / "Snakefile"
    # --workflow wins over the variable, the variable over the current folder
    with pytest.raises(ScoreError, match=r"^--workflow "):
        find_workflow(str(tmp_path), env={WORKFLOW_ENV: str(REPO)}, cwd=REPO)
    with pytest.raises(ScoreError, match=rf"^\${WORKFLOW_ENV} "):
        find_workflow(None, env={WORKFLOW_ENV: str(tmp_path)}, cwd=REPO)
    (tmp_path / "Snakefile").write_text("")  # a Snakefile alone is not the project's
    with pytest.raises(ScoreError, match="no memobench workflow in"):
        find_workflow(None, env={}, cwd=tmp_path)


def test_an_mcp_server_whose_command_is_not_found_is_one_line_before_any_job(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "memobench.cli", "score", "--mcp", "no-such-memory-server --stdio",
                           "--dataset", "no-such-dataset"], cwd=REPO, capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "memobench: --mcp: the MCP server could not start: no-such-memory-server --stdio: 'no-such-memory-server' "
        "is not on PATH (activate the environment that has it, or give its full path)"], proc.stderr


def test_a_second_score_in_one_folder_waits_for_the_first(tmp_path, capsys):
    from memobench.score_engine import one_at_a_time

    # the first holds the folder in another process; the second waits, saying so, and runs once it ends
    held = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                             "from memobench.score_engine import one_at_a_time\n"
                             f"with one_at_a_time(Path({str(tmp_path)!r}), quiet=True):\n"
                             "    print('held', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert held.stdout.readline().strip() == "held"
    import threading
    import time

    started = time.monotonic()
    # the first ends 0.6 s from now, told on its stdin: however busy the machine, the second waits that long
    threading.Timer(0.6, held.stdin.close).start()
    with one_at_a_time(tmp_path):
        waited = time.monotonic() - started
    held.wait()
    assert waited > 0.5
    assert capsys.readouterr().err == f"memobench score: another memobench score runs in {tmp_path}; waiting for " \
                                      f"it to end\n"


def test_a_folder_another_snakemake_holds_is_one_line_not_unlock_advice(tmp_path):
    from memobench.score_engine import run_snakemake

    said = ("Error: Directory cannot be locked. Please make sure that no other Snakemake process is trying to "
            "create the same files in the following directory:")
    for quiet in (True, False):
        with pytest.raises(ScoreError) as e:
            run_snakemake([sys.executable, "-c", f"print({said!r}); raise SystemExit(1)"], quiet, tmp_path)
        assert str(e.value).startswith(f"another run holds {tmp_path} (a snakemake running there now); nothing was "
                                       f"run: score again when it has ended"), str(e.value)
