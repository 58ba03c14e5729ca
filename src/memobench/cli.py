"""Command line: `memobench variants` lists the named variants and the
original harness each reproduces; `memobench recipe-table` prints the recipe
fields with their allowed values (the README's table); `memobench score RUN
--dataset NAME` scores another system's run file beside a variant (score_command.py);
`memobench check-service URL` checks a memory service (check_service.py); `memobench board` writes
a results folder's board as CSV and LaTeX (board_command.py); `memobench bundle` / `memobench verify`
write and check one variant's result as one file (bundle.py)."""

from __future__ import annotations

import argparse
import sys

from .catalog.variant import FAMILIES
from .catalog.variants import builtin, references
from .core.doc import aligned


def harness_text(harnesses: dict[str, str]) -> str:
    """The original harness of a variant, per family where they differ
    (v0.8.0: run.cjs on S, run-m.cjs on M, locomo.cjs on LoCoMo)."""
    if len(set(harnesses.values())) == 1:
        return next(iter(harnesses.values()))
    heads = {f: h.split(" ", 1) for f, h in harnesses.items()}
    tails = {tuple(p[1:]) for p in heads.values()}
    if len(tails) == 1:  # the same words after the script's name: "run.cjs with length weights"
        (tail,) = tails
        return ", ".join(f"{p[0]} ({f})" for f, p in heads.items()) + "".join(f" {t}" for t in tail)
    return "; ".join(f"{h} ({family})" for family, h in harnesses.items())


VARIANT_HEADER = ("variant", "families", "harness", "description")


def variant_rows(families) -> list[tuple[str, str, str, str]]:
    """One row per built-in variant of ``families``: the Memo variants, then
    the reference retrievers (as the help says), each with the families it
    applies to and its harness per family."""
    memo: dict[str, tuple] = {}
    refs: dict[str, tuple] = {}
    for family in families:
        for table, variants in ((memo, builtin(family)), (refs, references(family))):
            for name, var in variants.items():
                table.setdefault(name, (var, {}))[1][family] = var.harness
    return [(name, ",".join(harnesses), harness_text(harnesses), var.description)
            for name, (var, harnesses) in {**memo, **refs}.items()]


def main(argv: list[str] | None = None) -> int:
    from . import __version__

    parser = argparse.ArgumentParser(prog="memobench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"memobench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("variants", help="list the built-in variants (the reference retrievers last)")
    v.add_argument("--family", choices=FAMILIES, help="only the variants of one dataset family")
    sub.add_parser("recipe-table", help="the recipe fields, their defaults and allowed values (Markdown)")
    from .score_command import add_arguments

    add_arguments(sub.add_parser("score", help="score another system's run file under the harness rules, beside "
                                               "a variant (docs/imported-runs.md)"))
    from .services.reference_servers.http_server import add_arguments as serve_arguments

    serve_arguments(sub.add_parser("serve", help="serve a reference retriever as a memory service over HTTP or MCP, the "
                                               "API a system variant drives (docs/memory-services.md)"))
    from .check_service import add_arguments as check_arguments

    check_arguments(sub.add_parser("check-service", help="check in seconds that a memory service keeps the API's "
                                                         "promises, before a run (docs/memory-services.md)"))
    from .board_command import add_arguments as board_arguments

    board_arguments(sub.add_parser("board", help="every result in a results folder, a leaderboard per dataset, each "
                                                 "table as CSV and LaTeX and a recall-against-k figure "
                                                 "(docs/results.md#the-board)"))
    from .bundle import add_bundle_arguments, add_verify_arguments

    add_bundle_arguments(sub.add_parser("bundle", help="one variant's result on one dataset as one file others can "
                                                       "verify (docs/results.md#result-bundles)"))
    add_verify_arguments(sub.add_parser("verify", help="rescore a bundle against your copy of its data file, figure "
                                                       "by figure; refuse one that does not hold"))
    args = parser.parse_args(argv)
    from .core.secrets import masked_output

    with masked_output():  # a secret read from the environment ($NAME) is starred in all it prints
        return _run(args)


def _run(args) -> int:
    if args.command == "check-service":
        from .check_service import main as check_service

        return check_service(args)
    if args.command == "serve":
        from .services.reference_servers.http_server import main as serve

        return serve(args)
    if args.command in ("bundle", "verify"):
        from .bundle import bundle_main, verify_main

        return (bundle_main if args.command == "bundle" else verify_main)(args)
    if args.command == "board":
        from .board_command import main as board

        return board(args)
    if args.command == "score":
        from .score_command import main as score

        return score(args)
    if args.command == "recipe-table":
        from .memo.recipe import markdown_table

        print(markdown_table(), end="")
    if args.command == "variants":
        print("\n".join(aligned(VARIANT_HEADER, variant_rows([args.family] if args.family else FAMILIES))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
