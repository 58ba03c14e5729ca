"""The one adapter between the workflow's rules and the package.

Every rule runs ``workflow/scripts/stage.py RULE THREADS LOG`` with its job on
stdin: two lines, Python literals of the job's params and wildcards
(:func:`job_literal`) and of its named inputs and outputs
(:func:`files_literal`), which the workflow's ``stage_params`` computes in
Snakemake's process. The script calls :func:`main`, which imports
the stage module named like the rule (``memobench.stages.<rule>``, which
registers its stage with :func:`stage`), checks that the rule gives exactly
the named inputs, outputs and params the stage declares (a renamed or missing
name is a bug caught on the first run, not a silently wrong positional
argument), opens the rule's log and calls the stage with a :class:`Job`.

Why not Snakemake's ``script:``: its job process imports Snakemake to
unpickle the job object, about 0.1 s of CPU per job, most of what a small job
costs (a run of every S variant starts over a hundred jobs). A Python
literal keeps what pickling kept for the values params hold (tuples stay
tuples), and the job's process imports nothing of Snakemake.

This module holds no stage: each stage is a module of its own and imports
the modules it needs inside its body. The workflow derives each stage's code
fingerprint from this module's imports and that stage module's
(``fingerprint.py``), so an edit reruns the stages that use the edited code
and nothing else; an edit here reruns every stage.
"""

from __future__ import annotations

import ast
import errno
import gc
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.errors import USER_ERRORS
from ..core.progress import set_console
from ..core.secrets import mask, masked_output

# Params every rule may carry for Snakemake's rerun triggers only.
TRIGGER_PARAMS = frozenset({"code", "stamp"})


@dataclass(frozen=True)
class Stage:
    name: str
    func: Callable
    inputs: frozenset[str]
    optional_inputs: frozenset[str]
    outputs: frozenset[str]
    params: frozenset[str]
    # runs third-party model code (sentence-transformers) that may want pandas
    models: bool = False


STAGES: dict[str, Stage] = {}
# the modules of this package that are not a stage
NOT_STAGES = frozenset({"adapter"})


def stage(name: str, *, inputs=(), optional=(), outputs=(), params=(), models=False):
    """Register ``func`` as the stage that rule ``name`` runs."""

    def register(func):
        STAGES[name] = Stage(name, func, frozenset(inputs), frozenset(optional), frozenset(outputs),
                             frozenset(params), models)
        return func

    return register


class Names:
    """Read-only attribute access to one kind of a job's named files or values."""

    def __init__(self, kind: str, values: dict):
        self._kind, self._values = kind, dict(values)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no {self._kind} named {name!r}") from None

    def get(self, name, default=None):
        return self._values.get(name, default)

    def files(self, name) -> list:
        """The files bound to ``name`` as a list, whether one or several."""
        value = getattr(self, name)
        return value if isinstance(value, list) else [value]

    def __contains__(self, name) -> bool:
        return name in self._values


@dataclass(frozen=True)
class Job:
    input: Names
    output: Names
    params: Names
    wildcards: Names
    log: Callable[[str], None]
    # the cores Snakemake gave the job (its rule's threads, capped by --cores):
    # how it may work, never what it writes
    threads: int = 1
    # the workflow's script that runs every stage (workflow/scripts/stage.py), as it named itself:
    # part of a retrieve job's sibling fingerprints
    script: Path | None = None


def check_names(st: Stage, inputs, outputs, params) -> list[str]:
    """What a rule gives that its stage does not declare, or lacks that it does."""
    problems = []
    for kind, given, required, allowed in (
        ("input", set(inputs), st.inputs, st.inputs | st.optional_inputs),
        ("output", set(outputs), st.outputs, st.outputs),
        ("params", set(params) - TRIGGER_PARAMS, st.params, st.params),
    ):
        for n in sorted(required - given):
            problems.append(f"missing {kind} {n!r}")
        for n in sorted(given - allowed):
            problems.append(f"undeclared {kind} {n!r}")
    return problems


def _sqlite_error(e: BaseException) -> bool:
    """Whether ``e`` is SQLite's OperationalError; a job that never imported
    sqlite3 (most) raised none, and does not import it to ask."""
    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(e, sqlite3.OperationalError)


def environment_message(e: Exception) -> str | None:
    """One line for an ordinary environment failure, with the advice that fits."""
    if _sqlite_error(e):
        text = str(e)
        if "disk is full" in text:
            return f"SQLite: {text}; free some space and rerun (finished outputs are kept)"
        if "readonly" in text or "read-only" in text:
            return f"SQLite: {text}; check the permissions of results/"
        if "locked" in text or "busy" in text:
            return (f"SQLite: {text}: another process is using the same index; let that run finish "
                    f"(snakemake's lock stops two runs on one folder) and rerun")
        return None
    where = e.filename or "a file"
    if e.errno == errno.ENOSPC:
        return f"{where}: no space left on device; free some space and rerun (finished outputs are kept)"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{where}: not writable ({e.strerror}); check the permissions of results/ and data_dir"
    if e.errno == errno.EDQUOT:
        return f"{where}: disk quota exceeded; free some space and rerun"
    return None


def stage_names() -> list[str]:
    """Every stage: the modules of this package but the adapter, each named like its rule."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name not in NOT_STAGES)


def load_stage(name: str) -> Stage | None:
    """The stage of rule ``name`` (None if there is none), its module imported
    first: importing a stage module registers its stage. Only that module is
    imported, so a job loads its own stage's code and no other's."""
    if name not in STAGES and name in stage_names():
        importlib.import_module(f"{__package__}.{name}")
    return STAGES.get(name)


def all_stages() -> dict[str, Stage]:
    """Every stage, registered (for checks that look at all of them)."""
    for name in stage_names():
        load_stage(name)
    return STAGES


def named_values(items) -> dict:
    """Snakemake's Namedlist (a rule's input or output, read by its names) as
    {name: value}; a name bound to several files gives a list."""
    out = {}
    for name in items.keys():
        value = getattr(items, name)
        out[name] = list(value) if isinstance(value, list) else value
    return out


def job_literal(params: dict, wildcards: dict) -> str:
    """A job's params and wildcards as the first line :func:`main` reads: a
    Python literal (strings, numbers, booleans, None, lists, tuples and dicts
    of them; a value of another type is an internal error in the job)."""
    return repr({"params": params, "wildcards": wildcards})


def files_literal(inputs: dict, outputs: dict) -> str:
    """A job's named inputs and outputs as the second line :func:`main` reads."""
    return repr({"input": inputs, "output": outputs})


def main(argv: list[str], job_text: str, script: Path | None = None) -> None:
    """Run the stage registered under the rule's name: ``argv`` is the rule,
    the job's threads and its log; ``job_text`` the job, two lines
    (:func:`job_literal`, :func:`files_literal`). Called by the workflow's
    script, which passes its own path."""
    rule, threads, log_path = argv
    st = load_stage(rule)
    if st is None:
        sys.exit(f"memobench: internal error: no stage registered for rule {rule!r}")
    try:
        job = {}
        for line in job_text.strip().split("\n"):
            job.update(ast.literal_eval(line))
    except (ValueError, SyntaxError, TypeError) as e:
        sys.exit(f"memobench: internal error: rule {rule!r}: its job is not a Python literal ({e}): "
                 f"{job_text.strip()[:300]}")
    inputs, outputs, params, wildcards = job["input"], job["output"], job["params"], job["wildcards"]
    problems = check_names(st, inputs, outputs, params)
    if problems:
        sys.exit(f"memobench: internal error: rule {rule!r} does not match its stage: {'; '.join(problems)}")
    if not st.models:
        without_pandas()
    run_logged(log_path, st.func, inputs, outputs, params, wildcards,
               console=f"{rule} {'/'.join(map(str, wildcards.values()))}".rstrip(), threads=int(threads),
               script=script)
    # The job is done and its files are closed: what it still holds goes with
    # the process, so the collector's last pass over it is skipped (gc.freeze):
    # after matplotlib or pyarrow it is a pass over many objects for nothing.
    gc.freeze()


def without_pandas() -> None:
    """Tell pyarrow that pandas is absent. No stage of ours uses pandas, but
    pyarrow imports it the first time ``pa.array`` or a dataset read checks
    whether it was handed a pandas object, a slow import repeated by every
    job of a run for nothing. A stage running model code
    (``models=True``) keeps the normal import system."""
    without("pandas")


def without(module: str) -> None:
    """Make ``module`` (a top-level package) not importable in this job, so
    that a library that imports it only when installed (pyarrow: pandas and
    numpy) runs as if it were not."""
    if module not in sys.modules and not any(getattr(f, "hidden", None) == module for f in sys.meta_path):
        sys.meta_path.insert(0, Hidden(module))


class Hidden:
    """An import finder for which the module ``hidden`` and its submodules do
    not exist (a ``None`` in sys.modules would crash pyarrow's checks)."""

    def __init__(self, hidden: str):
        self.hidden = hidden

    def find_spec(self, name, path=None, target=None):
        if name == self.hidden or name.startswith(self.hidden + "."):
            raise ModuleNotFoundError(f"No module named {name!r} (not imported by memobench's jobs)", name=name)
        return None


def run_logged(log_path, func, inputs: dict, outputs: dict, params: dict, wildcards: dict,
               console: str | None = None, threads: int = 1,
               script: Path | None = None) -> None:
    """Run one stage with its log; exit 1 with one line on a user-facing or
    environment error. ``console``: the job's name, e.g. ``retrieve
    locomo10/v0.8.0/seg1``; a long job's progress lines also go to the
    console under it (progress.py). A secret the job read from the environment is starred in
    everything it writes to the log and prints (core/secrets.py)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as logf, masked_output():

        def log(msg: str) -> None:
            logf.write(mask(msg) + "\n")
            logf.flush()

        def fail(msg: str) -> None:
            log(f"ERROR: {msg}")
            print(f"memobench: {msg}", file=sys.stderr)
            sys.exit(1)

        job = Job(Names("input", inputs), Names("output", outputs), Names("params", params),
                  Names("wildcard", wildcards), log, threads, script)
        if console is not None:
            set_console(lambda line: print(f"memobench: {console}: {line}", file=sys.stderr, flush=True))
        try:
            func(job)
        except USER_ERRORS as e:
            fail(str(e))
        except Exception as e:  # an environment failure (one line), else a bug: keep the traceback in the log
            msg = environment_message(e) if isinstance(e, OSError) or _sqlite_error(e) else None
            if msg is None:
                raise_internal(logf, log_path, e)
            fail(msg)
        finally:
            set_console(None)


def raise_internal(logf, log_path, e: BaseException) -> None:
    import traceback

    logf.write(mask(traceback.format_exc()))
    logf.flush()
    print(mask(f"memobench: internal error {type(e).__name__}: {e} (traceback in {log_path})"), file=sys.stderr)
    sys.exit(1)
