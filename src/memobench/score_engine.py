"""The scoring engine of ``memobench score`` (score_command.py) and the Python API's ``score`` (api.py), one
for both. ``memobench score RUN --dataset NAME``: another system's run file scored
under the harness rules beside a variant of the project (docs/imported-runs.md);
``memobench score --system URL --dataset NAME``: a running memory service
measured the same way, with its search latency (docs/memory-services.md);
``--mcp COMMAND|URL`` for an MCP server (started by the command over stdio,
or reached at its streamable-HTTP URL).

The file becomes an imported variant in a generated config overlay
(``results/.score/{dataset}/{variant}.yaml``, over config.yaml and the
``--configfile`` files given), and Snakemake itself makes that variant's and
the compared variant's metrics.json and official.json: the pipeline's cached
stages (normalized tables, the compared variant's lists) are reused, nothing
needs a config edit, and a rerun with the same file does nothing. Then the
harness metrics, the official metrics and the paired comparison (stats.py,
the same test the stats stage runs) are printed.

The workflow is found without assuming where the package is installed:
``--workflow DIR``, else ``$MEMOBENCH_WORKFLOW``, else the current directory
or the nearest parent holding the project's Snakefile (beside
``workflow/rules/``); ``--snakefile`` names the file itself.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .core import layout
from .core.config import RESERVED, SAFE_NAME, dataset_family, validate
from .core.errors import ConfigError
from .evaluation.published import REFERENCE
from .catalog.variants import known_variants, resolve
from .score_text import (data_file_line, harness_line, latency_lines, official_convention, official_line,
                         paired_lines, turn_lines)

WORKFLOW_ENV = "MEMOBENCH_WORKFLOW"


class ScoreError(Exception):
    """One ``memobench:`` line."""


def _is_workflow(folder: Path) -> bool:
    return (folder / "Snakefile").is_file() and (folder / "workflow" / "rules").is_dir()


def find_workflow(given: str | None = None, env=os.environ, cwd: Path | None = None) -> Path:
    """The workflow's Snakefile: in ``given`` (``--workflow``), else in
    ``$MEMOBENCH_WORKFLOW``, else in the current directory or the nearest
    parent that holds a Snakefile beside ``workflow/rules/``."""
    named = given or env.get(WORKFLOW_ENV)
    if named:
        folder = Path(named).expanduser().resolve()
        if not _is_workflow(folder):
            how = "--workflow" if given else f"${WORKFLOW_ENV}"
            raise ScoreError(f"{how} {named}: no memobench workflow there (a Snakefile beside workflow/rules/); "
                             "give the folder of the project's checkout")
        return folder / "Snakefile"
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if _is_workflow(folder):
            return folder / "Snakefile"
    raise ScoreError(f"no memobench workflow in {start} or a folder above it; run memobench score inside the "
                     f"project's checkout, or point at it with --workflow DIR or {WORKFLOW_ENV}=DIR")


def sniff(path: Path) -> str:
    """A file's run format: a first line that is a JSON object with
    ``retrieval_results`` is a retrieval log, other text starting with "{" or
    "[" JSON (a JSON run; the reader names what an array is not), anything
    else TREC. A UTF-8 byte order mark is not text (RFC 8259 lets a reader
    ignore it; imported.read_run does)."""
    with open(path, "rb") as f:
        first = f.readline().removeprefix(codecs.BOM_UTF8)
        while first and not first.strip():
            first = f.readline()
    if first.lstrip().startswith(b"["):
        return "json"
    if not first.lstrip().startswith(b"{"):
        return "trec"
    try:
        obj = json.loads(first)
    except ValueError:
        return "json"
    return "retrievallog" if isinstance(obj, dict) and "retrieval_results" in obj else "json"


def _merged(base: dict, over: dict) -> dict:
    """Snakemake's merge of config files: mappings merged key by key, anything else replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config(snakefile: Path, overlays: list[str]) -> dict:
    config: dict = {}
    for path in [snakefile.parent / "config.yaml", *overlays]:
        config = _merged(config, read_config_file(path, ScoreError))
    validate(config, snakefile.parent / "workflow" / "schemas" / "config.schema.yaml")
    return config


def read_config_file(path, error=ScoreError) -> dict:
    """One config file's mapping; ``error`` with one line naming the file when it cannot be read or is
    not YAML."""
    import yaml

    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise error(f"{path}: cannot read the config file ({e.strerror})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        raise error(f"{path}: not valid YAML" + (f" (line {where.line + 1})" if where is not None else "")
                    + f": {getattr(e, 'problem', None) or e}") from None
    if not isinstance(loaded, dict):
        raise error(f"{path}: a config file is a mapping of keys, not a {type(loaded).__name__}")
    return loaded


def variant_name(path: Path | str, given: str | None, service: dict | None = None, stem: str | None = None) -> str:
    """The variant's name: ``given``, else ``stem`` (a retriever's function), else made from the run file's
    name (or a service's host and port, or its command's program)."""
    if stem is not None:
        pass
    elif isinstance(path, str):
        from urllib.parse import urlsplit

        url = (service or {}).get("url") or ((service or {}).get("mcp") or {}).get("url")
        if url is None:  # an MCP server started by a command: named by its program
            stem = "service-mcp-" + Path(service["mcp"]["command"][0]).name
        else:
            parts = urlsplit(url)
            stem = "service-" + ("mcp-" if "mcp" in service else "") + f"{parts.hostname}-{parts.port or parts.scheme}"
    else:
        stem = path.name.split(".")[0] or path.name
    name = given or re.sub(r"[^A-Za-z0-9._+-]", "-", stem)
    if not given and not re.fullmatch(SAFE_NAME, name):
        name = "run-" + name.lstrip("._+-")
    if not re.fullmatch(SAFE_NAME, name) or name in RESERVED:
        raise ScoreError(f"--name {name!r}: a variant name holds only letters, digits and ._+- (not starting "
                         f"with a symbol) and is not one of {', '.join(sorted(RESERVED))}")
    if name in known_variants():
        raise ScoreError(f"{path}: the variant name {name!r} is taken (a built-in or configured variant); "
                         f"give another with --name")
    return name


def definition(v, workdir: Path) -> str | None:
    """What decides a variant's results, as this command compares two of one name: an imported run's
    file (relative to ``workdir`` when it is so given), format and grain; a service's digest
    (:func:`memobench.services.definition.variant.definition`: the service, its settings and grain); a Python
    retriever's callable, params, prepare, documents and grain (its code's edits rerun it, as in the
    pipeline); None for any other kind (never this command's)."""
    from .retrieval.python import BACKEND as PYTHON
    from .services.definition.variant import BACKEND, definition as system_definition

    if v.run is not None:
        return json.dumps({"file": str(_absolute(v.run["file"], workdir)), "format": v.run["format"],
                           "grain": v.grain})
    if v.recipe.backend == PYTHON:  # a file's path as the jobs read it (from the working directory)
        spec = {k: (f"{_absolute(c.rpartition(':')[0], workdir)}:{c.rpartition(':')[2]}"
                    if isinstance(c, str) and c.rpartition(":")[0].endswith(".py") else c)
                for k, c in v.retriever.items()}
        return json.dumps({"retriever": spec, "documents": v.recipe.documents, "grain": v.grain}, sort_keys=True)
    return system_definition(v) if v.recipe.backend == BACKEND else None


def retriever_spec(given: str | dict) -> dict:
    """A retriever variant's ``retriever`` from ``--retriever`` (the Python API gives a mapping with
    ``params``, ``documents``, ``prepare``): a file's path made absolute from the current directory, as
    a run file's is (the pipeline's jobs import it from the working directory)."""
    spec = {"callable": given} if isinstance(given, str) else {k: v for k, v in given.items() if v is not None}
    for key in ("callable", "prepare"):
        target, _, func = str(spec.get(key) or "").rpartition(":")
        if target.endswith(".py"):
            path = Path(target).expanduser().resolve()
            if not path.is_file():
                raise ScoreError(f"--retriever {spec[key]}: no file {target} (looked for {path}); give the file "
                                 f"that holds your function")
            spec[key] = f"{path}:{func}"
    return spec


def _absolute(file: str, workdir: Path) -> Path:
    """A run file's path as the workflow reads it (relative paths start from the working directory)."""
    return (workdir / file).resolve()


def check_configured(path, name: str, config: dict, family: str, ours: str | None, workdir: Path) -> dict | None:
    """The config's own entry of ``name`` when it is this very variant (the same run file, or the same
    service with the same settings: its results are reused as the config made them), None when the name
    is free; a name the config gives another variant is refused (its folder holds the results the
    config's report shows)."""
    custom = config.get("variants") or {}
    listed = any(name in (ds.get("variants") or []) for ds in config["datasets"].values())
    if name not in custom and not listed:
        return None
    try:
        theirs = definition(resolve(name, family, custom), workdir) if name in custom else None
    except ConfigError:
        theirs = None
    if ours is None or theirs != ours:
        raise ScoreError(f"{path}: the variant name {name!r} is taken (a built-in or configured variant); "
                         f"give another with --name")
    return custom[name]


def check_owner(workdir: Path, dataset: str, name: str, run: Path | str, ours: str | None = None,
                family: str = "", n_segments: int = 1, retriever: bool = False) -> str | None:
    """The variant's folder holds nothing, or the results of this same
    definition: the same file (its metrics.json's run.file; before that, its
    overlay's), or the same service with the same settings (the definition
    its outcomes tables record, whether the pipeline or this command made
    them; before those exist, its overlay's), or the same Python retriever
    (``retriever``: its overlay's callable and settings). Another file's,
    service's, retriever's or setting's results are never replaced. Returns the description the
    results carry (metrics.json's), so that reusing them remakes nothing."""
    folder = workdir / layout.path(layout.VARIANT, dataset=dataset, variant=name)
    if not folder.is_dir() or not any(folder.iterdir()):
        return None
    metrics = _json(workdir / layout.path(layout.METRICS, dataset=dataset, variant=name)) or {}
    overlay = _json(workdir / layout.path(layout.SCORE_OVERLAY, dataset=dataset, variant=name))
    made = ((overlay or {}).get("variants") or {}).get(name) if isinstance(overlay, dict) else None
    owner = same = None
    try:
        if retriever:  # a Python retriever: the overlay that made the folder says what ranked it
            if made is not None:
                owner = (made.get("retriever") or {}).get("callable")
                same = definition(resolve(name, family, {name: made}), workdir) == ours
            elif str(metrics.get("harness", "")).startswith(RETRIEVER_HARNESS):
                owner, same = metrics["harness"][len(RETRIEVER_HARNESS):], False
        elif isinstance(run, str):  # a service: what made the outcomes, else the overlay that made the folder
            from .services.definition.variant import identity

            # tables an older memobench wrote record none: the overlay, where there is one, says instead
            recorded = recorded_definitions(workdir, dataset, name, n_segments) - {None}
            if made is not None:
                owner = identity(made["system"])
            elif str(metrics.get("harness", "")).startswith(SERVICE_HARNESS):
                owner = metrics["harness"][len(SERVICE_HARNESS):]
            if recorded:
                same = recorded == {ours}
            elif made is not None:
                same = definition(resolve(name, family, {name: made}), workdir) == ours
        else:
            owner = (metrics.get("run") or {}).get("file") if metrics else (made or {})["run"]["file"]
            same = owner is not None and str(_absolute(owner, workdir)) == str(run)
    except (ValueError, KeyError, TypeError, ConfigError):
        pass
    if same:
        return metrics.get("description")
    where = f"{run}: {folder.relative_to(workdir)}/ holds"
    if isinstance(run, str) and owner == run and same is None and not retriever:
        raise ScoreError(f"{where} results of {run} whose settings are not recorded (an older memobench made them); "
                         f"rerun the pipeline that made them, or give this run another name with --name")
    if isinstance(run, str) and owner == run:
        what = f"the results of {run} with other settings"
    else:
        what = f"the results of {owner}" if owner else "another variant's results"
    raise ScoreError(f"{where} {what}; give this run another name with --name")


SERVICE_HARNESS = "memory service: "  # a system variant's harness label, before its service's identity
RETRIEVER_HARNESS = "your retriever: "  # a Python retriever's, before its callable


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def recorded_definitions(workdir: Path, dataset: str, name: str, n_segments: int) -> set:
    """The definitions a system variant's segment outcomes tables record (:data:`system.DEFINITION_KEY`;
    None for a table without one), of the segments there."""
    import pyarrow.parquet as pq

    from .services.definition.variant import DEFINITION_KEY

    found = set()
    for i in range(1, n_segments + 1):
        path = workdir / layout.path(layout.SEGMENT_TABLE, dataset=dataset, variant=name,
                                     segment=layout.segment_name(i), suffix=layout.SEGMENT_SUFFIXES["outcomes"])
        try:
            meta = pq.read_schema(path).metadata or {}
        except (OSError, ValueError):
            continue
        found.add(meta[DEFINITION_KEY].decode() if DEFINITION_KEY in meta else None)
    return found


def service_of(url: str | None, mcp: str | None) -> dict:
    """A system variant's ``system`` from the command line: an HTTP API's URL, or ``--mcp``: an MCP server's
    streamable-HTTP URL or the command (one quoted argument) that starts it over stdio."""
    if url is not None:
        return {"url": url}
    if re.match(r"https?://", mcp):
        return {"mcp": {"url": mcp}}
    import shlex

    service = {"mcp": {"command": shlex.split(mcp)}}
    if not service["mcp"]["command"]:
        raise ScoreError("--mcp: give the command that starts the server, or its URL")
    _check_command(service["mcp"]["command"])
    return service


def _check_command(command: list[str]) -> None:
    """The program of an MCP server's command is there to start (the retrieve job says so too, but only
    after Snakemake has started; an environment not activated is the usual cause)."""
    import shlex
    import shutil

    program = command[0]
    if shutil.which(program) is None:
        why = ("is not an executable file" if os.sep in program else
               "is not on PATH (activate the environment that has it, or give its full path)")
        raise ScoreError(f"--mcp: the MCP server could not start: {shlex.join(command)}: {program!r} {why}")


def targets(dataset: str, variants: list[str]) -> list[str]:
    return [layout.path(p, dataset=dataset, variant=v) for v in variants for p in (layout.METRICS, layout.OFFICIAL)]


def run_snakemake(cmd: list[str], quiet: bool = False, workdir: Path | None = None) -> None:
    """Snakemake with its progress lines and memobench's own lines passed on (stderr). ``quiet`` (the
    Python API's default) passes nothing on: a failure's error is then the first ``memobench:`` line
    Snakemake's jobs said, else the last line of its output. A folder another Snakemake holds (a pipeline
    running there) is one line saying so."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    said: list[str] = []
    held = False
    for line in proc.stdout:
        tail = (tail + [line.rstrip("\n")])[-30:]
        held = held or "Directory cannot be locked" in line
        if line.startswith("memobench:") or re.match(r"\d+ of \d+ steps", line):
            if not quiet:
                print(line.rstrip("\n"), file=sys.stderr)
            if line.startswith("memobench:"):
                said.append(line.rstrip("\n").removeprefix("memobench:").strip())
    if proc.wait() != 0:
        if held:
            raise ScoreError(f"another run holds {workdir or 'the working directory'} (a snakemake running there "
                             f"now); nothing was run: score again when it has ended (should none be running, a "
                             f"killed one left its lock: snakemake --unlock in that folder removes it)")
        if quiet:
            why = said[0] if said else next((t.strip() for t in reversed(tail) if t.strip()), "no output")
            raise ScoreError(f"the pipeline failed (snakemake exit status {proc.returncode}): {why}")
        if not said:
            print("\n".join(tail), file=sys.stderr)
        raise ScoreError(f"the pipeline failed (snakemake exit status {proc.returncode}); the line above says why")


def paired_or_why(ds: str, name: str, against: str, m: dict, outcomes, against_outcomes) -> list[str]:
    """:func:`paired_lines` of ``name`` against ``against``, or, for a run covering too few of the
    evaluated questions, why there is none (the report's rule, stats.py)."""
    c = paired(ds, name, against, m, outcomes, against_outcomes)
    return [c] if isinstance(c, str) else paired_lines(c)


def paired(ds: str, name: str, against: str, m: dict, outcomes, against_outcomes) -> dict | str:
    """The paired comparison of ``name`` against ``against`` (:func:`memobench.evaluation.stats.compare`),
    or, for a run covering too few of the evaluated questions, the line saying why there is none."""
    from .evaluation.metrics import MIN_COVERAGE, coverage, too_few
    from .evaluation.stats import compare, per_question

    cov, n = coverage(m)
    if too_few(cov, n):
        return (f"no paired comparison: {name} covers {cov} of {n} questions, fewer than {100 * MIN_COVERAGE:g}% "
                f"of the evaluated questions (each question it does not list counts as its miss, so a difference "
                f"would measure its coverage, not its ranking)")
    return compare(name, against, per_question(outcomes), per_question(against_outcomes), ds)


def scored(args) -> dict:
    """:func:`_scored`, one at a time in a working directory (:func:`one_at_a_time`)."""
    import contextlib

    with contextlib.ExitStack() as held:
        return _scored(args, lambda workdir: held.enter_context(one_at_a_time(workdir, getattr(args, "quiet", False))))


def one_at_a_time(workdir: Path, quiet: bool = False):
    """Holds the working directory's score lock (layout.SCORE_LOCK), waiting for another ``memobench score``
    that holds it (it says so unless ``quiet``): a second run started meanwhile waits for the first's
    Snakemake to end, rather than failing on Snakemake's lock while the first still runs."""
    import contextlib
    import fcntl

    @contextlib.contextmanager
    def hold():
        path = workdir / layout.SCORE_LOCK
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not quiet:
                    print(f"memobench score: another memobench score runs in {workdir}; waiting for it to end",
                          file=sys.stderr, flush=True)
                fcntl.flock(f, fcntl.LOCK_EX)
            except OSError:
                pass  # a filesystem without locks: Snakemake's own lock still keeps two runs apart
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    return hold()


def _scored(args, one_at_a_time) -> dict:
    """Score ``args``'s run (or service) through the pipeline: the printed text (``text``) and the
    figures it states: ``dataset``, ``variant``, ``against``, the variant's metrics.json
    (``metrics``) and official.json (``official``), ``against_metrics``, and ``paired``, the paired
    comparison (:func:`paired`: a dict, the line saying why there is none, or None without
    ``against``), and a service's ``latency`` (:func:`latency_summary`; None for the other kinds).
    ``args.quiet`` (the Python API) prints nothing. Besides a run file, ``--system`` or ``--mcp`` (the
    Python API may give ``system`` as the config's mapping), ``--retriever`` (the API: a mapping with
    ``params``, ``documents``, ``prepare``) scores a Python retriever as a retriever variant and
    ``--variant`` a built-in or configured variant as the config defines it."""
    from .evaluation.published import published

    quiet = getattr(args, "quiet", False)
    given_retriever, given_variant = getattr(args, "retriever", None), getattr(args, "variant", None)

    if [args.run, args.system, args.mcp, given_retriever, given_variant].count(None) != 4:
        raise ScoreError("give a run file, --system URL for a memory service, --mcp COMMAND|URL for an MCP one, "
                         "--retriever CALLABLE for your Python retriever or --variant NAME for a configured variant "
                         "(one of them)")
    service = spec = None
    kind = "run"
    if given_retriever is not None or given_variant is not None:
        kind = "retriever" if given_retriever is not None else "variant"
        for flag in ("format", "k"):
            if getattr(args, flag) is not None:
                raise ScoreError(f"--{flag} is a run file's or a memory service's setting, not "
                                 f"{'a Python retriever' if kind == 'retriever' else 'a configured variant'}'s")
        if kind == "variant" and args.name is not None:
            raise ScoreError(f"--name names a run, service or retriever scored here; --variant {given_variant} "
                             f"keeps its own name")
        if kind == "variant" and args.grain != "session":
            raise ScoreError(f"--grain is a run's or service's; --variant {given_variant}'s grain is its definition's")
        if kind == "retriever":
            spec = retriever_spec(given_retriever)
            run = spec.get("callable")
        else:
            run = given_variant
    elif args.system is not None or args.mcp is not None:
        from .services.definition.variant import MIN_K, identity

        kind = "service"
        if args.format:
            raise ScoreError("--format is a run file's; a memory service answers over its API")
        service = dict(args.system) if isinstance(args.system, dict) else service_of(args.system, args.mcp)
        if isinstance(args.system, dict):  # the config's mapping (the Python API): checked as the config's is
            from .catalog.variant import FAMILIES
            from .services.definition.variant import system_variant

            system_variant("service", FAMILIES[0], {"system": service})
        if args.k is not None:
            if args.k < MIN_K:
                raise ScoreError(f"--k {args.k}: give how many results each search asks for, {MIN_K} or more "
                                 f"(hit@10 and MRR read 10 results)")
            service["k"] = args.k
        run = identity(service)
    else:
        if args.k is not None:
            raise ScoreError("--k is a memory service's search depth; a run file's lists are read as they are")
        run = Path(args.run).resolve()
        if not run.is_file():
            raise ScoreError(f"{args.run}: no such file; give the run file's path")
    snakefile = Path(args.snakefile).resolve() if args.snakefile else find_workflow(args.workflow)
    if not snakefile.is_file():
        raise ScoreError(f"{snakefile}: no Snakefile there; give the workflow with --snakefile")
    workdir = Path(args.directory).resolve()
    config = load_config(snakefile, args.configfile)
    ds = args.dataset
    if ds not in config["datasets"]:
        raise ScoreError(f"--dataset {ds!r} is not configured (configured: {', '.join(config['datasets'])}); "
                         f"add it under datasets, or give the --configfile that has it")
    entry = config["datasets"][ds]
    family = dataset_family(entry)
    custom = config.get("variants") or {}
    fmt = args.format or sniff(run) if kind == "run" else None
    if kind == "variant":
        name = run
        if name not in custom and name not in known_variants():
            raise ScoreError(f"--variant {name!r}: no such variant in {', '.join(['config.yaml', *args.configfile])} "
                             f"(the built-in variants: memobench variants; a variant of your own is defined under "
                             f"variants: in a config file: give that file with --configfile)")
        try:
            resolve(name, family, custom)
        except ConfigError as e:
            raise ScoreError(f"--variant: {e}") from None
    else:
        stem = None
        if kind == "retriever":  # named by its function, as a run by its file
            stem = re.sub(r"[^A-Za-z0-9._+-]", "-", str(run).rpartition(":")[2].rpartition(".")[2]) or "retriever"
        name = variant_name(run, args.name, service, stem)
    against = args.against
    if against is None:
        try:
            resolve(REFERENCE, family, custom)
            against = REFERENCE if name != REFERENCE else None
        except ConfigError:
            pass
        if against is None:
            against = next((v for v in entry["variants"] if v != name), None)
    earlier = None
    if against is not None:
        if against == name:
            raise ScoreError(f"--against {against!r} is the run itself; name another variant")
        earlier = scored_before(workdir, ds, against) if against not in custom else None
        if earlier is not None:  # a run, retriever or service this command scored: compared as it was defined
            custom = {**custom, against: earlier}
        if against not in custom and against not in known_variants():
            given = ", ".join(["config.yaml", *args.configfile])
            raise ScoreError(f"--against {against!r}: no such variant in {given}; a variant of your own is "
                             f"defined under variants: in a config file: give that file with --configfile "
                             f"(the built-in variants: memobench variants)")
        try:
            resolve(against, family, custom)
        except ConfigError as e:
            raise ScoreError(f"--against: {e}") from None
    variant = None
    if kind == "service":
        variant = {"system": service, "description": f"the memory service at {identity(service, public=True)}, "
                                                      f"measured by memobench score"}
    elif kind == "retriever":
        variant = {"retriever": spec, "description": f"{run}, scored by memobench score"}
    elif kind == "run":
        variant = {"run": {"file": str(run), "format": fmt},
                   "description": f"{run.name}, scored by memobench score"}
    if against and kind == "run":  # an imported run's paired statistics (a service's: every pair)
        variant["against"] = against
    if args.grain == "turn" and variant is not None:
        variant["grain"] = "turn"
    # from here on, the folder's results are read and made: by one run at a time
    one_at_a_time(workdir)
    if variant is not None:
        # a bad format for the dataset (or a bad retriever entry) fails here, in one line
        ours = definition(resolve(name, family, {**custom, name: variant}), workdir)
        configured = check_configured(run, name, config, family, ours, workdir)
        if configured is not None:
            variant = configured  # the config's own variant: its results, as the config made them
        else:
            description = check_owner(workdir, ds, name, run, ours, family, entry["segments"],
                                      retriever=kind == "retriever")
            if description is not None:  # the same definition's results: reused, not remade for a new label
                variant["description"] = description
    overlay = Path(layout.path(layout.SCORE_OVERLAY, root=workdir / layout.RESULTS, dataset=ds, variant=name))
    overlay.parent.mkdir(parents=True, exist_ok=True)
    # a fusion is compared with once the variants it fuses are listed beside it (the config's rule)
    compared = [v for v in (against, name) if v]
    fused = [f for v in compared for f in ((custom.get(v) or {}).get("fuse") or {}).get("of") or []]
    listed = list(dict.fromkeys([*fused, *compared]))
    defined = {**({against: earlier} if earlier is not None else {}), **({name: variant} if variant else {})}
    overlay.write_text(json.dumps({"run": [ds], "datasets": {ds: {"variants": listed}},
                                   **({"variants": defined} if defined else {})}, indent=1) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "snakemake", *targets(ds, compared), "-s", str(snakefile), "-d", str(workdir),
           "--configfile", *[str(Path(c).resolve()) for c in args.configfile], str(overlay), "--cores",
           str(args.cores)]
    what = {"service": f"the memory service at {run}", "retriever": f"your retriever {run}",
            "variant": f"the variant {run}"}.get(kind) or f"{run.name} ({fmt})"
    if not quiet:
        print(f"memobench score: {what} as variant {name!r} of {ds}"
              + (f", against {against}" if against else "") + f"; overlay {overlay.relative_to(workdir)}",
              file=sys.stderr)
    run_snakemake(cmd, quiet, workdir)

    def read(v: str, pattern: str) -> dict:
        return json.loads((workdir / layout.path(pattern, dataset=ds, variant=v)).read_text(encoding="utf-8"))

    m, off = read(name, layout.METRICS), read(name, layout.OFFICIAL)
    out = [f"{run} scored as {name!r} on {ds} ({layout.path(layout.VARIANT, dataset=ds, variant=name)}/; "
           f"{layout.REPORT_MD} lists it from the pipeline's next run on)",
           data_file_line(workdir / layout.path(layout.VERIFIED, dataset=ds)), "",
           "harness metrics (the Memo harness's rules: first gold rank in the top 10):",
           harness_line(name, m)]
    am = comparison = None
    if against:
        am, aoff = read(against, layout.METRICS), read(against, layout.OFFICIAL)
        out.append(harness_line(against, am, published(ds, against)))
    miss = dict(m["counted_as_miss"])
    skipped = ", ".join(f"{k} {v}" for k, v in m["skipped"].items()) or "none"
    if kind == "service":
        errors = m.get("system_errors") or {}
        out.append(f"  {name}: items {m['items']}; skipped: {skipped}; failed at the service (counted as misses): "
                   f"{errors.get('count', 0)}")
        if m.get("attribution"):
            from .retrieval.attribution import stated

            out.append(f"  {name}: {stated(m['attribution'])}")
    elif kind != "run":
        out.append(f"  {name}: items {m['items']}; skipped: {skipped}"
                   + (f"; counted as misses: {', '.join(f'{k} {v}' for k, v in miss.items())}" if miss else ""))
    else:
        out.append(f"  {name}: items {m['items']}; skipped: {skipped}"
                   + f"; absent from the run (counted as misses): {miss.pop('absent_from_run', 0)}"
                   + (f"; other misses: {', '.join(f'{k} {v}' for k, v in miss.items())}" if miss else "")
                   + (f"; lists ignored (questions the rules skip): "
                      f"{', '.join(f'{k} {v}' for k, v in m['run']['ignored'].items())}" if m["run"]["ignored"]
                      else ""))
    fmt_ds = entry["format"]
    rules = (off["official"] or {}).get("rules", "none")
    grain = " of its sessions at their best turn" if off.get("turn") else ""
    top = official_convention(off["official"])
    named = f"; convention {top}" if top else ""
    out += ["", f"official metrics{grain} ({rules}{named}):", official_line(name, off["official"], fmt_ds)]
    if against:
        out.append(official_line(against, aoff["official"], fmt_ds))
    for conv, block in ((off["official"] or {}).get("conventions") or {}).items():
        if conv == top:
            continue
        out += [f"convention {conv} ({block.get('convention', '')}):", official_line(name, block, fmt_ds)]
        theirs = (((aoff or {}).get("official") or {}).get("conventions") or {}).get(conv) if against else None
        if theirs:
            out.append(official_line(against, theirs, fmt_ds))
    if against:
        n_seg = entry["segments"]
        outcomes = [[workdir / layout.path(layout.SEGMENT_TABLE, dataset=ds, variant=v, segment=layout.segment_name(i),
                                           suffix=layout.SEGMENT_SUFFIXES["outcomes"]) for i in range(1, n_seg + 1)]
                    for v in (name, against)]
        comparison = paired(ds, name, against, m, *outcomes)
        record_paired(workdir, ds, name, against, comparison)
        out += ["", *([comparison] if isinstance(comparison, str) else paired_lines(comparison))]
    if off.get("turn"):
        out += ["", *turn_lines(name, off["turn"])]
    latency = None
    if kind == "service":
        latency = latency_summary(workdir, ds, name, entry["segments"], m)
        out += ["", *latency_lines(latency)]
    return {"text": "\n".join(out), "dataset": ds, "variant": name, "against": against, "metrics": m,
            "official": off, "against_metrics": am, "paired": comparison, "latency": latency, "workdir": workdir}


def scored_before(workdir: Path, ds: str, name: str) -> dict | None:
    """The definition of ``name`` in the overlay this command wrote when it scored ``name`` on ``ds`` (its
    results are that overlay's: :func:`check_owner` keeps another definition out of its folder), None
    where it scored none of that name or its results are gone."""
    overlay = _json(workdir / layout.path(layout.SCORE_OVERLAY, dataset=ds, variant=name))
    made = ((overlay or {}).get("variants") or {}).get(name) if isinstance(overlay, dict) else None
    if made is None or not (workdir / layout.path(layout.METRICS, dataset=ds, variant=name)).is_file():
        return None
    return made


def record_paired(workdir: Path, ds: str, name: str, against: str, comparison: dict | str) -> None:
    """The paired comparison this command made, kept beside its overlay (layout.SCORE_PAIRED) so that the
    Python API's ``load`` lists it before the pipeline's stats stage compares the pair; a run covering too
    few questions has none (an older one is removed)."""
    path = Path(layout.path(layout.SCORE_PAIRED, root=workdir / layout.RESULTS, dataset=ds, variant=name,
                            against=against))
    if isinstance(comparison, str):
        path.unlink(missing_ok=True)
        return
    path.write_text(json.dumps({"dataset": ds, **comparison, "against": "memobench score"}, indent=1) + "\n",
                    encoding="utf-8")


def latency_summary(workdir: Path, ds: str, name: str, n_segments: int, metrics: dict) -> dict:
    """The service's search latency (:func:`memobench.evaluation.latency.summarize` of its timings: a
    measurement of this run)."""
    import pyarrow.parquet as pq

    from .evaluation.latency import summarize

    rows = [r for i in range(1, n_segments + 1) for r in pq.read_table(
        workdir / layout.path(layout.TIMINGS, dataset=ds, variant=name, segment=layout.segment_name(i))).to_pylist()]
    return summarize(ds, name, rows, metrics)


