"""``memobench check-service URL`` (or ``--mcp COMMAND|URL``, or ``--variant
NAME`` of a configured system variant, with its ``--configfile``): the
conformance check of a memory service (:mod:`.services.conformance`) as a table,
one line per check; exit 0 when every check run passed, else 1. Apart from
the check itself so that the retrieve stage, which runs the check, does not
depend on the command line's code (its jobs' code fingerprint)."""

from __future__ import annotations

from .services.conformance import Result, first_failure, run


def table(results: list[Result]) -> str:
    """The results as the command prints them: a header and one aligned line per check."""
    from .core.doc import aligned

    return "\n".join(aligned(("check", "result", "why"), [(r.check, r.status, r.why) for r in results])) + "\n"


def add_arguments(p) -> None:
    p.add_argument("url", nargs="?", help="the memory service's HTTP API (http://host:port), with the defaults of a "
                                          "system variant")
    p.add_argument("--mcp", metavar="COMMAND|URL",
                   help="an MCP memory service with the reference server's tools: the command that starts it over "
                        "stdio (one quoted argument), or its streamable-HTTP URL")
    p.add_argument("--variant", metavar="NAME", help="a configured system variant: its service and settings "
                                                     "(endpoints, tools, results, isolation, ...)")
    p.add_argument("--configfile", nargs="+", default=[], help="config files holding --variant, over the "
                                                                "workflow's config.yaml")
    p.add_argument("--workflow", metavar="DIR", help="the project's checkout (default: as memobench score finds it)")


def variant_of(args):
    """The system variant the command checks: ``--variant`` from config, or one of the URL or ``--mcp``
    with every default; a ConfigError line for what cannot be one."""
    from .core.errors import ConfigError
    from .services.definition.variant import system_variant
    from .score_engine import ScoreError, _merged, find_workflow, load_config, read_config_file, service_of

    if [args.url, args.mcp, args.variant].count(None) != 2:
        raise ConfigError("check-service: give the service's URL, --mcp COMMAND|URL, or --variant NAME of a "
                          "configured system variant (one of them)")
    if args.variant is None:
        try:
            return system_variant("check-service", "s", {"system": service_of(args.url, args.mcp)})
        except ScoreError as e:
            raise ConfigError(str(e)) from None
    try:
        snakefile = find_workflow(args.workflow)
    except ScoreError:
        snakefile = None
    if snakefile is not None:
        try:
            config = load_config(snakefile, args.configfile)
        except ScoreError as e:  # a file that cannot be read, or a config the schema refuses
            raise ConfigError(str(e)) from None
    elif not args.configfile:
        raise ConfigError("--variant: no workflow found (its config.yaml) and no --configfile given; give the "
                          "config file that defines the variant")
    else:
        config = {}
        for path in args.configfile:  # outside a checkout: the files given, merged as Snakemake does
            config = _merged(config, read_config_file(path, ConfigError))
    entry = (config.get("variants") or {}).get(args.variant)
    if entry is None:
        raise ConfigError(f"--variant {args.variant!r}: no such variant in {', '.join(args.configfile or ['config.yaml'])}"
                          f" (a system variant is defined under variants: with system:)")
    if not isinstance(entry, dict) or "system" not in entry:
        raise ConfigError(f"--variant {args.variant!r} is not a system variant (it has no system:)")
    if entry.get("grain", "session") != "session":
        raise ConfigError(f"--variant {args.variant!r} ranks turns; the check asks for sessions and session ids")
    return system_variant(args.variant, "s", {k: x for k, x in entry.items() if k != "grain"})


def main(args) -> int:
    """``memobench check-service``: the table on stdout; 0 when every check run passed, else 1."""
    import sys

    from .core.errors import ConfigError
    from .services.transport.client import StartFailed

    try:
        v = variant_of(args)
        print(f"memobench check-service: {v.retriever['identity']}", file=sys.stderr)
        results = run(v.retriever, where=f"variant {v.name!r}")
    except ConfigError as e:
        print(f"memobench: {e}", file=sys.stderr)
        return 1
    except StartFailed as e:
        print(f"memobench: the MCP server could not start: {e}", file=sys.stderr)
        return 1
    print(table(results), end="")
    return 1 if first_failure(results) else 0
