"""A newcomer's first hour: the
default profile, the .test/ configuration, the Slurm profile's site overlays,
the Slurm check's refusal line, `snakemake --report` on the plain install, and
how the tests find the real LoCoMo file."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import tomllib
from importlib import metadata

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import helpers
from tests.helpers import REPO, copy_project, snakemake, write_config
from memobench.datasets.download import verify
from memobench.tools.generate.longmemeval import write_longmemeval

DEFAULT_PROFILE = str(REPO / "workflow" / "profiles" / "default")


@pytest.fixture(scope="module")
def lme(tmp_path_factory):
    path = tmp_path_factory.mktemp("lme") / "mine.json"
    write_longmemeval(path, n_questions=12, sessions_per_question=6, seed=3)
    return path


def _lme_entry(path, urls=()):
    return {"format": "longmemeval", "family": "s", "file": path.name, "bytes": path.stat().st_size,
            "urls": list(urls), "segments": 1, "variants": ["v0.8.0"]}


def test_default_profile_sets_what_users_type_every_time():
    prof = yaml.safe_load((REPO / "workflow" / "profiles" / "default" / "config.yaml").read_text())
    assert prof["keep-going"] is True and prof["cores"] == "all" and prof["rerun-incomplete"] is True


def _slurm_dry_run(tmp_path, lme, site):
    data = tmp_path / "data"
    data.mkdir(parents=True)
    shutil.copy(lme, data / "mine.json")
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["mine"], datasets={"mine": _lme_entry(data / "mine.json")})
    proc = snakemake(tmp_path, "-n", "results/mine/v0.8.0/segments/seg1.parquet",
                     "--workflow-profile", str(REPO / "workflow/profiles/slurm"),
                     "--profile", str(REPO / "workflow/profiles/sites" / site), configfile=cfg)
    return (proc.stdout + proc.stderr).replace(" ", "")


def test_slurm_site_overlays_reach_the_jobs(tmp_path, lme):
    out = _slurm_dry_run(tmp_path / "a", lme, "no-accounting")
    assert "slurm_partition=main" in out and "slurm_account" not in out
    assert "rulenormalize:" in out and "mem_mb=4000" in out  # the shipped per-rule sizes still apply
    out = _slurm_dry_run(tmp_path / "b", lme, "accounting")
    assert "slurm_partition=main" in out and "slurm_account=myproject" in out


def test_slurm_check_refuses_in_one_line_unless_told_to_skip(monkeypatch, capsys):
    """Not root (as a CI runner or a laptop): one line; exit 0 only when told to skip."""
    spec = importlib.util.spec_from_file_location("slurm_check", REPO / ".ci" / "slurm_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    monkeypatch.setattr(check.os, "geteuid", lambda: 1000)
    monkeypatch.delenv("MEMOBENCH_SLURM_CHECK", raising=False)
    assert check.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("slurm-check: cannot run: not root")
    assert check.main(["--skip-unsupported"]) == 0
    assert capsys.readouterr().out == "slurm-check: skipped: not root (it needs root on Debian)\n"
    monkeypatch.setenv("MEMOBENCH_SLURM_CHECK", "skip")
    assert check.main([]) == 0


def test_dot_test_config_matches_its_committed_file():
    cfg = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    ds = cfg["datasets"]["lme_tiny"]
    verify(REPO / ".test" / "data" / ds["file"], ds["bytes"], ds["sha256"])
    assert set(cfg["run"]) == {"zh", "lme_tiny"} and not ds.get("urls")  # offline


# --- `snakemake --report` on the plain install (no test extra) -------------


def _closure(requirements) -> set[str]:
    """The distributions these requirement strings pull in, extras followed,
    as far as they are installed here (names canonicalized)."""
    seen: set[tuple[str, str]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        for extra in [""] + sorted(req.extras):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            try:
                requires = metadata.requires(req.name) or []
            except metadata.PackageNotFoundError:
                continue
            for r in map(Requirement, requires):
                if r.marker is None or r.marker.evaluate({"extra": extra}):
                    todo.append(r)
    return {name for name, _ in seen}


def test_the_report_needs_nothing_beyond_the_main_dependencies(tmp_path):
    """What Snakemake's HTML report needs (its own `reports` extra) comes with
    memobench's main dependencies, not only with the test extra (pytest pulls
    pygments in, which hid the gap); and the report of a small finished run
    is made."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    main = _closure(project["dependencies"])
    wanted = {canonicalize_name(r.name) for r in map(Requirement, metadata.requires("snakemake") or [])
              if r.marker is not None and r.marker.evaluate({"extra": "reports"})
              and not r.marker.evaluate({"extra": ""})}
    assert "pygments" in wanted  # what `--report` stopped on
    assert wanted | {"jinja2"} <= main, f"not in the main dependencies: {sorted(wanted | {'jinja2'} - main)}"
    cfg = write_config(tmp_path / "cfg.yaml", run=["zh"], datasets={"zh": {"variants": ["zh-B"]}})
    snakemake(tmp_path, "--cores", "2", configfile=cfg)
    proc = snakemake(tmp_path, "--report", str(tmp_path / "report.html"), configfile=cfg, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "hitk.png" in html and "report.md" in html


# --- how the tests find the real LoCoMo file (helpers.find_locomo) ---------

@pytest.fixture
def fake_locomo(tmp_path):
    """A config naming a small 'locomo10.json' served on 127.0.0.1, its data_dir empty."""
    body = b'[{"fake": "locomo"}]'
    root = tmp_path / "www"
    root.mkdir()
    (root / "locomo10.json").write_bytes(body)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/locomo10.json"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": "mydata", "datasets": {"locomo10": {
        "file": "locomo10.json", "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest(), "urls": [url]}}}))
    yield cfg, root, body
    server.shutdown()


def test_find_locomo_downloads_once_into_the_data_folder(tmp_path, fake_locomo):
    """Not placed: the pipeline's download puts it where the README says, once."""
    cfg, root, body = fake_locomo
    placed = tmp_path / "mydata" / "locomo10.json"
    path, how = helpers.find_locomo(cfg)
    assert path == placed and placed.read_bytes() == body and how == f"downloaded into {placed}"
    (root / "locomo10.json").unlink()  # the server no longer has it: the data folder answers
    assert helpers.find_locomo(cfg) == (placed, f"data_dir {placed}")


def test_find_locomo_uses_no_wrong_file_and_says_where_to_place_it(tmp_path, fake_locomo):
    cfg, root, body = fake_locomo
    placed = tmp_path / "mydata" / "locomo10.json"
    (root / "locomo10.json").write_bytes(body.upper())  # same size, other sha256
    path, how = helpers.find_locomo(cfg)
    assert path is None and "sha256 mismatch" in how and f"place it at {placed} ({len(body)} bytes" in how
    assert not placed.exists()  # a download that fails its check leaves nothing
    placed.parent.mkdir(exist_ok=True)
    placed.write_bytes(body.upper())  # a wrong file placed by hand is not used either
    path, how = helpers.find_locomo(cfg)
    assert path is None and "sha256 mismatch" in how and f"place it at {placed}" in how
    placed.write_bytes(body)
    assert helpers.find_locomo(cfg) == (placed, f"data_dir {placed}")


def test_skipped_exactness_tests_are_counted_at_the_end(tmp_path):
    """A clone where the file is not placed and cannot be downloaded (its URL
    refuses): the exactness tests are skipped, counted in one closing line
    that says where to place the file, inside the clone."""
    proj = copy_project(tmp_path / "proj", "tests", "pyproject.toml")
    config = yaml.safe_load((proj / "config.yaml").read_text(encoding="utf-8"))
    config["datasets"]["locomo10"]["urls"] = ["http://127.0.0.1:9/locomo10.json"]  # nothing listens on port 9
    (proj / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "tests/workflow/test_locomo.py", "-k", "not bad_config"],
                          capture_output=True, text=True, env=env, cwd=proj)
    last = [line for line in proc.stdout.splitlines() if line.startswith("memobench:")]
    assert len(last) == 1, proc.stdout[-3000:]
    n = int(last[0].split()[1])
    assert n > 0 and f"{n} skipped" in proc.stdout
    placed = proj / "data" / "locomo10.json"
    assert last[0].startswith(f"memobench: {n} exactness tests skipped (real LoCoMo file unavailable: ")
    assert last[0].endswith(f"place it at {placed} ({config['datasets']['locomo10']['bytes']} bytes, "
                            f"sha256 {config['datasets']['locomo10']['sha256']}))")
