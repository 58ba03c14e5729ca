"""Your own retriever: a Python callable named in the config ranks each
question's haystack, under the harness rules of the dataset's family (the
same questions, gold and denominators as the Memo variants)::

    variants:
      my-retriever:
        retriever:
          callable: my_retrievers.py:rank   # a file and a function, or module:function
          params: {k1: 1.2}                 # keyword arguments of every call
          documents: user                   # a session's text: its user turns, or all turns
          prepare: my_index.py:embed        # optional per-session work, cached

``rank(question, haystack, **params)`` gets a :class:`Question` and the
:class:`Haystack` it searches, and returns the sessions best first: haystack
positions (ints) or session ids (strings), optionally with their scores as
``(ranking, scores)``. A variant with ``grain: turn`` ranks turns: ``rank``
gets the haystack's :class:`Turns` and returns turn positions or turn ids
(docs/protocol.md#turn-level). With ``prepare``, ``prepare(texts, **params)`` returns
one value per session document; it runs once per distinct document of a
dataset in its own job (rule ``prepare``: ``results/{dataset}/prepared/
{variant}.parquet``, keyed by the document's sha256), and ``rank`` gets the
values of its haystack's sessions, in haystack order, as a third argument:
``rank(question, haystack, prepared, **params)``.

A file path is read from the working directory; the file's folder (or, for
a file inside a package, the folder above the top package) goes first on
``sys.path``, so the file imports its neighbours as usual. A module name is
imported with the working directory first on ``sys.path``. Every Python file
of the callable's folder or package, and what it imports from there
(:func:`sources`), is hashed into the retrieve job's code fingerprint: an edit
to one reruns the variant, however the code loads it (an ``import``
statement, ``importlib.import_module``, ``__import__``). A module the job
loaded from inside that folder that the fingerprint does not hold (a folder
without ``__init__.py`` below it) stops the job with one line, rather than
leaving a result that its next edit would not rerun.

Each call of the user's code (:class:`Calls`) writes its stdout and stderr to
the job's log, gets back the working directory it changed, and ``rank`` has
``timeout_s`` seconds per question (config ``user_retrievers``): a question
past it is ranked as an empty list (a miss), counted in the outcomes
table's metadata and so in ``metrics.json``; more than ``max_timeouts`` in
one job stop it. The first :data:`DETERMINISM_SAMPLE` ranked questions of
each segment are ranked twice and the two answers compared (``metrics.json``'s
``determinism``).

A bad return (not a list, an id not in the haystack, an id or position given
twice, a non-finite or too large score, a count of scores unlike the
ranking's) or an exception (``KeyboardInterrupt`` and ``SystemExit``
included; a real Ctrl-C still interrupts) is one ``memobench:`` line naming
the variant, the question and what is wrong; an exception's traceback goes
to the job's log.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from functools import lru_cache
from pathlib import Path

from ..catalog.row import Retriever, Row, register, register_retriever
from ..core.errors import ConfigError, DataError
from .returned import Haystack, Question, RetrieverError, _is_sequence, _what, check_ranking, turns_of


# --------------------------------------------------------------------------- finding the callable


def _split(spec: str) -> tuple[str, str]:
    target, _, func = spec.rpartition(":")
    return target, func


def _on_path(folder: Path) -> bool:
    return folder.name in ("site-packages", "dist-packages")


def locate(target: str, cwd=None) -> tuple[Path, Path, str, Path]:
    """Where a callable's module is: (its file, the folder it is imported
    from, its dotted name, the scope whose files count as its own: its
    top-level package's folder, else its own folder; an installed single
    module is its own scope)."""
    cwd = Path(cwd or Path.cwd())
    if target.endswith(".py"):
        path = (cwd / target).resolve()
        if not path.is_file():
            raise ConfigError(f"no file {target} (looked for {path})")
        parts = [] if path.name == "__init__.py" else [path.stem]
        folder = path.parent
        while (folder / "__init__.py").is_file():
            parts.insert(0, folder.name)
            folder = folder.parent
        if not parts:
            raise ConfigError(f"{target}: a package's __init__.py outside a package")
        scope = folder / parts[0] if len(parts) > 1 or path.name == "__init__.py" else folder
        return path, folder, ".".join(parts), scope
    parts = target.split(".")
    for entry in [str(cwd), *sys.path]:
        base = Path(entry or cwd).resolve()
        for path in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if path.is_file():
                package = (base / parts[0]).is_dir() and len(parts) + (path.name == "__init__.py") > 1
                scope = base / parts[0] if package else (path if _on_path(base) else base)
                return path.resolve(), base, target, scope
    raise ConfigError(f"no Python source for module {target!r} in the working directory or on the Python path")


def _module_file(root: Path, dotted: str) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand.resolve()
    return None


def _local_imports(path: Path, name: str, root: Path) -> set[str]:
    """Dotted names (from ``root``) of the modules ``path`` (module ``name``) may import."""
    import ast

    from ..core.fingerprint import import_statements

    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in import_statements(path.read_text(encoding="utf-8")):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            subs: list[str] = []
        else:
            if node.level:
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                base = ".".join(pkg + (node.module.split(".") if node.module else []))
            else:
                base = node.module or ""
            bases = [base] if base else []
            subs = [f"{base}.{a.name}" if base else a.name for a in node.names]
        for dotted in [*bases, *subs]:
            parts = dotted.split(".")
            # importing a.b.c runs a and a.b first
            out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return out


def _package_files(folder: Path) -> set[Path]:
    """The Python files of a package, its subpackages' included."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if (Path(dirpath, d) / "__init__.py").is_file())
        out |= {Path(dirpath, f).resolve() for f in filenames if f.endswith(".py")}
    return out


def scope_files(scope: Path) -> set[Path]:
    """Every Python file of a callable's scope, imported or not (a module
    loaded by name at run time, ``importlib.import_module(name)``, is not
    visible in the source): a package's files, or a folder's modules and
    the packages in it; an installed single module is itself."""
    if scope.is_file():
        return {scope.resolve()}
    if (scope / "__init__.py").is_file():
        return _package_files(scope)
    out = {p.resolve() for p in scope.glob("*.py") if p.is_file()}
    for sub in scope.iterdir():
        if sub.is_dir() and (sub / "__init__.py").is_file():
            out |= _package_files(sub)
    return out


@lru_cache(maxsize=None)
def _sources(target: str, cwd: str) -> tuple[Path, ...]:
    path, root, name, scope = locate(target, cwd)
    files = {path: name, **{f: "" for f in scope_files(scope)}}
    todo = [(path, name)]
    while todo:
        p, n = todo.pop()
        for dotted in _local_imports(p, n, root):
            f = _module_file(root, dotted)
            if f is None or f in files or not (f == scope or f.is_relative_to(scope)):
                continue
            files[f] = dotted
            todo.append((f, dotted))
    return tuple(sorted(files))


def sources(spec: str, cwd=None) -> list[Path]:
    """The files of a callable's code that are the user's: every Python
    file of its folder or package (:func:`scope_files`), and every module it
    imports, transitively, from there (an import inside a function or a
    ``try`` counts, and reaches a folder without ``__init__.py``; a data or
    model file it reads does not: name such a thing in ``params``)."""
    return list(_sources(_split(spec)[0], str(Path(cwd or Path.cwd()).resolve())))


def uncovered(spec: str, scope: Path, cwd=None) -> list[Path]:
    """Modules loaded in this process from inside ``scope`` that
    :func:`sources` does not hold (a module that a name built at run time
    loads from a folder without ``__init__.py``): an edit to one would not
    rerun the variant. Installed packages and memobench's own are not the
    user's, wherever they sit; nor is the job's script (``__main__``), which
    may sit inside ``scope`` when the user's file is at the project's root."""
    from ..core.fingerprint import PACKAGE_DIR

    if scope.is_file():
        return []
    known = set(sources(spec, cwd))
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    out = set()
    main = sys.modules.get("__main__")
    for name, module in list(sys.modules.items()):
        if module is main or name in ("__main__", "__mp_main__"):
            continue  # the job's script (multiprocessing aliases it), whose path Snakemake sets: not the user's
        f = getattr(module, "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        p = Path(f).resolve()
        if p in known or not p.is_relative_to(scope) or p.is_relative_to(PACKAGE_DIR) \
                or any(p.is_relative_to(x) for x in prefixes) or {"site-packages", "dist-packages"} & set(p.parts) \
                or any(part.startswith(".") for part in p.relative_to(scope).parts):
            continue  # not the user's: installed, memobench's, or hidden (Snakemake's copy of the job's script)
        out.add(p)
    return sorted(out)


def _allow_pandas() -> None:
    """The retrieve stage hides pandas from pyarrow (stages.adapter.without_pandas);
    a user's code may import it."""
    sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "hidden", None) != "pandas"]


def load(spec: str, variant: str, log=None):
    """The callable ``spec`` names, imported (a one-line error when it
    cannot be); the import runs through :class:`Calls` (its output and its
    traceback go to ``log``)."""
    target, func = _split(spec)
    where = f"variant {variant!r}: {spec}"
    try:
        path, root, name, scope = locate(target)
    except ConfigError as e:
        raise RetrieverError(f"{where}: {e}") from None
    _allow_pandas()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module, _ = Calls(log or (lambda msg: None), scope).call(f"{where}: importing {target}", importlib.import_module,
                                                             name)
    got = getattr(module, "__file__", None)
    if got is None or Path(got).resolve() != path:
        raise RetrieverError(f"{where}: the module name {name!r} is already taken by {got or 'a built-in module'}; "
                             f"rename {path.name}")
    obj = module
    for part in func.split("."):
        if not hasattr(obj, part):
            raise RetrieverError(f"{where}: {target} has no {func!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise RetrieverError(f"{where}: {func!r} is not callable")
    return obj, scope


def describe(e: BaseException, scope: Path | None = None) -> str:
    """``Type: message (file, line n)``, at the deepest frame inside ``scope``
    (the user's code) or else the deepest, on one line."""
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if scope is not None and _inside(f.filename, scope)]
    frame = (mine or frames or [None])[-1]
    text = " ".join((f"{type(e).__name__}: {e}" if str(e) else type(e).__name__).split())
    if frame is None:
        return text
    try:
        shown = Path(frame.filename).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = frame.filename
    return f"{text} ({shown}, line {frame.lineno})"


def _inside(filename: str, scope: Path) -> bool:
    try:
        p = Path(filename).resolve()
    except OSError:
        return False
    return p == scope or p.is_relative_to(scope)


# --------------------------------------------------------------------------- calling the user's code


class _TimedOut(BaseException):
    """Raised in the user's code when its time is up (a BaseException, so
    that an ``except Exception`` of theirs does not swallow it)."""


class Calls:
    """Every call of a user's code in a job goes through :meth:`call`: its
    stdout and stderr (the file descriptors, so a C library's and a child
    process's output too) go to the job's log, not the console; a working
    directory it changed is changed back (the job's outputs are relative
    paths); a ``KeyboardInterrupt`` it raises is its failure, one line, while
    a real SIGINT still interrupts the job; and with ``timeout_s`` it is
    stopped after that many seconds (SIGALRM: code that never returns to the
    interpreter, a C extension's long loop, is stopped when it does)."""

    def __init__(self, log, scope: Path | None, timeout_s: float | None = None):
        self.log, self.scope, self.timeout_s = log, scope, timeout_s
        self._out = tempfile.TemporaryFile()
        # for sys.stdout and sys.stderr, whatever they are now (a test's capture, say)
        self._text = open(self._out.fileno(), "w", encoding="utf-8", errors="replace", closefd=False)

    def call(self, where: str, fn, *args, **kwargs):
        """``(fn's result, False)``, or ``(None, True)`` when it timed out; a
        one-line RetrieverError (``where`` first) when it raised."""
        state = {"sigint": False, "alarm": False, "done": False}
        cwd = os.getcwd()
        main = threading.current_thread() is threading.main_thread()
        _flush()
        saved = [os.dup(1), os.dup(2), sys.stdout, sys.stderr]
        os.dup2(self._out.fileno(), 1)
        os.dup2(self._out.fileno(), 2)
        sys.stdout = sys.stderr = self._text
        handlers = {}
        if main:
            def on_sigint(signum, frame):
                state["sigint"] = True
                raise KeyboardInterrupt

            def on_alarm(signum, frame):
                if not state["done"]:
                    state["alarm"] = True
                    raise _TimedOut

            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, on_sigint)
            if self.timeout_s:
                handlers[signal.SIGALRM] = signal.signal(signal.SIGALRM, on_alarm)
                signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        try:
            try:
                result = fn(*args, **kwargs)
            finally:  # from here on the alarm stops nothing
                state["done"] = True
        except _TimedOut:
            result = None
        except BaseException as e:
            if state["sigint"]:
                raise
            if not state["alarm"]:
                self._restore(cwd, saved, handlers)
                self.log("".join(traceback.format_exception(e)).rstrip())
                raise RetrieverError(f"{where} raised {describe(e, self.scope)}") from None
            result = None
        finally:
            self._restore(cwd, saved, handlers)
        # a timeout its code caught still ran out its time
        return (None, True) if state["alarm"] else (result, False)

    def _restore(self, cwd: str, saved: list, handlers: dict) -> None:
        if saved[0] is None:  # restored already (an exception's traceback is logged first)
            return
        if signal.SIGALRM in handlers:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        handlers.clear()
        _flush()
        self._text.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        sys.stdout, sys.stderr = saved[2], saved[3]
        saved[:] = [None] * 4
        self._drain()
        try:
            now = os.getcwd()
        except OSError:  # it removed the folder it moved to
            now = None
        if now != cwd:
            os.chdir(cwd)
            self.log(f"the retriever changed the working directory to {now}; changed back to {cwd}")

    def _drain(self) -> None:
        """The captured output, into the log."""
        fd = self._out.fileno()
        size = os.lseek(fd, 0, os.SEEK_CUR)
        if not size:
            return
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        self.log(b"".join(chunks).decode("utf-8", "replace").rstrip("\n"))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


# --------------------------------------------------------------------------- what rank returns


def check_covered(variant: str, spec: str, scope: Path) -> None:
    """Stop when the job loaded a module of the user's that the code
    fingerprint misses (:func:`uncovered`)."""
    missed = uncovered(spec, scope)
    if missed:
        raise RetrieverError(f"variant {variant!r}: {spec} loaded {missed[0]}, which is not in its code "
                             f"fingerprint (a folder without __init__.py inside {scope}), so an edit to it would "
                             f"not rerun the variant; add an __init__.py to its folder or import it with an "
                             f"import statement")


# --------------------------------------------------------------------------- the retrieve stage

# the first ranked questions of each segment that are ranked twice, the two answers compared
DETERMINISM_SAMPLE = 5


def rank_segment(variants, segment, log=print) -> dict:
    """The seam's entry (``retrievers``): rank one segment (``harness.Segment``)
    under users' Python retrievers, question by question
    (``documents.rank_by_documents``). Each outcomes table carries, in its
    Parquet metadata (``harness.CHECKS_KEY``), the segment's determinism
    check and timed-out questions."""
    import json

    from .documents import rank_by_documents, segment_documents
    from .harness import CHECKS_KEY

    docs = segment_documents(segment, {v.recipe.documents for v in variants})
    rankers = {v.name: _Ranker(v, segment, docs[v.recipe.documents], log) for v in variants}
    tables = rank_by_documents(variants, segment, rankers, log, docs=docs, timed=())
    out = {}
    for v in variants:
        ranker = rankers[v.name]
        segment.timings[v.name] = (ranker.times.rows, {})
        ranker.check_covered()
        rankings, outcomes, deep = tables[v.name]
        meta = {**(outcomes.schema.metadata or {}), CHECKS_KEY: json.dumps(ranker.checks(), sort_keys=True)}
        out[v.name] = (rankings, outcomes.replace_schema_metadata(meta), deep)
    return out


class _Ranker:
    """``ranker(q, hay, texts)``: one question's (positions, scores) under a
    user's retriever (``documents.rank_by_documents``), every call through
    :class:`Calls`; what the checks found: :meth:`checks`."""

    def __init__(self, variant, segment, docs: dict, log):
        spec = variant.retriever
        limits = spec.get("limits") or {}
        self.variant, self.log, self.name = variant, log, spec["callable"]
        self.fn, self.scope = load(spec["callable"], variant.name, log)
        self.params = dict(spec.get("params") or {})
        self.prepared = (_prepared_values(variant, segment.inputs.get("prepared"), docs) if spec.get("prepare")
                         else None)
        self.timeout_s = limits.get("timeout_s")
        self.max_timeouts = limits.get("max_timeouts")
        self.calls = Calls(log, self.scope, self.timeout_s)
        self.checked: list[str] = []
        self.differing: list[str] = []
        self.timed_out: list[str] = []
        from .timings import CallTimes

        self.times = CallTimes()  # every call of the function (the determinism check's second one: warm)

    def __call__(self, q, hay, documents):
        question = Question(q["question_id"], q["question"], q["question_date"], q["question_type"])
        if self.variant.grain == "turn":  # documents: the haystack's turns (turns.HaystackTurns)
            haystack = turns_of(hay, documents)
        else:
            haystack = Haystack(tuple(hay.ids), tuple(documents), tuple(hay.dates))
        where = f"variant {self.variant.name!r}: question {question.id!r}: {self.name}"

        def rank():
            args = (question, haystack) if self.prepared is None else (
                question, haystack, [self.prepared[k] for k in hay.keys])
            called = time.perf_counter()
            result, timed_out = self.calls.call(where, self.fn, *args, **self.params)
            self.times.add(q["haystack_id"], question.id, time.perf_counter() - called, ok=not timed_out)
            return None if timed_out else check_ranking(result, haystack, where)

        got = rank()
        if got is not None and len(self.checked) < DETERMINISM_SAMPLE:
            again = rank()
            if again is not None:
                self.checked.append(question.id)
                if again != got:
                    self.differing.append(question.id)
                    self.log(f"{where}: ranked twice, the two answers differ (a nondeterministic retriever)")
            got = again  # a second call past the time limit times the question out too
        if got is None:
            self._timed_out(question.id)
            return [], None
        return got

    def _timed_out(self, qid: str) -> None:
        self.timed_out.append(qid)
        self.log(f"variant {self.variant.name!r}: question {qid!r}: {self.name} took more than {self.timeout_s} s; "
                 f"ranked as an empty list (a miss)")
        if self.max_timeouts is not None and len(self.timed_out) > self.max_timeouts:
            raise RetrieverError(f"variant {self.variant.name!r}: {self.name} took more than {self.timeout_s} s on "
                                 f"{len(self.timed_out)} questions of this job ({', '.join(self.timed_out[:3])}"
                                 f"{', ...' if len(self.timed_out) > 3 else ''}), more than user_retrievers."
                                 f"max_timeouts ({self.max_timeouts}); make it faster or raise "
                                 f"user_retrievers.timeout_s")

    def check_covered(self) -> None:
        check_covered(self.variant.name, self.name, self.scope)

    def checks(self) -> dict:
        return {"determinism": {"checked": len(self.checked), "differing": len(self.differing),
                                "questions": list(self.differing)},
                "timeouts": {"limit_s": self.timeout_s, "count": len(self.timed_out),
                             "questions": list(self.timed_out)}}


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _prepared_values(variant, path, docs: dict) -> dict:
    """{session key: prepare's value} for the segment's sessions, read from
    the prepare stage's table (only the rows of their documents)."""
    import pickle

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if path is None:
        raise ConfigError(f"variant {variant.name!r}: no prepared table (the prepare stage's output) was given")
    meta = read_meta(path)
    if meta.get("documents") != variant.recipe.documents or meta.get("prepare") != variant.retriever["prepare"]:
        raise DataError(path, None, f"was prepared by {meta.get('prepare')} over {meta.get('documents')} documents, "
                                    f"not {variant.retriever['prepare']} over {variant.recipe.documents}; "
                                    f"delete it and rerun")
    by_hash: dict[bytes, list[int]] = {}
    for key, text in docs.items():
        by_hash.setdefault(text_hash(text), []).append(key)
    wanted = pa.array(list(by_hash), pa.binary())
    values: dict[int, object] = {}
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["sha256", "value"]):
        rows = pc.is_in(batch.column(0), value_set=wanted)
        picked = batch.filter(rows)
        for h, blob in zip(picked.column(0).to_pylist(), picked.column(1).to_pylist()):
            value = pickle.loads(blob)
            for key in by_hash.pop(h, ()):
                values[key] = value
    if by_hash:
        key = next(iter(by_hash.values()))[0]
        raise DataError(path, f"session_key {key}", "has no prepared value; delete the prepared table and rerun")
    return values


# --------------------------------------------------------------------------- the prepare stage


def read_meta(path) -> dict:
    import json

    import pyarrow.parquet as pq

    raw = (pq.read_schema(path).metadata or {}).get(b"memobench")
    if raw is None:
        raise DataError(path, None, "not a memobench prepared table; delete it and rerun")
    return json.loads(raw)


def prepare_sessions(variant, events_path, out, log=print, sessions_path=None, chunk: int = 1024) -> dict:
    """Write ``out``: ``prepare``'s value (pickled) for every distinct session
    document of the events table (and, given ``sessions_path``, the empty
    document of a session with no event), keyed by the document's sha256.
    ``prepare`` is called with up to ``chunk`` documents at a time."""
    import json
    import pickle
    import time

    import pyarrow as pa

    from .documents import iter_session_documents
    from ..core.progress import Progress
    from ..core.tables import TableWriter, read_table

    spec = variant.retriever
    fn, scope = load(spec["prepare"], variant.name, log)
    calls = Calls(log, scope)
    params = dict(spec.get("params") or {})
    where = f"variant {variant.name!r}: {spec['prepare']}"
    meta = {"variant": variant.name, "prepare": spec["prepare"], "documents": variant.recipe.documents}
    schema = pa.schema([("sha256", pa.binary()), ("value", pa.large_binary())],
                       metadata={"memobench": json.dumps(meta, sort_keys=True)})
    writer = TableWriter(out, schema, batch_rows=chunk)
    progress = Progress(log, f"{variant.name} prepare", unit="distinct documents")
    started = time.monotonic()
    seen: set[bytes] = set()
    hashes: list[bytes] = []
    texts: list[str] = []
    stats = {"sessions": 0, "distinct": 0, "calls": 0}

    def flush():
        values, _ = calls.call(where, fn, list(texts), **params)
        if not _is_sequence(values) or len(values) != len(texts):
            got = f"{len(values)} values" if _is_sequence(values) else _what(values)
            raise RetrieverError(f"{where} returned {got} for {len(texts)} sessions; return one value per "
                                 f"session, in order")
        try:
            blobs = [pickle.dumps(v, protocol=5) for v in values]
        except Exception as e:
            raise RetrieverError(f"{where} returned a value that cannot be pickled: {describe(e)}") from None
        writer.extend(sha256=list(hashes), value=blobs)
        stats["calls"] += 1
        stats["distinct"] += len(texts)
        hashes.clear()
        texts.clear()
        progress(stats["distinct"])

    def add(text: str) -> None:
        stats["sessions"] += 1
        h = text_hash(text)
        if h in seen:
            return
        seen.add(h)
        hashes.append(h)
        texts.append(text)
        if len(texts) >= chunk:
            flush()

    try:
        keys = set()
        for key, text in iter_session_documents(events_path, variant.recipe.documents):
            keys.add(key)
            add(text)
        if sessions_path is not None:
            for key in sorted(set(read_table(sessions_path, columns=["session_key"]).column(0).to_pylist()) - keys):
                add("")
        if texts:
            flush()
        check_covered(variant.name, spec["prepare"], scope)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    progress(stats["distinct"], f", done: {stats['sessions']} sessions in {time.monotonic() - started:.1f} s",
             force=True)
    return {**stats, **meta}


def prepare_fingerprint(variant, script) -> str:
    """The prepare job's code fingerprint: the stage's modules, ``script``
    and the ``prepare`` callable's sources (its edits rerun it, the ``rank``
    callable's do not)."""
    from ..core.fingerprint import stage_fingerprint

    return stage_fingerprint("prepare", script, *sources(variant.retriever["prepare"]))


def python_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """A user's Python retriever (config ``variants.<name>.retriever``) as a
    variant of a family: the family's skip rule, so its questions and gold
    are the Memo variants'; its documents are the user's choice, by default
    the family's rule (as the reference retrievers')."""
    from ..catalog.variant import SKIP, Variant
    from ..core.formats import USER_TURN_FAMILIES
    from ..memo.recipe import Recipe, validate

    if set(entry) - {"retriever", "description"}:
        extra = ", ".join(sorted(set(entry) - {"retriever", "description"}))
        raise ConfigError(f"variant {name!r}: a retriever variant takes no {extra} (only retriever and description)")
    r = entry["retriever"]
    where = f"variant {name!r}: retriever"
    for key in ("callable", "prepare"):
        if r.get(key) is not None and not _callable_spec(r[key]):
            raise ConfigError(f"{where}: {key} {r[key]!r} is not 'module:function' or 'path/to/file.py:function'")
    if not r.get("callable"):
        raise ConfigError(f"{where}: callable is required ('module:function' or 'path/to/file.py:function')")
    params = r.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: params must be a mapping of keyword arguments, not {params!r}")
    docs = r.get("documents") or ("user" if family in USER_TURN_FAMILIES else "all")
    validate({"documents": docs}, where)
    spec = {"callable": r["callable"], "prepare": r.get("prepare"), "params": params}
    return Variant(name, Recipe(backend=BACKEND, documents=docs), SKIP[family],
                   f"your retriever: {r['callable']}",
                   entry.get("description", f"{r['callable']} over each session's "
                                            f"{'user turns' if docs == 'user' else 'turns'}"),
                   retriever=spec)


def _callable_spec(text) -> bool:
    """'module.sub:function' or 'path/to/file.py:function' (the function may be dotted: 'Class.method')."""
    if not isinstance(text, str) or ":" not in text:
        return False
    target, _, func = text.rpartition(":")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", func):
        return False
    return target.endswith(".py") or bool(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target))


def _inputs(variant) -> frozenset[str]:
    return frozenset({"prepared"}) if (variant.retriever or {}).get("prepare") else frozenset()


def _variant_sources(variant) -> tuple:
    return tuple(sources(variant.retriever["callable"]))


# The recipe backend of a user's Python retriever (config ``variants.<name>.retriever``): not a recipe
# choice, a user variant states it by ``retriever``.
BACKEND = "python"
register(Row(BACKEND, "python", label="your retriever", description="a user's Python callable ranking each "
             "question's session documents", module=__name__, config_key="retriever", make_variant=python_variant,
             turns=True))
register_retriever(Retriever("python", __name__, rank_segment, variant_inputs=_inputs, sources=_variant_sources,
                             shares=False))
