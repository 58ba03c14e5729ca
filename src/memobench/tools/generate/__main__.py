"""``python -m memobench.tools.generate``: the generators' command line."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from .cn import write_cn
from .locomo import write_locomo
from .longmemeval import write_longmemeval


def _size(s: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgG]?)[bB]?\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]


def main(argv=None) -> int:
    import time

    p = argparse.ArgumentParser(prog="python -m memobench.tools.generate",
                                description="Deterministic LongMemEval/LoCoMo/CN file generator.")
    sub = p.add_subparsers(dest="kind", required=True)

    a = sub.add_parser("longmemeval", help="LongMemEval-S/M shaped JSON array")
    a.add_argument("--out", required=True)
    a.add_argument("--questions", type=int, default=500)
    a.add_argument("--sessions", type=int, default=50, help="haystack sessions per question")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--spice", action="store_true")
    a.add_argument("--target-bytes", type=_size, default=None,
                   help="approximate file size, e.g. 280M or 2.7G")
    a.add_argument("--turns", type=int, nargs=2, default=(4, 16), metavar=("LO", "HI"))
    a.add_argument("--words", type=int, nargs=2, default=(8, 120), metavar=("LO", "HI"))
    a.add_argument("--pool", type=int, default=None, help="distinct filler sessions")
    a.add_argument("--vocab-source", default=None)
    a.add_argument("--ensure-ascii", action="store_true")
    a.add_argument("--repeat-ids", type=float, default=0.0, metavar="FRACTION",
                   help="fraction of haystacks that hold a session id twice or more")
    a.add_argument("--repeat-ids-any-length", action="store_true",
                   help="a repeated id's other content may have another number of turns")
    a.add_argument("--uneven-ids", type=float, default=0.0, metavar="FRACTION",
                   help="fraction of haystacks whose haystack_session_ids list does not match the sessions")
    a.add_argument("--surrogates", nargs="?", const=True, default=False, type=float, metavar="SHARE",
                   help="JSON surrogate escapes (lone, paired, before escaped ASCII) in ~2%% of the turns "
                        "and 5%% of the questions, or in SHARE of both")
    a.add_argument("--quiet", action="store_true")

    b = sub.add_parser("locomo", help="LoCoMo10 shaped JSON")
    b.add_argument("--out", required=True)
    b.add_argument("--conversations", type=int, default=10)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--spice", action="store_true")
    b.add_argument("--sessions", type=int, nargs=2, default=(15, 32), metavar=("LO", "HI"))
    b.add_argument("--turns", type=int, nargs=2, default=(10, 30), metavar=("LO", "HI"))
    b.add_argument("--qa", type=int, nargs=2, default=(100, 250), metavar=("LO", "HI"))
    b.add_argument("--vocab-source", default=None)
    b.add_argument("--surrogates", nargs="?", const=True, default=False, type=float, metavar="SHARE",
                   help="JSON surrogate escapes (lone, paired, before escaped ASCII) in ~2%% of the turns "
                        "and 5%% of the questions, or in SHARE of both")

    c = sub.add_parser("cn", help="LongMemEval-CN results.jsonl paired to an LME file")
    c.add_argument("--out", required=True)
    c.add_argument("--lme", required=True, help="LongMemEval file to pair with")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--fraction", type=float, default=1.0)
    c.add_argument("--surrogates", nargs="?", const=True, default=False, type=float, metavar="SHARE",
                   help="JSON surrogate escapes (lone, paired, before escaped ASCII) in ~5%% of the questions, "
                        "or in SHARE of them")

    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.kind == "longmemeval":
        last = [t0]

        def progress(done, total, nbytes):
            now = time.perf_counter()
            if not args.quiet and (now - last[0] >= 5 or done == total):
                last[0] = now
                print(f"  {done}/{total} questions, {nbytes / 1e6:.1f} MB, "
                      f"{nbytes / 1e6 / max(now - t0, 1e-9):.1f} MB/s", file=sys.stderr)

        info = write_longmemeval(args.out, args.questions, args.sessions, seed=args.seed,
                                 turns=tuple(args.turns), words_per_turn=tuple(args.words),
                                 shared_pool=args.pool, spice=args.spice,
                                 target_bytes=args.target_bytes,
                                 vocab_source=args.vocab_source,
                                 ensure_ascii=args.ensure_ascii, progress=progress,
                                 repeat_ids=args.repeat_ids,
                                 repeat_ids_any_length=args.repeat_ids_any_length,
                                 uneven_ids=args.uneven_ids, surrogates=args.surrogates)
    elif args.kind == "locomo":
        info = write_locomo(args.out, args.conversations, seed=args.seed,
                            sessions=tuple(args.sessions), turns=tuple(args.turns),
                            qa_per_conversation=tuple(args.qa), spice=args.spice,
                            vocab_source=args.vocab_source, surrogates=args.surrogates)
    else:
        info = write_cn(args.out, args.lme, seed=args.seed, fraction=args.fraction,
                        surrogates=args.surrogates)
    dt = time.perf_counter() - t0
    size = os.path.getsize(args.out)
    info["seconds"] = round(dt, 3)
    info["mb_per_s"] = round(size / 1e6 / max(dt, 1e-9), 1)
    print(json.dumps(info, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
