"""Results you can trust: names that cannot mislabel or escape,
targets that run or fail in one line, raw-file replacement noticed without a
flag, empty lists visible, provenance recorded, environment failures told
apart from bugs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.helpers import dry_run_jobs, memobench_lines, snakemake, write_config
from memobench.tools.generate.longmemeval import write_longmemeval

ONE_LINE_NO_TRACEBACK = "Traceback"


def _lme(path, **kw):
    write_longmemeval(path, n_questions=kw.pop("n", 8), sessions_per_question=kw.pop("spq", 5), seed=3, **kw)
    return path


def _ds(path, **over):
    return {"format": "longmemeval", "family": "s", "file": str(path), "bytes": path.stat().st_size,
            "segments": 1, "variants": ["v0.8.0"], **over}


def _fails_with(tmp_path, cfg, *targets, expect: str):
    proc = snakemake(tmp_path, "-n", *targets, configfile=cfg, check=False)
    err = proc.stdout + proc.stderr
    assert proc.returncode != 0
    lines = memobench_lines(err)
    assert lines and expect in lines[0], err[-2000:]
    assert ONE_LINE_NO_TRACEBACK not in err and "Exception" not in err, err[-2000:]


# --------------------------------------------------------------------------- names


def test_user_variant_cannot_shadow_a_builtin(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=["zh"],
                       datasets={"zh": {"variants": ["zh-A"]}}, variants={"zh-A": {"base": "zh-B"}})
    _fails_with(tmp_path, cfg, expect="cannot take the name of a built-in")


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", "normalized"])
def test_unsafe_variant_names_are_refused(tmp_path, name):
    cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=["zh"],
                       datasets={"zh": {"variants": [name]}}, variants={name: {"base": "zh-B"}})
    _fails_with(tmp_path, cfg, expect="is not allowed")


@pytest.mark.parametrize("name", ["../evil", "x/y", ".x"])
def test_unsafe_dataset_names_are_refused(tmp_path, name):
    cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=[name],
                       datasets={name: {"format": "embedded", "variants": ["zh-A"]}})
    _fails_with(tmp_path, cfg, expect="dataset name may hold only")


def test_relative_file_must_stay_inside_data_dir(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=["x"],
                       datasets={"x": {"format": "locomo", "file": "../../etc/passwd", "bytes": 10}})
    _fails_with(tmp_path, cfg, expect="leaves data_dir")


def test_haystacks_from_must_name_a_longmemeval_dataset(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=["cn"],
                       datasets={"cn": {"format": "longmemeval_cn", "file": "cn.jsonl", "bytes": 10,
                                        "haystacks_from": "locomo10", "variants": ["cn-A"]}})
    _fails_with(tmp_path, cfg, expect="haystacks_from must name a longmemeval-format dataset")


def test_unknown_recipe_value_is_refused(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=["zh"],
                       datasets={"zh": {"variants": ["mine"]}},
                       variants={"mine": {"base": "zh-B", "recipe": {"window": "nope"}}})
    _fails_with(tmp_path, cfg, expect="window")


# --------------------------------------------------------------------------- targets


def test_targets_that_cannot_run_fail_in_one_line(tmp_path):
    lme = _lme(tmp_path / "lme.json")
    cfg = write_config(tmp_path / "c.yaml", data_dir=str(tmp_path), run=["my_s", "none"],
                       datasets={"my_s": _ds(lme, segments=2), "none": _ds(lme, variants=[])})
    _fails_with(tmp_path, cfg, "results/none/v0.8.0/rankings.parquet", expect="is not listed for dataset 'none'")
    _fails_with(tmp_path, cfg, "results/my_s/v0.5.0/metrics.json", expect="variant 'v0.5.0' is not listed")
    _fails_with(tmp_path, cfg, "results/my_s/v0.8.0/segments/seg3.parquet", expect="has 2 segment(s)")
    _fails_with(tmp_path, cfg, "results/other/v0.8.0/rankings.parquet", expect="dataset 'other' is not configured")


# --------------------------------------------------------------------------- raw files


def test_replacing_a_raw_file_reruns_verify_and_what_follows(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    raw = _lme(data / "lme.json")
    cfg = write_config(tmp_path / "c.yaml", data_dir=str(data), run=["lme"],
                       datasets={"lme": {**_ds(raw), "file": "lme.json"}})
    snakemake(tmp_path, "--cores", "2", configfile=cfg)
    assert dry_run_jobs(tmp_path, configfile=cfg) == {}
    first = json.loads((tmp_path / "results/lme/verified.json").read_text())
    # no sha256 configured: verify checks the byte count, the manifest records the hash
    assert first["sha256"] is None and first["sha256_checked"] is False
    (first_entry,) = json.loads((tmp_path / "results/manifest.json").read_text())["files"]
    assert first_entry["sha256"] == hashlib.sha256(raw.read_bytes()).hexdigest()

    # another file of exactly the same size (one letter changed), old mtime kept
    blob = bytearray(raw.read_bytes())
    i = blob.index(b'"content": "') + len(b'"content": "')
    blob[i] = ord("Z") if blob[i] != ord("Z") else ord("Y")
    stat = raw.stat()
    replacement = data / "new.json"
    replacement.write_bytes(bytes(blob))
    os.replace(replacement, raw)
    os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    jobs = dry_run_jobs(tmp_path, configfile=cfg)
    assert {"verify", "normalize", "retrieve", "merge", "report"} <= set(jobs), jobs
    assert "download" not in jobs

    snakemake(tmp_path, "--cores", "2", configfile=cfg)
    second = json.loads((tmp_path / "results/lme/verified.json").read_text())
    assert second["stamp"] != first["stamp"] and raw.exists()
    (second_entry,) = json.loads((tmp_path / "results/manifest.json").read_text())["files"]
    assert second_entry["sha256"] == hashlib.sha256(bytes(blob)).hexdigest() != first_entry["sha256"]
    # a forced rerun of everything never deletes the raw file
    snakemake(tmp_path, "--cores", "2", "--forceall", configfile=cfg)
    assert raw.read_bytes() == bytes(blob)


def test_the_manifest_hashes_only_the_file_verify_accepted(tmp_path):
    """A raw file replaced between verify and the manifest job (same size) is
    never hashed into the manifest as if accepted: the job fails in one line."""
    from memobench.datasets.download import DownloadError
    from memobench.core.provenance import file_stamp
    from memobench.stages.manifest import _accepted_sha256

    raw = tmp_path / "lme.json"
    raw.write_bytes(b"[1, 2, 3]")
    entry = {"dataset": "lme", "file": str(raw), "bytes": 9, "sha256": None, "sha256_checked": False,
             "stamp": file_stamp(raw)}
    assert _accepted_sha256(entry, log=None) == hashlib.sha256(b"[1, 2, 3]").hexdigest()
    replacement = tmp_path / "new.json"
    replacement.write_bytes(b"[1, 2, 4]")
    os.replace(replacement, raw)  # another inode
    with pytest.raises(DownloadError, match=r"^lme.json: changed since verify accepted it .*; run again to verify it$"):
        _accepted_sha256(entry, log=None)


# --------------------------------------------------------------------------- results


def test_empty_lists_and_provenance_are_visible(tmp_path):
    items = [{
        "question_id": f"q{i}", "question_type": "single-session-user", "question": question,
        "answer": "x", "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/20 (Sat) 10:00", "2023/05/21 (Sun) 10:00"],
        "haystack_session_ids": ["answer_a", "s_b"], "answer_session_ids": ["answer_a"],
        "haystack_sessions": [[{"role": "user", "content": "I adopted a cat named Miso", "has_answer": True}],
                              [{"role": "user", "content": "The weather was rainy"}]],
    } for i, question in enumerate(["What is the name of my cat?", "Zyxwv qwertz plonk?"])]
    raw = tmp_path / "tiny.json"
    raw.write_text(json.dumps(items), encoding="utf-8")
    cfg = write_config(tmp_path / "c.yaml", data_dir=str(tmp_path), run=["tiny"], datasets={"tiny": _ds(raw)})
    snakemake(tmp_path, "--cores", "1", configfile=cfg)
    out = tmp_path / "results/tiny/v0.8.0"
    q = pq.read_table(out / "outcomes.parquet").to_pylist()
    ranked = pq.read_table(out / "rankings.parquet").column("question_id").to_pylist()
    assert [r["question_id"] for r in q] == ["q0", "q1"]
    by_id = {r["question_id"]: r for r in q}
    assert by_id["q1"]["status"] == "evaluated" and by_id["q1"]["n_ranked"] == 0 and "q1" not in ranked
    assert by_id["q0"]["n_ranked"] == ranked.count("q0") > 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["empty_lists"] == 1
    import sqlite3

    assert m["provenance"]["sqlite"] == sqlite3.sqlite_version and m["provenance"]["fts5"] is True
    manifest = json.loads((tmp_path / "results/manifest.json").read_text())
    assert manifest["provenance"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert "## Provenance" in (tmp_path / "results/report.md").read_text()


# --------------------------------------------------------------------------- environment


def test_disk_full_is_one_line_with_advice(tmp_path):
    # the adapter the workflow uses, with a stage that writes to a full device
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from memobench.stages import run_logged\n"
            "def fill(job):\n    f = open('/dev/full', 'w'); f.write('x' * 100000); f.flush()\n"
            "run_logged(sys.argv[2], fill, {}, {}, {}, {})\n")
    proc = subprocess.run([sys.executable, "-c", code, str(_src()), str(tmp_path / "log.txt")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "no space left on device" in proc.stderr
    assert "internal error" not in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only folder needs root")
def test_read_only_results_folder_is_one_line_with_advice(tmp_path):
    work = tmp_path / "work"
    (work / "results").mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(work / "results")],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        cfg = write_config(tmp_path / "c.yaml", data_dir="data", run=["zh"], datasets={"zh": {"variants": ["zh-A"]}})
        proc = snakemake(work, "--cores", "1", configfile=cfg, check=False)
    finally:
        subprocess.run(["umount", str(work / "results")], check=True)
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "internal error" not in err
    assert "Read-only file system" in err or "not writable" in err, err[-3000:]


def _src():
    from tests.helpers import REPO

    return REPO / "src"
