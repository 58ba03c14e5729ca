"""Benchmark of the reference retrievers, not a test.

    python -m memobench.tools.bench_baselines [--work bench_work] [--minilm-sessions 256] [--wordllama-sessions 0]

Generates (or reuses) the S-scale LongMemEval-format file of
``memobench.tools.benchmark`` (500 questions x ~50 sessions, ~280 MB), normalizes
it, then runs each lexical retriever over every question in its own process
(wall and CPU time, peak RSS; building the documents from the tables
included) and embeds distinct sessions with each embedding retriever on the
CPU, in its own process: a sample for minilm, every distinct session for
wordllama (``0``: all; sessions per second, peak RSS), from which it projects
the embedding stage for the distinct sessions of the generated file and for
upper bounds of the real S and M files (every haystack entry distinct:
500 x 50, 500 x 500).

    python -m memobench.tools.bench_baselines --locomo locomo10.json [--work bench_work]

ranks LoCoMo's questions with each lexical retriever twice, each in its own
process: one index per distinct haystack (as the retrieve stage does) and one
per question (every kept index dropped first); it prints questions/s, the
speed-up and whether the two runs' lists (positions and scores) are the same.

    python -m memobench.tools.bench_baselines --turns [--work bench_work]

ranks the S-scale file's turns with LongMemEval's flat BM25 twice, each in
its own process: as LongMemEval's ``run_retrieval.py --granularity turn``
does it (``json.load`` of the raw file, its turn corpus, ``BM25Okapi``,
``numpy.argsort``) and as a turn variant's retrieve job does it (from the
normalized tables); it checks the two give the same turn lists, then times
that variant's scoring at turn level (``turn_metrics``) against its
session-level scoring (``official``), and prints the ratios.

    python -m memobench.tools.bench_baselines --long-question [--docs 5000] [--words 100,400,1600,50000]

instead ranks one haystack of ``--docs`` generated documents (~100 words each)
with ``fts5-bm25`` for one generated question of each length in ``--words``
(the generator's Zipf vocabulary: the longer the question, the more of its
tokens are repeats), each in its own process (wall and CPU time, peak RSS,
building the documents included), and times FTS5's own OR query over the same
input (``--or-up-to`` words at most, default 1600: its cost grows with the
square of the question's length), checking that both give the same list.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path



def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_lexical(norm: Path, name: str, fmt: str = "longmemeval", index_per_question: bool = False) -> dict:
    """Rank every question with a haystack by lexical retriever ``name``.
    ``index_per_question``: every kept index dropped before each question (one
    index per question, the baseline of one per distinct haystack). ``lists``:
    a digest of every ranking (positions and scores), equal in both modes."""
    from ..core.layout import table_paths
    from ..retrieval.reference.ranking import rank
    from ..retrieval.reference.lexical import forget_indexes
    from ..retrieval.documents import haystack_documents
    from ..core.tables import read_table

    t0, c0 = time.monotonic(), time.process_time()
    tables = table_paths(norm)
    questions = read_table(tables["questions"]).to_pylist()
    hays = haystack_documents(tables["haystacks"], tables["events"], fmt)
    t_docs = time.monotonic() - t0
    n, lists = 0, hashlib.sha256()
    for q in questions:
        h = hays.get(q["haystack_id"])
        if h is None:
            continue
        if index_per_question:
            forget_indexes()
        r = rank(name, q["question"], list(h.docs))
        assert len(r.positions) == len(h.docs)
        lists.update(r.positions.tobytes() + r.scores.tobytes())
        n += 1
    wall = time.monotonic() - t0
    return {"retriever": name, "index": "per question" if index_per_question else "per haystack",
            "questions": n, "wall_s": round(wall, 2), "documents_s": round(t_docs, 2),
            "questions_per_s": round(n / max(wall - t_docs, 1e-9)), "cpu_s": round(time.process_time() - c0, 2),
            "peak_rss_mb": round(_peak_mb()), "lists": lists.hexdigest()[:16]}


def locomo(a) -> int:
    """Every lexical retriever over the LoCoMo file's questions (ten
    conversations' haystacks), one index per distinct haystack against one
    per question: questions/s, the speed-up, and the lists' digests (equal)."""
    from ..datasets.normalize import normalize_locomo
    from ..core.layout import table_paths

    norm = a.work / "locomo_normalized"
    if not table_paths(norm)["events"].exists():
        normalize_locomo(a.locomo, norm, log=lambda m: None)
    from ..catalog.registry import names, row

    status = 0
    for name in (n for n in names("reference") if not row(n).embedding):  # the lexical ones
        rows = []
        for per_question in (True, False):
            p = subprocess.run([sys.executable, "-m", "memobench.tools.bench_baselines", "--only", name,
                                "--norm", str(norm), "--format", "locomo"]
                               + (["--index-per-question"] if per_question else []), capture_output=True, text=True)
            if p.returncode:
                print(f"{name}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                return 1
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
        same = rows[0]["lists"] == rows[1]["lists"]
        status |= not same
        print(f"{name}: {rows[1]['questions_per_s']} questions/s with one index per haystack, "
              f"{rows[0]['questions_per_s']} with one per question: "
              f"{rows[1]['questions_per_s'] / max(rows[0]['questions_per_s'], 1):.1f}x, "
              f"lists {'identical' if same else 'DIFFER'}", flush=True)
    return status


def run_dense(norm: Path, sample: int, model: str = "minilm") -> dict:
    """Embed ``sample`` distinct sessions (0: all of them) with an embedding
    retriever on the CPU, as the embeddings stage does."""
    import pyarrow.parquet as pq

    from ..core.layout import table_paths
    from ..retrieval.reference.embeddings import encoder_for, iter_session_documents

    tables = table_paths(norm)
    docs = []
    for key, doc in iter_session_documents(tables["events"], "longmemeval"):
        docs.append(doc)
        if sample and len(docs) >= sample:
            break
    n_sessions = pq.read_metadata(tables["sessions"]).num_rows
    t = time.monotonic()
    enc = encoder_for(model, device="cpu")
    load_s = time.monotonic() - t
    pieces = [len(ids) for ids in enc.token_ids(docs)]
    t0, c0 = time.monotonic(), time.process_time()
    enc.encode(docs)
    wall = time.monotonic() - t0
    rate = len(docs) / wall
    out = {"retriever": model, "device": enc.device, "sessions": len(docs), "wall_s": round(wall, 2),
           "cpu_s": round(time.process_time() - c0, 2), "model_load_s": round(load_s, 2),
           "sessions_per_s": round(rate, 2), "mean_tokens": round(sum(pieces) / len(pieces), 1),
           "peak_rss_mb": round(_peak_mb()), "distinct_sessions_generated_s": n_sessions,
           "projected_generated_s_min": round(n_sessions / rate / 60, 1),
           "projected_real_s_upper_min": round(500 * 50 / rate / 60, 1),
           "projected_real_m_upper_h": round(500 * 500 / rate / 3600, 2)}
    if model == "minilm":
        out["truncated_share"] = round(sum(p == 256 for p in pieces) / len(pieces), 3)
    return out


def long_question_input(n_docs: int, words: int) -> tuple[str, list[str]]:
    """A generated haystack of ``n_docs`` documents (~100 words each) and a
    question of about ``words`` words, both from the generator's vocabulary;
    the documents depend only on ``n_docs``."""
    import random

    from .generate.vocabulary import _vocab

    vocab = _vocab(0, None)
    rng = random.Random(f"docs {n_docs}")
    docs = [vocab.text(rng, rng.randint(20, 180)) for _ in range(n_docs)]
    return vocab.text(random.Random(f"question {words}"), words), docs


def run_long_question(n_docs: int, words: int, path: str) -> dict:
    from ..retrieval.reference.ranking import rank
    from ..retrieval.reference.lexical import Fts5Bm25

    t0, c0 = time.monotonic(), time.process_time()
    question, docs = long_question_input(n_docs, words)
    fts = Fts5Bm25()
    terms = fts.query_terms(question)
    r = fts.rank_or(question, docs) if path == "fts5-or" else rank("fts5-bm25", question, docs)
    return {"path": path, "docs": n_docs, "question_words": words, "tokens": len(terms),
            "distinct_tokens": len(set(terms)), "by_token": fts.by_token, "wall_s": round(time.monotonic() - t0, 2),
            "cpu_s": round(time.process_time() - c0, 2), "peak_rss_mb": round(_peak_mb()),
            "list": hashlib.sha256(r.positions.tobytes() + r.scores.tobytes()).hexdigest()[:16]}


def long_question(a) -> int:
    lists = {}
    for words in (int(w) for w in a.words.split(",")):
        for path in ("fts5-bm25", "fts5-or"):
            if path == "fts5-or" and words > a.or_up_to:
                continue
            p = subprocess.run([sys.executable, "-m", "memobench.tools.bench_baselines", "--only", "long-question",
                                "--docs", str(a.docs), "--words", str(words), "--path", path],
                               capture_output=True, text=True)
            if p.returncode:
                print(f"{path} {words} words: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                return 1
            row = json.loads(p.stdout.strip().splitlines()[-1])
            if lists.setdefault(words, row["list"]) != row["list"]:
                print(f"{words} words: fts5-bm25 and FTS5's OR query give different lists", file=sys.stderr)
                return 1
            print(json.dumps(row), flush=True)
    return 0


def _times() -> tuple[float, float]:
    return time.monotonic(), time.process_time()


def _since(t: tuple[float, float]) -> dict:
    return {"wall_s": round(time.monotonic() - t[0], 2), "cpu_s": round(time.process_time() - t[1], 2)}


def _paired_walls(first, second, runs: int = 9) -> tuple[dict, dict]:
    """The median wall times of ``runs`` calls of each, in turn (a fraction of a second each: one
    alone is mostly noise), and in the second's the median of its pair-by-pair ratio to the first,
    which holds while the machine's speed drifts."""
    walls: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for call, out in zip((first, second), walls):
            t = time.monotonic()
            call()
            out.append(time.monotonic() - t)
    ratio = sorted(b / a for a, b in zip(*walls))[runs // 2]
    first_s, second_s = ({"wall_s": round(sorted(w)[runs // 2], 3), "runs": runs} for w in walls)
    return first_s, {**second_s, "ratio": round(ratio, 2)}


def _turn_digest(lists) -> str:
    """sha256 of every question's turn list, each turn as ``{session_id}_{index + 1}``."""
    h = hashlib.sha256()
    for qid, turns in lists:
        h.update(json.dumps([qid, turns]).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def run_longmemeval_turns(raw: str) -> dict:
    """LongMemEval's own turn path: its turn corpus and flat BM25, over the raw file."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    t = _times()
    lists = []
    for item in json.loads(Path(raw).read_text(encoding="utf-8")):
        docs, ids = [], []
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"]):
            for i, turn in enumerate(session):
                if turn["role"] == "user":
                    docs.append(turn["content"])
                    ids.append(f"{sid}_{i + 1}")
        order = np.argsort(BM25Okapi([d.split(" ") for d in docs]).get_scores(item["question"].split(" ")))[::-1]
        lists.append((item["question_id"], [ids[j] for j in order]))
    return {"who": "LongMemEval's code path", **_since(t), "peak_rss_mb": round(_peak_mb()),
            "questions": len(lists), "lists": _turn_digest(lists)}


def run_our_turns(norm: str, out: str) -> dict:
    """The turn variant's retrieve job (one segment), then its scoring at both grains."""
    from ..catalog.variants import resolve
    from ..core.layout import table_paths
    from ..evaluation import official, turn_metrics
    from ..retrieval.sharing import write_segment
    from ..core.tables import read_table
    from ..stages.adapter import without_pandas

    without_pandas()  # as in the jobs (stages.adapter): pyarrow's pandas probe imports nothing
    tables, out = table_paths(Path(norm)), Path(out)
    v = resolve("bm25-turns", "s", {"bm25-turns": {"base": "bm25-official", "grain": "turn"}})
    paths = {k: out / f"{k}.parquet" for k in ("rankings", "outcomes", "deep", "turns")}
    t = _times()
    write_segment(v, tables["questions"], tables["haystacks"], tables["events"], 1, 1, paths["rankings"],
                  paths["outcomes"], log=lambda m: None, deep_out=paths["deep"], turns_out=paths["turns"])
    ranked = _since(t)
    session, turn = _paired_walls(
        lambda: official.compute("longmemeval", tables["questions"], tables["haystacks"], tables["events"],
                                 paths["deep"], log=lambda m: None),
        lambda: turn_metrics.compute("longmemeval", tables["questions"], tables["haystacks"], tables["events"],
                                     paths["turns"], log=lambda m: None))
    rows = read_table(paths["turns"]).sort_by([("q_index", "ascending"), ("rank", "ascending")]).to_pylist()
    lists: dict[str, list[str]] = {}
    for r in rows:
        lists.setdefault(r["question_id"], []).append(f"{r['session_id']}_{r['turn'] + 1}")
    return {"who": "memobench turn variant", **ranked, "peak_rss_mb": round(_peak_mb()), "questions": len(lists),
            "lists": _turn_digest(lists.items()), "scoring_session": session, "scoring_turn": turn}


def turns(a) -> int:
    from .benchmark import SCALES, generate
    from ..datasets.normalize import normalize_longmemeval
    from ..core.layout import table_paths

    s = SCALES["s"]
    raw = generate(a.work, "bench_s", s["questions"], s["sessions"], s["target"], s["seed"])
    norm = a.work / "bench_s_normalized"
    if not table_paths(norm)["events"].exists():
        normalize_longmemeval(raw, norm, log=lambda m: None)
    out = a.work / "bench_s_turns"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for only, extra in (("longmemeval-turns", ["--path", str(raw)]),
                        ("our-turns", ["--norm", str(norm), "--path", str(out)])):
        p = subprocess.run([sys.executable, "-m", "memobench.tools.bench_baselines", "--only", only, *extra],
                           capture_output=True, text=True)
        if p.returncode:
            print(f"{only}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    theirs, ours = rows
    same = theirs["lists"] == ours["lists"]
    print(f"| what | LongMemEval | memobench | ratio |\n|---|---|---|---|\n"
          f"| turn-level flat BM25, wall s ({ours['questions']} questions) | {theirs['wall_s']} | {ours['wall_s']} | "
          f"{ours['wall_s'] / theirs['wall_s']:.2f}x |\n"
          f"| the same lists | | {'yes' if same else 'NO'} | |\n"
          f"| scoring, median wall s of {ours['scoring_turn']['runs']} each in turn: turn level / session level | | "
          f"{ours['scoring_turn']['wall_s']} / {ours['scoring_session']['wall_s']} | "
          f"{ours['scoring_turn']['ratio']:.2f}x (median of the pairs) |")
    return 0 if same else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("bench_work"))
    ap.add_argument("--minilm-sessions", type=int, default=256)
    ap.add_argument("--long-question", action="store_true",
                    help="fts5-bm25 on one haystack for questions of growing length, against FTS5's OR query")
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--words", default="100,400,1600,50000")
    ap.add_argument("--or-up-to", type=int, default=1600)
    ap.add_argument("--wordllama-sessions", type=int, default=0, help="0: every distinct session")
    ap.add_argument("--locomo", type=Path, help="the LoCoMo file: the lexical retrievers over its questions, one "
                                                "index per haystack against one per question")
    ap.add_argument("--format", default="longmemeval", help=argparse.SUPPRESS)
    ap.add_argument("--index-per-question", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", help=argparse.SUPPRESS)
    ap.add_argument("--norm", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--turns", action="store_true",
                    help="flat BM25 at turn level, LongMemEval's code path against a turn variant, and turn scoring")
    a = ap.parse_args(argv)
    if a.only == "longmemeval-turns":
        print(json.dumps(run_longmemeval_turns(a.path)))
        return 0
    if a.only == "our-turns":
        print(json.dumps(run_our_turns(str(a.norm), a.path)))
        return 0
    if a.turns:
        return turns(a)
    if a.only == "long-question":
        print(json.dumps(run_long_question(a.docs, int(a.words), a.path)))
        return 0
    if a.long_question:
        return long_question(a)
    if a.locomo:
        return locomo(a)
    if a.only:
        sample = {"minilm": a.minilm_sessions, "wordllama": a.wordllama_sessions}
        out = (run_dense(a.norm, sample[a.only], a.only) if a.only in sample
               else run_lexical(a.norm, a.only, a.format, a.index_per_question))
        print(json.dumps(out))
        return 0
    from .benchmark import SCALES, generate
    from ..datasets.normalize import normalize_longmemeval
    from ..core.layout import table_paths

    s = SCALES["s"]
    raw = generate(a.work, "bench_s", s["questions"], s["sessions"], s["target"], s["seed"])
    norm = a.work / "bench_s_normalized"
    if not table_paths(norm)["events"].exists():
        normalize_longmemeval(raw, norm, log=lambda m: None)
    rows = []
    from ..catalog.registry import names

    for name in names("reference"):
        p = subprocess.run([sys.executable, "-m", "memobench.tools.bench_baselines", "--only", name, "--norm", str(norm),
                            "--minilm-sessions", str(a.minilm_sessions),
                            "--wordllama-sessions", str(a.wordllama_sessions)], capture_output=True, text=True)
        if p.returncode:
            print(f"{name}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
            continue
        row = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
