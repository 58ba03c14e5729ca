"""The retrieval log (about the raw file's size per variant) is made only
where asked, through real Snakemake runs: the default run makes none (nor the
sessions' JSON it joins); ``exports.retrieval_log`` in the config makes the
listed ones, and adding one reruns its job alone; asking for a log's path
makes it without a config edit, and later runs keep a log that is there up
to date; the bytes are those the merge job used to write (official metrics
and haystacks computed once, the same function)."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import REPO, data_dir, dry_run_jobs, memobench_lines, snakemake, write_config
from memobench.evaluation import exports, official
from memobench.core.config import retrieval_log_pairs, validate
from memobench.core.errors import ConfigError
from memobench.tools.generate.longmemeval import write_longmemeval

VARIANTS = ["v0.8.0", "v0.8.0-index", "exp4-A0-base"]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _config(root, raw, name="cfg", **extra):
    """A LongMemEval dataset g (2 segments) and the embedded zh set, plus ``extra`` keys."""
    data = root / "data" if (root / "data" / raw.name).exists() else data_dir(root, raw)
    ds = {"format": "longmemeval", "family": "s", "file": raw.name, "bytes": raw.stat().st_size, "urls": [],
          "segments": 2, "variants": VARIANTS}
    return write_config(root / f"{name}.yaml", data_dir=str(data), run=["g", "zh"],
                        datasets={"g": ds, "zh": {"format": "embedded", "family": "zh", "variants": ["zh-A"]}},
                        **extra)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A default run (no exports configured): the state every test copies."""
    root = tmp_path_factory.mktemp("ondemand")
    raw = root / "g.json"
    # repeated session ids and the generator's edge cases: the log's hardest inputs
    write_longmemeval(raw, n_questions=24, sessions_per_question=10, seed=8, spice=True, repeat_ids=0.3)
    cfg = _config(root, raw)
    work = root / "work"
    snakemake(work, "--cores", "2", configfile=cfg)
    return root, raw, cfg, work


def _copy(built, dest):
    """The built run in another folder (times kept, Snakemake's records too)."""
    root, raw, cfg, work = built
    shutil.copytree(work, dest / "work", symlinks=True)
    return dest / "work"


def _logs(results):
    return sorted(str(p.relative_to(results)) for p in results.rglob("retrievallog.jsonl"))


def _merge_job_bytes(results, variant) -> bytes:
    """The retrieval log as the merge job wrote it before it became a rule of
    its own: official.compute once, its rows and haystacks handed on."""
    norm = results / "g" / "normalized"
    tables = (norm / "questions.parquet", norm / "haystacks.parquet", norm / "events.parquet",
              results / "g" / variant / "deep.parquet")
    hay: dict = {}
    _, rows = official.compute("longmemeval", *tables, log=lambda m: None, haystacks_out=hay)
    out = results.parent / f"{variant}.merge-job.jsonl"
    exports.write_retrievallog("longmemeval", *tables, out, results / "g" / "exports" / "sessions.bin",
                               log=lambda m: None, rows=rows, haystacks=hay)
    return out.read_bytes()


def test_the_default_run_makes_no_retrieval_log_and_no_session_json(built):
    _, _, cfg, work = built
    results = work / "results"
    assert (results / "g" / "v0.8.0" / "official.json").exists() and (results / "g" / "v0.8.0" / "run.trec").exists()
    assert _logs(results) == []
    assert not (results / "g" / "exports").exists()
    assert not (results / "logs" / "session_json").exists() and not (results / "logs" / "retrievallog").exists()
    assert dry_run_jobs(work, configfile=cfg) == {}


def test_listing_a_log_in_the_config_runs_only_its_job(built, tmp_path):
    root, raw, _, _ = built
    work = _copy(built, tmp_path)
    results = work / "results"
    # every file a job writes (the run plan in cache/ is written at each start)
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*")
              if p.is_file() and not {"cache", "logs"} & set(p.relative_to(results).parts)}
    cfg = _config(root, raw, "one", exports={"retrieval_log": ["g/v0.8.0"]})
    assert dry_run_jobs(work, configfile=cfg) == {"session_json": 1, "retrievallog": 1, "all": 1}
    snakemake(work, "--cores", "2", configfile=cfg)
    assert _logs(results) == ["g/v0.8.0/retrievallog.jsonl"]
    # nothing else was rewritten
    assert {p: p.stat().st_mtime_ns for p in before if p.exists()} == before
    assert (results / "g" / "v0.8.0" / "retrievallog.jsonl").read_bytes() == _merge_job_bytes(results, "v0.8.0")
    assert dry_run_jobs(work, configfile=cfg) == {}
    # a glob adds the others; the sessions' JSON is not made again
    cfg = _config(root, raw, "all", exports={"retrieval_log": ["*/v0.8.*", "g/exp4-*"]})
    assert dry_run_jobs(work, configfile=cfg) == {"retrievallog": 2, "all": 1}
    snakemake(work, "--cores", "2", configfile=cfg)
    assert _logs(results) == sorted(f"g/{v}/retrievallog.jsonl" for v in VARIANTS)
    for v in VARIANTS:
        assert (results / "g" / v / "retrievallog.jsonl").read_bytes() == _merge_job_bytes(results, v), v
    # dropping them from the config reruns nothing (the files stay, kept up to date)
    assert dry_run_jobs(work, configfile=_config(root, raw, "none")) == {}
    # a deleted listed log is made again, byte for byte
    kept = (results / "g" / "exp4-A0-base" / "retrievallog.jsonl").read_bytes()
    (results / "g" / "exp4-A0-base" / "retrievallog.jsonl").unlink()
    assert dry_run_jobs(work, configfile=cfg) == {"retrievallog": 1, "all": 1}
    snakemake(work, "--cores", "2", configfile=cfg)
    assert (results / "g" / "exp4-A0-base" / "retrievallog.jsonl").read_bytes() == kept


def test_asking_for_a_log_makes_it_without_a_config_edit(built, tmp_path):
    _, _, cfg, _ = built
    work = _copy(built, tmp_path)
    results = work / "results"
    target = "results/g/v0.8.0-index/retrievallog.jsonl"
    assert dry_run_jobs(work, target, configfile=cfg) == {"session_json": 1, "retrievallog": 1}
    snakemake(work, "--cores", "2", target, configfile=cfg)
    assert _logs(results) == ["g/v0.8.0-index/retrievallog.jsonl"]
    assert (results / target[len("results/"):]).read_bytes() == _merge_job_bytes(results, "v0.8.0-index")
    # the default target keeps it: up to date, so nothing to do; remade when its variant reruns
    assert dry_run_jobs(work, configfile=cfg) == {}
    jobs = dry_run_jobs(work, "--forcerun", "merge", configfile=cfg)
    assert jobs["merge"] == len(VARIANTS) + 1 and jobs["retrievallog"] == 1, jobs
    # deleted (not listed), it is gone for good
    (results / target[len("results/"):]).unlink()
    assert dry_run_jobs(work, configfile=cfg) == {}


def test_a_log_of_another_format_or_an_unknown_variant_fails_in_one_line(built, tmp_path):
    _, _, cfg, work = built
    for target, why in (("results/zh/zh-A/retrievallog.jsonl", "dataset 'zh' has format 'embedded'"),
                        ("results/g/nope/retrievallog.jsonl", "variant 'nope' is not listed")):
        proc = snakemake(work, "-n", target, configfile=cfg, check=False)
        lines = memobench_lines((proc.stdout + proc.stderr))
        assert proc.returncode != 0 and len(lines) == 1 and why in lines[0], (target, proc.stderr[-2000:])


def test_a_bad_pattern_stops_the_run_before_any_job(built, tmp_path):
    _, raw, _, _ = built
    cfg = _config(tmp_path, raw, exports={"retrieval_log": ["g/v0.8.0", "g/v9*"]})
    proc = snakemake(tmp_path / "w", "-n", configfile=cfg, check=False)
    lines = memobench_lines((proc.stdout + proc.stderr))
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert "exports.retrieval_log: 'g/v9*' matches no configured variant" in lines[0], lines[0]
    assert not (tmp_path / "w" / "results").exists()


@pytest.mark.parametrize("pattern,why", [
    ("g", "'g' is not valid: 'g' does not match"),  # the schema: dataset/variant
    ("g/v0.8.0/x", "does not match"),
    ("zh/*", "'zh/*' matches only variants of datasets of format embedded"),
])
def test_the_schema_and_the_check_name_a_bad_pattern(pattern, why):
    cfg = {"data_dir": "data", "datasets": {"g": {"format": "longmemeval", "file": "g.json", "bytes": 1,
                                                  "variants": ["v0.8.0"]},
                                            "zh": {"format": "embedded", "variants": ["zh-A"]}},
           "exports": {"retrieval_log": [pattern]}}
    with pytest.raises(ConfigError, match=r"exports\.retrieval_log") as e:
        validate(cfg, SCHEMA)
        retrieval_log_pairs(cfg)
    assert why in str(e.value), str(e.value)


def test_retrieval_log_pairs():
    cfg = {"datasets": {
        "s": {"format": "longmemeval", "variants": ["v0.8.0", "exp-V1", "v0.8.0-index"]},
        "cn": {"format": "longmemeval_cn", "variants": ["cn-A"]},
        "lo": {"format": "locomo", "variants": ["v0.8.0"]}}}
    assert retrieval_log_pairs(cfg) == []
    assert retrieval_log_pairs({**cfg, "exports": {}}) == []
    cfg["exports"] = {"retrieval_log": ["*/v0.8.0*", "s/v0.8.0", "c?/[a-c]*"]}
    # configured order, once each; the LoCoMo variant is not a LongMemEval log
    assert retrieval_log_pairs(cfg) == [("s", "v0.8.0"), ("s", "v0.8.0-index"), ("cn", "cn-A")]
    cfg["exports"] = {"retrieval_log": ["*/*"]}
    assert retrieval_log_pairs(cfg) == [("s", "v0.8.0"), ("s", "exp-V1"), ("s", "v0.8.0-index"), ("cn", "cn-A")]
    # each side on its own: a '*' never reaches across the '/'
    cfg["exports"] = {"retrieval_log": ["s*/*1"]}
    assert retrieval_log_pairs(cfg) == [("s", "exp-V1")]
    cfg["exports"] = {"retrieval_log": ["lo/*"]}
    with pytest.raises(ConfigError, match="matches only variants of datasets of format locomo"):
        retrieval_log_pairs(cfg)

