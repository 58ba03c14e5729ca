"""One source of truth: the recipe registry against every place a
recipe value appears, and the rule/stage adapter's name check."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.helpers import REPO
from memobench.memo import engine, recipe, tokenize
from memobench.core.errors import ConfigError
from memobench.stages import all_stages, check_names
from memobench.catalog import registry
from memobench.catalog.variants import known_variants, resolve

STAGES = all_stages()


def test_schema_recipe_block_is_the_registry():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text(encoding="utf-8"))
    block = schema["properties"]["variants"]["additionalProperties"]["properties"]["recipe"]
    assert block == registry.recipe_schema()


def test_engine_tables_hold_exactly_the_registry_values():
    choices = {name: set(f.metadata["choices"] or ()) for name, f in recipe.FIELDS.items()}
    assert not choices["backend"]  # the catalog's (test_reference_backends_are_the_catalogs_rows)
    assert choices["weights"] == set(engine.WEIGHTS)
    assert choices["window"] == set(tokenize.WINDOWS)
    assert choices["stop"] == set(tokenize.STOP_LISTS)
    assert choices["seq"] == set(tokenize.SEQ)


def test_docs_recipe_table_is_the_generated_one():
    doc = (REPO / "docs" / "variants.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- recipe-table:start[^\n]*-->\n(.*?)<!-- recipe-table:end -->", doc, re.S)
    assert block and block.group(1) == registry.recipe_table()


def test_tokenizer_wildcard_comes_from_the_registry():
    common = (REPO / "workflow/rules/common.smk").read_text(encoding="utf-8")
    assert 'tokenizer="|".join([*FIELDS["seq"].metadata["choices"], FTS5_TOKENS])' in common
    assert "ascii|cjkr" not in common


def test_every_builtin_recipe_passes_the_registry():
    for family in ("s", "m", "locomo", "cn", "zh"):
        for name in known_variants():
            try:
                v = resolve(name, family)
            except ConfigError:
                continue
            for field, value in vars(v.recipe).items():
                assert registry.check_value(field, value) is None, (name, field, value)


@pytest.mark.parametrize("field,value,why", [
    ("window", "nope", "is not one of"), ("fts_limit", 0, "below 1"), ("pairs", "yes", "takes a boolean"),
    ("page", True, "takes a integer"), ("colour", "red", "unknown recipe field"),
])
def test_resolve_validates_every_field(field, value, why):
    with pytest.raises(ConfigError, match=why):
        resolve("mine", "s", {"mine": {"base": "v0.8.0", "recipe": {field: value}}})


def test_analyze_rule_reads_the_package_recipe():
    common = (REPO / "workflow/rules/common.smk").read_text(encoding="utf-8")
    assert "ANALYZE_RECIPE.seq" in common and '{"seq": "ascii"' not in common


def test_every_rule_runs_a_registered_stage_and_every_stage_has_a_rule():
    """Each rule's command runs the stage of its own name, with its job in the
    one params entry the command reads (common.smk: stage_command, stage_params)."""
    rules = set()
    for f in (REPO / "workflow/rules").glob("*.smk"):
        text = f.read_text(encoding="utf-8")
        blocks = re.split(r"^(?=(?:rule|checkpoint|use rule) )", text, flags=re.M)
        for block in blocks:
            m = re.match(r"(?:rule|checkpoint) (\w+):", block)
            if m is None:
                assert not block.startswith("use rule"), f"{f.name}: a rule made with `use rule` runs another's stage"
                continue
            name = m.group(1)
            rules.add(name)
            assert f'    shell:\n        stage_command("{name}")\n' in block, (f.name, name)
            assert "    params:\n        **stage_params(" in block, (f.name, name)
            assert "script:" not in block, (f.name, name)
    assert rules == set(STAGES)
    assert sorted(p.name for p in (REPO / "workflow/scripts").iterdir() if p.suffix == ".py") == ["stage.py"]


def test_adapter_names_mismatches_in_both_directions():
    st = STAGES["retrieve"]
    ok = check_names(st, {"questions", "haystacks", "events", "tokens"},
                     {"rankings", "outcomes", "deep", "timings", "turns"}, {"variant", "segment", "n_segments", "code"})
    assert ok == []
    bad = check_names(st, {"questions", "haystacks", "events", "tokens", "extra"},
                      {"rankings", "deep", "timings", "turns"}, {"variant", "segment", "nsegments"})
    assert bad == ["undeclared input 'extra'", "missing output 'outcomes'", "missing params 'n_segments'",
                   "undeclared params 'nsegments'"]



def test_each_stage_module_registers_its_own_stage_only():
    """stages/<name>.py registers the stage of rule <name> and no other, so a
    job that imports its rule's module (adapter.load_stage) finds its stage."""
    from memobench.stages.adapter import stage_names

    for name in stage_names():
        text = (REPO / "src/memobench/stages" / f"{name}.py").read_text(encoding="utf-8")
        assert re.findall(r'^@stage\("(\w+)"', text, re.M) == [name], name
        assert STAGES[name].func.__module__ == f"memobench.stages.{name}"


@pytest.mark.parametrize("name", sorted(STAGES))
def test_a_job_loads_its_own_stage_module_and_no_other(name):
    """In a fresh interpreter (as a job starts): importing the adapter and
    loading one stage imports that stage's module only, without an import
    cycle."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from memobench.stages import load_stage\n"
            "st = load_stage(sys.argv[2])\n"
            "print(st.name, *sorted(m for m in sys.modules if m.startswith('memobench.stages.')))\n")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "src"), name], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [name, *sorted(["memobench.stages.adapter", f"memobench.stages.{name}"])]


def test_the_stage_script_reaches_the_retrieve_stage(tmp_path):
    """A sibling variant's code fingerprint hashes the script every rule runs:
    the script passes its own path and the stage gets it on its job; the
    workflow's script does so."""
    from memobench.stages import run_logged

    seen = []
    script = REPO / "workflow" / "scripts" / "stage.py"
    run_logged(tmp_path / "x.log", lambda job: seen.append(job.script), {}, {}, {}, {}, script=script)
    assert seen == [script] and script.is_file()
    assert "main(sys.argv[1:], sys.stdin.read(), SCRIPT)" in script.read_text(encoding="utf-8")


def test_a_job_reaches_its_stage_as_the_workflow_writes_it(tmp_path):
    """The job lines common.smk's stage_params writes (job_literal,
    files_literal) are what the workflow's script reads: named inputs (a name bound to several files as a
    list), outputs, params of every literal type (a tuple stays a tuple, text
    with quotes, newlines and non-ASCII stays itself), wildcards, the threads
    and the log, in a new process started as the rule's command starts it."""
    import subprocess
    import sys

    from memobench.stages import files_literal, job_literal

    out = tmp_path / "out.txt"
    params = {"text": "a 'quoted'\n\"line\" é 🙂", "pairs": [("a", 1), ("b", 2.5)], "none": None, "flag": True,
              "nested": {"k": [1, {"x": ()}]}}
    lines = (job_literal(params, {"dataset": "lme"}) + "\n"
             + files_literal({"events": str(tmp_path / "e.parquet"), "many": ["a", "b"]}, {"summary": str(out)}))
    # a stage registered under a test rule's name, run through the workflow's script
    code = ("import runpy, sys\n"
            "from memobench.stages import adapter\n"
            "def record(job):\n"
            "    open(job.output.summary, 'w', encoding='utf-8').write(repr((job.input.files('many'), "
            "job.input.events, {k: getattr(job.params, k) for k in sorted(%r)}, job.wildcards.dataset, job.threads)))\n"
            "adapter.STAGES['probe'] = adapter.Stage('probe', record, frozenset({'events', 'many'}), frozenset(), "
            "frozenset({'summary'}), frozenset(%r))\n"
            "sys.argv = [sys.argv[1], 'probe', '3', sys.argv[2]]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n") % (sorted(params), sorted(params))
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "workflow" / "scripts" / "stage.py"),
                           str(tmp_path / "probe.log")], input=lines + "\n", capture_output=True, text=True,
                          encoding="utf-8")
    assert proc.returncode == 0, proc.stderr
    import ast

    assert ast.literal_eval(out.read_text(encoding="utf-8")) == (["a", "b"], str(tmp_path / "e.parquet"),
                                                                 params, "lme", 3)


def test_a_job_that_is_no_literal_is_one_internal_error_line(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO / "workflow" / "scripts" / "stage.py"), "qrels", "1",
                           str(tmp_path / "q.log")], input="{'input': PosixPath('x')}\n", capture_output=True,
                          text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("memobench: internal error: rule 'qrels': its job is not a Python literal")
    assert proc.stderr.count("\n") == 1


def test_reference_backends_are_the_catalogs_rows():
    """The recipe's backend choices are the catalog's Memo and reference rows;
    every reference row ranks through its own rank function."""
    assert registry.recipe_backends() == registry.names("memo") + registry.names("reference")
    assert set(registry.names("reference")) == {"bm25-official", "bm25s", "fts5-bm25", "minilm", "wordllama"}
    for r in registry.rows("reference"):
        assert callable(r.rank) and r.module.startswith("retrieval.reference."), r
    with pytest.raises(ConfigError, match="is not one of"):
        resolve("mine", "s", {"mine": {"base": "v0.8.0", "recipe": {"backend": "python"}}})


@pytest.mark.parametrize("family", ["s", "m", "locomo", "cn", "zh"])
def test_reference_variants_take_the_familys_skip_rule(family):
    """Same questions and gold as the Memo variants: the skip rule of the
    family's shipped pipeline (v0.8.0, or cn-A / zh-A)."""
    memo = {"cn": "cn-A", "zh": "zh-A"}.get(family, "v0.8.0")
    for name in registry.names("reference"):
        v = resolve(name, family)
        assert v.recipe.backend == name and registry.kind_of(v) == "reference"
        assert v.skip == resolve(memo, family).skip
        assert v.recipe.documents == ("user" if family in ("s", "m", "cn") else "all")


def test_retrieve_stage_declares_what_every_backend_reads():
    """The catalog (registry.inputs_of: each kind's inputs and its rows') is
    the one place saying what a variant reads: the retrieve stage requires
    what every retriever reads and allows the rest."""
    from memobench.catalog.registry import inputs_of
    from memobench.retrieval.fusion import fusion_variant
    from memobench.retrieval.python import python_variant

    st = STAGES["retrieve"]
    reads = {b: inputs_of(variants_with_backend(b)) for b in registry.recipe_backends()}
    for prepare in (None, "my.py:embed"):
        v = python_variant("mine", "s", {"retriever": {"callable": "my.py:rank", "prepare": prepare}})
        reads[f"python {prepare}"] = inputs_of(v)
    reads["fusion"] = inputs_of(fusion_variant("fused", "s", {"fuse": {"of": ["v0.8.0", "bm25s"]}}))
    assert st.inputs == frozenset.intersection(*reads.values())
    assert st.inputs | st.optional_inputs == frozenset.union(*reads.values())
    assert reads["bm25s"] == {"questions", "haystacks", "events"}
    assert reads["minilm"] == {"questions", "haystacks", "events", "embeddings"}
    assert reads["wordllama"] == {"questions", "haystacks", "events", "wordllama_embeddings"}
    # a fusion reads the fused variants' deep tables, not the sessions
    assert reads["fusion"] == {"questions", "haystacks", "fused"}
    assert reads["fts"] == {"questions", "haystacks", "events", "tokens", "fts_tokens"}
    assert reads["python None"] == {"questions", "haystacks", "events"}
    assert reads["python my.py:embed"] == {"questions", "haystacks", "events", "prepared"}
    common = (REPO / "workflow/rules/common.smk").read_text(encoding="utf-8")
    assert "inputs_of(from_spec(spec))" in common


def variants_with_backend(backend):
    """v0.8.0 with another backend."""
    from dataclasses import replace

    v = resolve("v0.8.0", "s")
    return replace(v, recipe=replace(v.recipe, backend=backend))


def test_all_turns_counterpart_of_bm25_official():
    """bm25-official-all: the same BM25 over every turn, paired with
    bm25-official on the LongMemEval-format families only (LoCoMo and zh
    documents are all turns already)."""
    for family in ("s", "m", "cn"):
        v, base = resolve("bm25-official-all", family), resolve("bm25-official", family)
        assert (v.recipe.backend, v.recipe.documents, v.baseline) == ("bm25-official", "all", "bm25-official")
        assert base.recipe.documents == "user" and v.skip == base.skip
    for family in ("locomo", "zh"):
        with pytest.raises(ConfigError, match="does not apply"):
            resolve("bm25-official-all", family)


def test_grain_turn_is_taken_where_the_retriever_ranks_turns():
    from memobench.catalog.variant import from_spec, to_spec

    custom = {"t": {"base": "bm25s", "grain": "turn"}, "s": {"base": "bm25s"},
              "py": {"retriever": {"callable": "m.py:rank"}, "grain": "turn"}}
    t = resolve("t", "s", custom)
    assert t.grain == "turn" and to_spec(t)["grain"] == "turn" and from_spec(to_spec(t)) == t
    assert resolve("py", "s", custom).grain == "turn"
    # a session variant's spec (the rule's params, the cache key) holds no grain: it stays what it was
    assert "grain" not in to_spec(resolve("s", "s", custom))
    # a memory service and a fusion of turn lists rank turns too; a session fusion may fuse turn variants
    custom.update({"svc": {"system": {"url": "http://127.0.0.1:1"}, "grain": "turn"},
                   "ft": {"fuse": {"of": ["t", "py"]}, "grain": "turn"}, "fs": {"fuse": {"of": ["t", "s"]}}})
    assert [resolve(n, "s", custom).grain for n in ("svc", "ft", "fs")] == ["turn", "turn", "session"]


@pytest.mark.parametrize("entry,why", [
    ({"base": "v0.8.0", "grain": "turn"}, "ranks whole sessions only"),
    ({"base": "bm25s", "grain": "sentence"}, "grain 'sentence' is not one of session, turn"),
    ({"retriever": {"callable": "m.py:rank", "prepare": "m.py:prep"}, "grain": "turn"}, "leave prepare out"),
])
def test_grain_turn_refused_where_it_cannot_apply(entry, why):
    with pytest.raises(ConfigError, match=why):
        resolve("x", "s", {"x": entry})


def test_a_turn_fusion_of_a_session_variant_is_refused():
    custom = {"t": {"base": "bm25s", "grain": "turn"}, "x": {"fuse": {"of": ["t", "bm25s"]}, "grain": "turn"}}
    with pytest.raises(ConfigError, match="variant 'x': fuse: grain turn fuses turn lists, and 'bm25s' ranks sessions"):
        resolve("x", "s", custom)


def test_the_rows_order_does_not_depend_on_which_module_was_imported_first():
    """The schema's and the docs' backend lists are generated from it."""
    import subprocess
    import sys

    code = ("import memobench.{} as _\nfrom memobench.catalog import registry\n"
            "print(','.join(registry.names()))")
    got = {subprocess.run([sys.executable, "-c", code.format(m)], capture_output=True, text=True, check=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO / "src")}).stdout
           for m in ("retrieval.reference.static", "services.job.rank", "retrieval.memo")}
    assert len(got) == 1 and got.pop().strip() == ",".join(registry.names())
