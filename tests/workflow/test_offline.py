"""An offline first run: a download that fails does not stop the
datasets that are there; the report covers what ran and says how to get what
is missing; the exit status stays non-zero until nothing is; the next run
retries the download and runs only what was missing. Real HTTP on 127.0.0.1,
real Snakemake, no --keep-going."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from tests.helpers import REPO, dry_run_jobs, memobench_lines, snakemake, write_config
from memobench.datasets import missing
from memobench.tools.generate.cn import write_cn
from memobench.tools.generate.locomo import write_locomo
from memobench.tools.generate.longmemeval import write_longmemeval


# a progress line (memobench.core.progress): done[ / total] unit (share%, rate)
PROGRESS = re.compile(r": \d+(?: / \d+)? \w+ \((?:\d+%, )?[\d,.]+ (?:\w+|[KMG]iB|B)/s\)")


def _ends_with_our_lines(proc, n_missing: int) -> None:
    """The run ends with one `memobench:` line per missing dataset and a
    summary, after Snakemake's own lines, and no job-error block."""
    out = proc.stdout + proc.stderr
    last = proc.stderr.splitlines()[-(n_missing + 1):]
    assert all(ln.startswith("memobench: missing dataset ") for ln in last[:-1]), out[-3000:]
    assert last[-1].startswith(f"memobench: {n_missing} dataset(s) missing: "), out[-3000:]
    for noise in ("Error in rule", "CalledProcessError", "Exiting because a job execution failed", "WorkflowError",
                  "Traceback", "MissingInputException"):
        assert noise not in out, out[-3000:]


def _mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def offline_config(tmp_path, http_dir):
    """zh (embedded), `mine` (LongMemEval, downloadable from 127.0.0.1 once it
    is served) and `cn` (a hand-placed CN file searching mine's haystacks)."""
    www, base = http_dir
    src = tmp_path / "src"
    src.mkdir()
    lme = src / "mine.json"
    write_longmemeval(lme, n_questions=10, sessions_per_question=5, seed=11)
    data = tmp_path / "data"
    data.mkdir()
    cn = data / "cn.jsonl"
    write_cn(cn, lme, seed=2)
    sha = hashlib.sha256(lme.read_bytes()).hexdigest()
    url = f"{base}/mine.json"
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["zh", "mine", "cn"], datasets={
        "zh": {"variants": ["zh-B"]},
        "mine": {"format": "longmemeval", "family": "s", "file": "mine.json", "bytes": lme.stat().st_size,
                 "sha256": sha, "urls": [url], "segments": 1, "variants": ["v0.8.0"]},
        "cn": {"format": "longmemeval_cn", "family": "cn", "file": "cn.jsonl", "bytes": cn.stat().st_size,
               "haystacks_from": "mine", "segments": 1, "variants": ["cn-A"]},
    })
    return cfg, www, lme, sha, url, data


def test_offline_first_run_reports_what_it_could_do_then_a_rerun_completes(tmp_path, offline_config):
    cfg, www, lme, sha, url, data = offline_config
    results = tmp_path / "results"

    # 1. the server does not have the file (404): no --keep-going, yet zh runs to the end
    proc = snakemake(tmp_path, "--cores", "2", configfile=cfg, check=False)
    err = proc.stdout + proc.stderr
    assert proc.returncode != 0, err[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("memobench: missing dataset ")]
    assert len(lines) == 2, err[-3000:]  # one line per missing dataset
    assert lines[0].startswith("memobench: missing dataset mine: mine.json: could not download")
    assert f"at {data / 'mine.json'} and rerun" in lines[0] and url in lines[0] and sha in lines[0]
    assert lines[1].startswith("memobench: missing dataset cn: it searches the haystacks of mine")
    assert "Traceback" not in err
    _ends_with_our_lines(proc, 2)
    assert (results / "zh" / "zh-B" / "metrics.json").exists()
    assert not (results / "mine" / "v0.8.0").exists() and not (results / "cn" / "cn-A").exists()
    assert not (data / "mine.json").exists()
    record = json.loads((results / "datasets.json").read_text())
    assert record["run"] == ["zh", "mine", "cn"] and record["missing"] == ["mine", "cn"]
    assert record["lines"] == [ln.removeprefix("memobench: ") for ln in proc.stderr.splitlines()[-3:]]
    report = (results / "report.md").read_text()
    assert "## Missing datasets" in report and "| zh | zh-B |" in report
    row = next(ln for ln in report.splitlines() if ln.startswith("| mine | mine.json |"))
    assert f"| {data / 'mine.json'} | {lme.stat().st_size} | {sha} | {url} |" in row and "HTTP 404" in row
    assert any(ln.startswith("| cn | - |") and "haystacks of mine" in ln for ln in report.splitlines())
    assert "Missing datasets" in (results / "report.html").read_text()
    receipt = json.loads((results / "mine" / "raw.json").read_text())
    assert receipt["missing"] and receipt["file"] == str(data / "mine.json") and receipt["attempt"] == 1
    zh_before = _mtimes(results / "zh")

    # 2. the file is served now: the same command retries the download, says so, and runs only what was missing
    (www / "mine.json").write_bytes(lme.read_bytes())
    proc = snakemake(tmp_path, "--cores", "2", configfile=cfg, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert ("memobench: retrying the download of mine.json (attempt 2; last time: could not download "
            "(no network?): HTTP 404 File not found)") in proc.stderr.splitlines()
    assert "'retrying after': 'attempt 1: could not download (no network?): HTTP 404 File not found'" in proc.stderr
    assert "memobench: missing" not in proc.stderr
    assert (data / "mine.json").read_bytes() == lme.read_bytes()
    assert _mtimes(results / "zh") == zh_before  # nothing of zh ran again
    report = (results / "report.md").read_text()
    assert "Missing datasets" not in report and "| mine | v0.8.0 |" in report and "| cn | cn-A |" in report
    record = json.loads((results / "datasets.json").read_text())
    assert record["missing"] == [] and record["present"] == ["cn", "mine"] and record["lines"] == []
    receipt = json.loads((results / "mine" / "raw.json").read_text())
    assert "missing" not in receipt and receipt["attempt"] == 2  # the retry got it

    # every long stage logged how far it was, with a rate
    logs = results / "logs"
    for log in [logs / "verify" / "mine.log", logs / "normalize" / "mine.log", logs / "normalize" / "cn.log",
                *sorted((logs / "tokens" / "mine").glob("*.log")), logs / "retrieve" / "mine" / "v0.8.0" / "seg1.log",
                logs / "merge" / "mine" / "v0.8.0.log"]:  # (session_json runs only for a retrieval log)
        assert any(PROGRESS.search(line) for line in log.read_text().splitlines()), log

    # 3. nothing left to do
    assert dry_run_jobs(tmp_path, configfile=cfg) == {}


def test_a_hand_placed_file_completes_the_run_with_the_default_profile(tmp_path, http_dir):
    """Unreachable URL, --workflow-profile default (keep-going): exit 1 with the
    line; the file placed by hand and the same command: exit 0, nothing more to do."""
    _, base = http_dir
    lme = tmp_path / "mine.json"
    write_longmemeval(lme, n_questions=6, sessions_per_question=4, seed=5)
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["mine"], datasets={
        "mine": {"format": "longmemeval", "family": "s", "file": "mine.json", "bytes": lme.stat().st_size,
                 "urls": [f"{base}/nowhere/mine.json"], "segments": 1, "variants": ["v0.8.0"]}})
    profile = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default"), "--cores", "2"]
    proc = snakemake(tmp_path, *profile, configfile=cfg, check=False)
    assert proc.returncode != 0
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("memobench: missing dataset")] == [
        f"memobench: missing dataset mine: mine.json: could not download (no network?): tried "
        f"{base}/nowhere/mine.json (HTTP 404 File not found). Place the file ({lme.stat().st_size} bytes) "
        f"at {data / 'mine.json'} and rerun."]
    assert "| mine | mine.json |" in (tmp_path / "results" / "report.md").read_text()
    # a second offline run retries and still says so
    assert dry_run_jobs(tmp_path, *profile, configfile=cfg).get("download") == 1
    os.replace(lme, data / "mine.json")
    snakemake(tmp_path, *profile, configfile=cfg)
    assert (tmp_path / "results" / "mine" / "v0.8.0" / "metrics.json").exists()
    assert dry_run_jobs(tmp_path, *profile, configfile=cfg) == {}


def test_the_exit_status_tells_the_truth_whatever_ran_before(tmp_path, http_dir):
    """Offline, only LoCoMo placed by hand: the default run fails with the
    lines; a run of `run: [locomo10]` (the README's tip) succeeds; the default
    run after it fails again, and every time, with the lines, and
    results/datasets.json says so each time."""
    _, base = http_dir
    data = tmp_path / "data"
    data.mkdir()
    locomo = data / "locomo10.json"
    write_locomo(locomo, n_conversations=2, seed=4, sessions=(3, 4), turns=(4, 6), qa_per_conversation=(5, 8))
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["longmemeval_s", "locomo10", "longmemeval_cn"],
                       datasets={
        "locomo10": {"bytes": locomo.stat().st_size, "sha256": hashlib.sha256(locomo.read_bytes()).hexdigest(),
                     "urls": [], "variants": ["v0.8.0"]},
        "longmemeval_s": {"urls": [f"{base}/nowhere/longmemeval_s"], "segments": 1, "variants": ["v0.8.0"]},
        "longmemeval_cn": {"urls": [f"{base}/nowhere/results.jsonl"], "variants": ["cn-A"]}})
    only_locomo = write_config(tmp_path / "mine.yaml", run=["locomo10"])
    results = tmp_path / "results"

    def default_run(expect):
        proc = snakemake(tmp_path, "--cores", "2", configfile=cfg, check=False)
        assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
        _ends_with_our_lines(proc, 2)
        lines = proc.stderr.splitlines()[-3:]
        assert lines[0].startswith("memobench: missing dataset longmemeval_s: longmemeval_s.json: could not "
                                   f"download (no network?): tried {base}/nowhere/longmemeval_s (HTTP 404")
        assert f"at {data / 'longmemeval_s.json'} and rerun." in lines[0]
        assert lines[1].startswith("memobench: missing dataset longmemeval_cn: lmcn_results.jsonl: could not")
        record = json.loads((results / "datasets.json").read_text())
        assert record["missing"] == ["longmemeval_s", "longmemeval_cn"] and record["present"] == ["locomo10"]
        assert record["run"] == ["longmemeval_s", "locomo10", "longmemeval_cn"]
        assert record["lines"] == [ln.removeprefix("memobench: ") for ln in lines]
        assert "## Missing datasets" in (results / "report.md").read_text()
        assert json.loads((results / "longmemeval_s" / "raw.json").read_text())["attempt"] == expect

    default_run(expect=1)
    proc = snakemake(tmp_path, "--cores", "2", "--configfile", str(cfg), str(only_locomo), check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "memobench: missing" not in proc.stderr
    assert json.loads((results / "datasets.json").read_text()) == {"run": ["locomo10"], "present": ["locomo10"],
                                                                   "missing": [], "lines": []}
    assert "Missing datasets" not in (results / "report.md").read_text()
    default_run(expect=2)  # it used to exit 0 here, and on every later run
    default_run(expect=3)


def test_a_run_where_nothing_is_there_says_so(tmp_path, http_dir):
    """Offline with only a missing dataset in the run: the summary says that
    nothing ran (there are no others for the report to cover), and the report
    it names is there and says how to get the file."""
    _, base = http_dir
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path / "data"), run=["mine"], datasets={
        "mine": {"format": "longmemeval", "family": "s", "file": "mine.json", "bytes": 10,
                 "urls": [f"{base}/mine.json"], "segments": 1, "variants": ["v0.8.0"]}})
    proc = snakemake(tmp_path, "--cores", "1", configfile=cfg, check=False)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    _ends_with_our_lines(proc, 1)
    last = proc.stderr.splitlines()[-1]
    assert "covers the others" not in last and "so nothing ran" in last, last
    report = (tmp_path / "results" / "report.md").read_text()
    assert "## Missing datasets" in report and "| mine | mine.json |" in report


def test_a_target_of_a_missing_dataset_fails_in_one_line(tmp_path, http_dir):
    """README "Running one segment" for a dataset that is not there: one line
    with what to place where, no MissingInputException; placed, it runs."""
    www, base = http_dir
    lme = tmp_path / "mine.json"
    write_longmemeval(lme, n_questions=4, sessions_per_question=3, seed=8)
    sha = hashlib.sha256(lme.read_bytes()).hexdigest()
    data = tmp_path / "data"
    url = f"{base}/mine.json"
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["mine"], datasets={
        "mine": {"format": "longmemeval", "family": "s", "file": "mine.json", "bytes": lme.stat().st_size,
                 "sha256": sha, "urls": [url], "segments": 2, "variants": ["v0.8.0"]}})
    target = "results/mine/v0.8.0/segments/seg2.parquet"
    for _ in range(2):  # a first try and a retry
        proc = snakemake(tmp_path, "--cores", "1", target, configfile=cfg, check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, out[-3000:]
        assert [ln for ln in proc.stderr.splitlines() if ln.startswith("memobench: missing dataset")] == [
            f"memobench: missing dataset mine: mine.json: could not download (no network?): tried {url} "
            f"(HTTP 404 File not found). Place the file ({lme.stat().st_size} bytes, sha256 {sha}) at "
            f"{data / 'mine.json'} and rerun."], out[-3000:]
        assert "MissingInputException" not in out and "goes on" not in out and "Traceback" not in out
    os.replace(lme, data / "mine.json")
    snakemake(tmp_path, "--cores", "1", target, configfile=cfg)
    assert (tmp_path / target).exists()


@pytest.mark.parametrize("variant, line", [
    ({"run": {"file": "no/such.trec", "format": "trec"}},
     "config: variants.gone: no/such.trec: no such file (relative paths start from the working directory, {work}); "
     "give the run file's path"),
    ({"retriever": {"callable": "no_such.py:rank"}},
     "config: dataset 'mine': variant 'gone': no file no_such.py (looked for {work}/no_such.py)"),
])
def test_a_config_error_comes_before_any_job_whatever_the_data(tmp_path, http_dir, variant, line):
    """A variant's file missing, in a dataset still to download: the line
    comes before the download job (its input functions ran only after it)."""
    www, base = http_dir
    lme = www / "mine.json"
    write_longmemeval(lme, n_questions=4, sessions_per_question=3, seed=8)
    work = tmp_path / "work"
    work.mkdir()
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path / "data"), run=["mine"], datasets={
        "mine": {"format": "longmemeval", "family": "s", "file": "mine.json", "bytes": lme.stat().st_size,
                 "urls": [f"{base}/mine.json"], "segments": 1, "variants": ["v0.8.0", "gone"]}},
        variants={"gone": variant})
    proc = snakemake(work, "--cores", "1", configfile=cfg, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert memobench_lines(proc.stderr) == [
        "memobench: " + line.format(work=work).replace("variants.gone:", "variants.gone.run.file:")], out[-3000:]
    assert "rule download" not in out and "Error in rule" not in out and "Traceback" not in out, out[-3000:]
    assert not (tmp_path / "data" / "mine.json").exists() and not (work / "results").exists()


# --- the package side (memobench.datasets.missing) -----------------------------------


def test_missing_datasets_include_those_that_need_them_and_say_how_to_get_them(tmp_path):
    gone = missing.missing_receipt(tmp_path / "s.json", "s.json: could not download (no network?): tried u (x). "
                                   "Place the file (5 bytes) at /d/s.json and rerun.", 5, "ab" * 32, ["u"],
                                   {"download attempt": 1}, brief="could not download (no network?): x")
    found = missing.find_missing({"s": gone, "m": {"file": "/d/m.json", "attempt": 1}}, {"cn": "s", "cn2": "m"})
    assert list(found) == ["s", "cn"] and found["cn"] == {"needs": "s"}
    md = missing.markdown(found)
    assert f"| s | s.json | {tmp_path / 's.json'} | 5 | {'ab' * 32} | u | could not download (no network?): " \
           f"tried u (x). |" in md
    assert missing.markdown({}) == ""
    assert missing.end_lines(found, ["m"]) == [
        f"missing dataset s: {gone['missing']}",
        "missing dataset cn: it searches the haystacks of s, which is missing; it runs once s is there",
        "2 dataset(s) missing: s, cn; results/report.md covers the others and says how to get these; "
        "rerun the same command once they are there"]
    assert missing.end_lines({}, ["m"]) == []
    # nothing else in the run: no "others" for the report to cover
    record = missing.datasets_record(["s", "cn"], {"s": gone}, {"cn": "s"})
    assert record["present"] == [] and record["lines"][-1] == (
        "2 dataset(s) missing: s, cn; none of the run's datasets is there, so nothing ran; results/report.md says "
        "how to get them; rerun the same command once they are there")


def test_the_attempt_param_counts_retries_and_says_why_in_words():
    first = missing.attempt_param(None)
    assert first == {"download attempt": 1} and missing.retry_line("s.json", first) is None
    failed = missing.missing_receipt("/d/s.json", "long message", 5, None, [], first, brief="could not download: x")
    retry = missing.attempt_param(failed)
    assert retry == {"download attempt": 2, "retrying after": "attempt 1: could not download: x"}
    assert missing.retry_line("s.json", retry) == ("retrying the download of s.json (attempt 2; last time: "
                                                   "could not download: x)")
    # the file got by the retry: the same param from then on, so nothing reruns
    got = missing.present_receipt("/d/s.json", retry)
    assert missing.attempt_param(got) == retry
    assert missing.attempt_param(missing.present_receipt("/d/s.json", first)) == first
    # a receipt of an older version (no brief reason, no retry record)
    assert missing.attempt_param({"missing": "m", "attempt": 3}) == {"download attempt": 4,
                                                                      "retrying after": "attempt 3: m"}
