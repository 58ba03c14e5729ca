"""``memobench score``'s command line: its arguments, and the engine's text printed (score_engine.py, the
scoring engine the Python API shares; what a run is scored as, and how, is said there)."""

from __future__ import annotations

import json
import sys

from .core.errors import ConfigError
from .evaluation.published import REFERENCE
from .runs import FORMATS as RUN_FORMATS
from .score_engine import WORKFLOW_ENV, ScoreError, scored
from .score_text import official_convention


def add_arguments(p) -> None:
    p.add_argument("run", nargs="?",
                   help="the run file (TREC run, LongMemEval retrieval log, or JSON {question_id: [session_id, ...]})")
    p.add_argument("--system", metavar="URL", help="instead of a run file: a memory service at this URL, driven over "
                                                    "the project's HTTP API (docs/memory-services.md)")
    p.add_argument("--mcp", metavar="COMMAND|URL",
                   help="instead of a run file: an MCP memory service with the reference server's tools, started by "
                        "this command (one quoted argument) over stdio, or at this streamable-HTTP URL")
    p.add_argument("--retriever", metavar="CALLABLE",
                   help="instead of a run file: your Python retriever, 'path/to/file.py:function' or "
                        "'module:function' (docs/retrievers.md), run by the pipeline as a retriever variant")
    p.add_argument("--variant", metavar="NAME",
                   help="instead of a run file: a built-in variant or one of the config's (e.g. bm25s), run by the "
                        "pipeline as the config defines it")
    p.add_argument("--dataset", required=True, help="the configured dataset the run ranks (e.g. locomo10)")
    p.add_argument("--against", help=f"the variant to compare with (default {REFERENCE} where the dataset's family has it)")
    p.add_argument("--format", choices=RUN_FORMATS, help="the run's format (default: read from the file)")
    p.add_argument("--name", help="the imported variant's name (default: the file's name without its suffix)")
    p.add_argument("--k", type=int, metavar="N",
                   help="a memory service's search depth: the results asked of each search (default 50, as a "
                        "system variant's k, at least 10; the deep lists go to 50)")
    p.add_argument("--grain", choices=("session", "turn"), default="session",
                   help="what the run ranks: sessions (default) or turns, named by their turn ids "
                        "(docs/protocol.md#turn-level)")
    p.add_argument("--configfile", nargs="+", default=[], help="config overlays, as given to snakemake")
    p.add_argument("--directory", "-d", default=".", help="the working directory holding results/ (default: .)")
    p.add_argument("--cores", default="1", help="snakemake --cores (default 1)")
    p.add_argument("--workflow", metavar="DIR",
                   help=f"the project's checkout holding the workflow (default: ${WORKFLOW_ENV}, else the current "
                        "directory or the nearest parent with the Snakefile)")
    p.add_argument("--snakefile", help="the workflow's Snakefile itself (default: the one of --workflow)")
    p.add_argument("--json", action="store_true",
                   help="print the figures as one JSON object (metrics.json, official.json with its convention "
                        "named, the paired comparison) instead of the text")


def main(args) -> int:
    try:
        if getattr(args, "json", False):
            print(json.dumps(as_json(scored(args)), indent=1, default=str))
        else:
            print(score(args))
        return 0
    except (ScoreError, ConfigError) as e:
        print(f"memobench: {e}", file=sys.stderr)
        return 1


def as_json(got: dict) -> dict:
    """What ``memobench score --json`` prints: the figures :func:`scored` states, official.json's block
    with the name of the convention its top-level figures follow."""
    off = dict(got["official"] or {})
    if off.get("official"):
        off["official"] = {"convention": official_convention(off["official"]), **off["official"]}
    return {"dataset": got["dataset"], "variant": got["variant"], "against": got["against"],
            "metrics": got["metrics"], "official": off, "against_metrics": got["against_metrics"],
            "paired": got["paired"] if isinstance(got["paired"], dict) else None,
            "paired_note": got["paired"] if isinstance(got["paired"], str) else None, "latency": got["latency"]}


def score(args) -> str:
    """What ``memobench score`` prints."""
    return scored(args)["text"]
