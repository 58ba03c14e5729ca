"""`memobench bundle` and `memobench verify`: one variant's result on one dataset as one file that
anyone holding the same data file can check.

A bundle is JSON Lines: a header line (the dataset's data file with its sha256 and release, the
variant's definition and code fingerprint, the environment that computed it, the averaging
conventions, its figures, and the sha256 of the lines that follow), then one line per question of its
run at full depth (``{"question_id": ..., "sessions": [...]}``, in question order).

``verify`` refuses, in one ``memobench:`` line, a bundle whose lines do not match their digest (a
changed list line), one made on another data file than the local one, and one whose figures the
local rescoring does not reproduce (a changed figure). The rescoring is ``memobench score`` of the
bundle's run, named ``bundle-{variant}-{8 hex digits of its lists' sha256}``: a verified bundle
stays in the folder's results and so on its board, marked as a verified bundle; a refused one's
rescored results are removed."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from .core import layout
from .core.atomic import write_text
from .datasets.download import sha256_of
from .evaluation.measures import HITS

FORMAT = "memobench-bundle/1"
MARKER = "bundle.json"  # beside a verified bundle's rescored metrics.json: where it came from
# metrics.json's harness figures: the evaluated questions, the hit counts and the reciprocal ranks' sum, the rates
HARNESS_FIGURES = ("questions", *HITS, "mrr_sum", *(f"{k}_rate" for k in HITS), "mrr")
TOLERANCE = 1e-12  # a rate recomputed from the same counts: the same float, up to summation order


class BundleError(Exception):
    """A bundle refused or not written: its text is the one line ``memobench:`` prints."""


def add_bundle_arguments(p) -> None:
    p.add_argument("--dataset", required=True, help="the dataset the variant ran on (e.g. locomo10)")
    p.add_argument("--variant", required=True, help="the variant whose result is bundled")
    p.add_argument("--results", default=layout.RESULTS, help="the results folder (default: results)")
    p.add_argument("--out", help="the bundle's file (default: VARIANT.DATASET.bundle.jsonl)")


def add_verify_arguments(p) -> None:
    p.add_argument("bundle", help="the bundle file (memobench bundle's)")
    p.add_argument("--configfile", nargs="+", default=[], help="config overlays, as given to snakemake")
    p.add_argument("--directory", "-d", default=".", help="the working directory holding results/ (default: .)")
    p.add_argument("--cores", default="1", help="snakemake --cores (default 1)")
    p.add_argument("--workflow", metavar="DIR", help="the project's checkout holding the workflow (default: as "
                                                     "memobench score finds it)")


def _official_figures(block: dict | None) -> dict:
    """{convention: {metric: value}} of an official block (its top-level figures under their own
    convention's name where it has one)."""
    if not block:
        return {}
    out = {}
    for name, conv in (block.get("conventions") or {"official": block}).items():
        out[name] = {k: v for k, v in conv.items() if "@" in k and isinstance(v, (int, float))}
    return out


def _lines_digest(lines: list[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8") + b"\n")
    return h.hexdigest()


def write(results: Path, dataset: str, variant: str, out: Path) -> Path:
    """Write the bundle of ``variant`` on ``dataset`` from ``results`` to ``out``."""
    import pyarrow.parquet as pq

    folder = Path(layout.path(layout.METRICS, root=results, dataset=dataset, variant=variant)).parent
    where = f"{dataset}/{variant}"
    try:
        m = json.loads((folder / Path(layout.METRICS).name).read_text(encoding="utf-8"))
        o = json.loads((folder / Path(layout.OFFICIAL).name).read_text(encoding="utf-8"))
        deep = pq.read_table(folder / Path(layout.DEEP).name,
                             columns=["question_id", "rank", "session_id", "q_index"]).to_pydict()
    except (OSError, ValueError) as e:
        raise BundleError(f"{where}: its results cannot be read ({e}); run it first (snakemake or memobench "
                          f"score)") from None
    if (m.get("grain") or o.get("grain")) == "turn":
        raise BundleError(f"{where}: a turn variant; a bundle holds a session variant's lists")
    data = o.get("data_file") or {}
    if not data.get("sha256"):
        raise BundleError(f"{where}: its data file's sha256 was not checked (official.json's data_file); give the "
                          f"dataset's sha256 in the config and rerun it")
    lists: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for qid, rank, sid, qi in zip(deep["question_id"], deep["rank"], deep["session_id"], deep["q_index"]):
        lists.setdefault((qi, qid), []).append((rank, sid))
    lines = [json.dumps({"question_id": qid, "sessions": [s for _, s in sorted(ranked)]}, ensure_ascii=False)
             for (_, qid), ranked in sorted(lists.items())]
    from .reporting.board import definition

    header = {"bundle": FORMAT, "dataset": dataset, "variant": variant, "data_file": data,
              "format": o.get("format"), "grain": "session",
              "definition": {"text": definition(m), "kind": m.get("kind"), "harness": m.get("harness"),
                             "description": m.get("description"), "skip_rule": m.get("skip_rule"),
                             **{k: m[k] for k in ("recipe", "backend", "documents", "retriever", "fusion", "run",
                                                  "system") if m.get(k) is not None}},
              "provenance": m.get("provenance"),  # the code fingerprint and the environment that computed it
              "conventions": {"harness": "metrics.json: hit@k and MRR under the Memo harness's rules",
                              **{k: v.get("convention", "") for k, v in
                                 ((o.get("official") or {}).get("conventions") or {}).items()}},
              "figures": {"harness": {k: m.get(k) for k in HARNESS_FIGURES},
                          "official": _official_figures(o.get("official"))},
              "run": {"questions": len(lines), "depth": (o.get("official") or {}).get("depth"),
                      "sha256": _lines_digest(lines)}}
    write_text(out, "\n".join([json.dumps(header, ensure_ascii=False), *lines]) + "\n")
    return out


def read(path: Path) -> tuple[dict, list[str]]:
    """(header, run lines) of a bundle, its lines checked against their digest."""
    try:
        text = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(text[0])
    except (OSError, ValueError, IndexError) as e:
        raise BundleError(f"{path}: not a bundle ({e})") from None
    if not isinstance(header, dict) or header.get("bundle") != FORMAT:
        raise BundleError(f"{path}: not a bundle of this memobench (first line's \"bundle\" is not {FORMAT!r})")
    lines = text[1:]
    if _lines_digest(lines) != header["run"]["sha256"] or len(lines) != header["run"]["questions"]:
        raise BundleError(f"{path}: its run's lines do not match the digest in its header (a list changed after "
                          f"it was written); refused")
    return header, lines


def local_data_file(args, dataset: str) -> Path:
    """The configured raw file of ``dataset`` in the verifier's project."""
    from . import plan
    from .score_engine import ScoreError, find_workflow, load_config

    snakefile = find_workflow(args.workflow)
    try:
        config = load_config(snakefile, list(args.configfile))
    except ScoreError as e:
        raise BundleError(str(e)) from None
    if dataset not in (config.get("datasets") or {}):
        raise BundleError(f"{args.bundle}: dataset {dataset!r} is not configured here; add it to the config")
    return Path(args.directory) / plan.raw_path(config, dataset)


def compare(header: dict, m: dict, o: dict) -> list[tuple[str, object, object, bool]]:
    """(figure, the bundle's, the rescored, holds) for every figure the bundle states."""
    rows = []
    for k, theirs in header["figures"]["harness"].items():
        ours = m.get(k)
        rows.append((k, theirs, ours, _same(theirs, ours)))
    rescored = _official_figures(o.get("official"))
    for conv, figures in header["figures"]["official"].items():
        for k, theirs in figures.items():
            ours = (rescored.get(conv) or {}).get(k)
            rows.append((f"{conv} {k}", theirs, ours, _same(theirs, ours)))
    return rows


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= TOLERANCE
    return a == b


def verify(args) -> str:
    """Check the bundle ``args.bundle`` against the local data and return what is printed; raises
    :class:`BundleError` (one line) for a refused bundle."""
    from .score_command import add_arguments
    from .score_engine import ScoreError, scored

    path = Path(args.bundle)
    header, lines = read(path)
    ds, variant = header["dataset"], header["variant"]
    raw = local_data_file(args, ds)
    want = header["data_file"]
    if not raw.is_file():
        raise BundleError(f"{path}: {ds}'s data file {raw} is not there; place {want.get('file')} "
                          f"({want.get('label')}) there to verify against it")
    got = sha256_of(raw)
    if got != want.get("sha256"):
        raise BundleError(f"{path}: made on another data file of {ds} (sha256 {want.get('sha256', '')[:12]}, "
                          f"{want.get('label')}) than yours ({raw}, sha256 {got[:12]}); refused")
    # named by its lists: another bundle of the variant is another entry; the same lists, the same results
    name = f"bundle-{variant}-{header['run']['sha256'][:8]}"
    workdir = Path(args.directory)
    folder = Path(layout.path(layout.METRICS, root=workdir / layout.RESULTS, dataset=ds, variant=name)).parent
    verified_before = (folder / MARKER).is_file()
    run_file = workdir / layout.RESULTS / ".bundles" / ds / f"{name}.json"
    run_file.parent.mkdir(parents=True, exist_ok=True)
    run = {}
    for line in lines:
        item = json.loads(line)
        run[item["question_id"]] = item["sessions"]
    write_text(run_file, json.dumps(run, ensure_ascii=False))
    import argparse

    p = argparse.ArgumentParser()
    add_arguments(p)
    score_args = p.parse_args([str(run_file), "--dataset", ds, "--name", name, "--format", "json", "--directory",
                               str(workdir), "--cores", str(args.cores), "--configfile", *args.configfile]
                              if args.configfile else
                              [str(run_file), "--dataset", ds, "--name", name, "--format", "json", "--directory",
                               str(workdir), "--cores", str(args.cores)])
    score_args.workflow = args.workflow
    score_args.quiet = True
    try:
        result = scored(score_args)
    except ScoreError as e:
        raise BundleError(f"{path}: rescoring failed: {e}") from None
    rows = compare(header, result["metrics"], result["official"] or {})
    width = max(len(r[0]) for r in rows)
    out = [f"bundle {path.name}: {variant} on {ds} ({want.get('label')}, sha256 {got[:12]}: the same file)",
           f"rescored here as {name} from its {len(lines)} lists:"]
    out += [f"  {k:{width}s}  {'holds' if ok else 'DIFFERS'}  bundle {theirs}  rescored {ours}"
            for k, theirs, ours, ok in rows]
    wrong = [k for k, _, _, ok in rows if not ok]
    if wrong:
        if not verified_before:  # off the board: figures nobody's bundle stated for these lists
            shutil.rmtree(folder, ignore_errors=True)
            Path(layout.path(layout.SCORE_OVERLAY, root=workdir / layout.RESULTS, dataset=ds, variant=name)).unlink(
                missing_ok=True)
        print("\n".join(out))
        raise BundleError(f"{path}: {len(wrong)} of its {len(rows)} figures do not hold when its run is rescored "
                          f"here ({', '.join(wrong[:4])}{', ...' if len(wrong) > 4 else ''}); refused")
    write_text(folder / MARKER, json.dumps({"bundle": path.name, "sha256": sha256_of(path), "variant": variant,
                                            "run_sha256": header["run"]["sha256"],
                                            "definition": header["definition"], "provenance": header["provenance"],
                                            "figures": len(rows)}, indent=1) + "\n")
    out.append(f"verified: all {len(rows)} figures hold; on the board as {name} (a verified bundle)")
    return "\n".join(out)


def bundle_main(args) -> int:
    out = Path(args.out) if args.out else Path(f"{args.variant}.{args.dataset}.bundle.jsonl")
    try:
        write(Path(args.results), args.dataset, args.variant, out)
    except BundleError as e:
        print(f"memobench: {e}", file=sys.stderr)
        return 1
    print(f"written: {out}")
    return 0


def verify_main(args) -> int:
    try:
        print(verify(args))
        return 0
    except BundleError as e:
        print(f"memobench: {e}", file=sys.stderr)
        return 1
