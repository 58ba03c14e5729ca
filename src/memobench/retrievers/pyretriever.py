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
``(ranking, scores)``. With ``prepare``, ``prepare(texts, **params)`` returns
one value per session document; it runs once per distinct document of a
dataset in its own job (rule ``prepare``: ``results/{dataset}/prepared/
{variant}.parquet``, keyed by the document's sha256), and ``rank`` gets the
values of its haystack's sessions, in haystack order, as a third argument:
``rank(question, haystack, prepared, **params)``.

A file path is read from the working directory; the file's folder (or, for
a file inside a package, the folder above the top package) goes first on
``sys.path``, so the file imports its neighbours as usual. A module name is
imported with the working directory first on ``sys.path``. The callable's
source and the files it imports from the same folder or package
(:func:`sources`) are hashed into the retrieve job's code fingerprint: an edit
to them reruns the variant, and nothing else does.

A bad return (not a list, an id not in the haystack, an id or position given
twice, a non-finite score, a count of scores unlike the ranking's) or an
exception is one ``memobench:`` line naming the variant, the question and
what is wrong; an exception's traceback goes to the job's log.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import sys
import traceback
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ConfigError, DataError


class RetrieverError(ConfigError):
    """A user's retriever failed or returned something unusable (one line)."""


@dataclass(frozen=True)
class Question:
    """The question a retriever ranks a haystack for."""

    id: str
    text: str
    date: str | None  # the raw question date (LongMemEval); None where the format has none
    type: str  # LongMemEval's question_type, LoCoMo's category


@dataclass(frozen=True)
class Haystack:
    """The sessions a question searches, in haystack order: ``ids[i]``,
    ``texts[i]`` (its document, under the variant's ``documents`` rule) and
    ``dates[i]`` (the raw date string, None when absent) describe position i.
    A session id listed twice in a haystack is two positions."""

    ids: tuple
    texts: tuple
    dates: tuple

    def __len__(self) -> int:
        return len(self.ids)


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

    from ..fingerprint import import_statements

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


@lru_cache(maxsize=None)
def _sources(target: str, cwd: str) -> tuple[Path, ...]:
    path, root, name, scope = locate(target, cwd)
    files = {path: name}
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
    """The files of a callable's code that are the user's: its module, and
    every module it imports, transitively, from the same folder or package
    (an import inside a function or a ``try`` counts; what it loads by other
    means, a model or data file, does not: name such a thing in ``params``)."""
    return list(_sources(_split(spec)[0], str(Path(cwd or Path.cwd()).resolve())))


def _allow_pandas() -> None:
    """The retrieve stage hides pandas from pyarrow (stages.adapter.without_pandas);
    a user's code may import it."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_NoPandas"]


def load(spec: str, variant: str):
    """The callable ``spec`` names, imported (a one-line error when it cannot be)."""
    target, func = _split(spec)
    where = f"variant {variant!r}: {spec}"
    try:
        path, root, name, scope = locate(target)
    except ConfigError as e:
        raise RetrieverError(f"{where}: {e}") from None
    _allow_pandas()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(name)
    except (Exception, SystemExit) as e:
        raise RetrieverError(f"{where}: importing {target} raised {describe(e, scope)}") from None
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
    text = " ".join(f"{type(e).__name__}: {e}".split())
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


# --------------------------------------------------------------------------- what rank returns


def _is_sequence(x) -> bool:
    import numpy as np

    return isinstance(x, (list, tuple, range, np.ndarray))


def _what(x) -> str:
    return "None" if x is None else f"a {type(x).__name__}"


def check_ranking(result, haystack: Haystack, where: str) -> tuple[list[int], list[float] | None]:
    """(haystack positions best first, their scores or None) from what a
    retriever returned; a one-line RetrieverError (``where`` first) when it
    is not a ranking of this haystack."""
    import numpy as np

    order, scores = result, None
    if isinstance(result, tuple) and len(result) == 2 and all(_is_sequence(x) for x in result):
        order, scores = result
    if not _is_sequence(order):
        raise RetrieverError(f"{where} returned {_what(result)}; return the haystack's positions or session ids, "
                             f"best first, or (ranking, scores)")
    items = order.tolist() if isinstance(order, np.ndarray) else list(order)
    positions: list[int] = []
    if all(isinstance(x, str) for x in items):
        slots: dict[str, list[int]] = {}
        for i, sid in enumerate(haystack.ids):
            slots.setdefault(sid, []).append(i)
        used: dict[str, int] = {}
        for sid in items:
            pos = slots.get(sid)
            if pos is None:
                raise RetrieverError(f"{where} returned session id {sid!r}, which is not in its haystack")
            k = used.get(sid, 0)
            if k == len(pos):
                times = "once" if len(pos) == 1 else f"{len(pos)} times"
                raise RetrieverError(f"{where} returned session id {sid!r} {k + 1} times; the haystack lists it "
                                     f"{times}")
            used[sid] = k + 1
            positions.append(pos[k])
    else:
        n = len(haystack.ids)
        seen: set[int] = set()
        for x in items:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                raise RetrieverError(f"{where} returned {x!r} in its ranking; give haystack positions (ints) or "
                                     f"session ids (strings), not a mix")
            p = int(x)
            if not 0 <= p < n:
                raise RetrieverError(f"{where} returned position {p}, outside the haystack's 0..{n - 1}")
            if p in seen:
                raise RetrieverError(f"{where} returned position {p} twice")
            seen.add(p)
            positions.append(p)
    if scores is None:
        return positions, None
    values = scores.tolist() if isinstance(scores, np.ndarray) else list(scores)
    if len(values) != len(positions):
        raise RetrieverError(f"{where} returned {len(values)} scores for {len(positions)} ranked sessions")
    for r, x in enumerate(values, 1):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise RetrieverError(f"{where} returned score {x!r} at rank {r}, not a number")
        if not math.isfinite(x):
            raise RetrieverError(f"{where} returned score {x} at rank {r}; scores must be finite")
    return positions, [float(x) for x in values]


# --------------------------------------------------------------------------- the retrieve stage


def rank_segment(variants, segment, log=print) -> dict:
    """The seam's entry (``retrievers``): rank one segment (``harness.Segment``)
    under users' Python retrievers, question by question
    (``documents.rank_by_documents``)."""
    from .documents import rank_by_documents, segment_documents

    docs = segment_documents(segment, {v.recipe.documents for v in variants})
    rankers = {v.name: _ranker(v, segment, docs[v.recipe.documents], log) for v in variants}
    return rank_by_documents(variants, segment, rankers, log, docs=docs)


def _ranker(variant, segment, docs: dict, log):
    spec = variant.retriever
    fn, scope = load(spec["callable"], variant.name)
    params = dict(spec.get("params") or {})
    prepared = (_prepared_values(variant, segment.inputs.get("prepared"), docs) if spec.get("prepare")
                else None)
    name = spec["callable"]

    def ranked(q, hay, texts):
        question = Question(q["question_id"], q["question"], q["question_date"], q["question_type"])
        haystack = Haystack(tuple(hay.ids), tuple(texts), tuple(hay.dates))
        where = f"variant {variant.name!r}: question {question.id!r}: {name}"
        try:
            if prepared is None:
                result = fn(question, haystack, **params)
            else:
                result = fn(question, haystack, [prepared[k] for k in hay.keys], **params)
        except (Exception, SystemExit) as e:
            log("".join(traceback.format_exception(e)).rstrip())
            raise RetrieverError(f"{where} raised {describe(e, scope)}") from None
        return check_ranking(result, haystack, where)

    return ranked


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
    from ..progress import Progress
    from ..tables import TableWriter, read_table

    spec = variant.retriever
    fn, scope = load(spec["prepare"], variant.name)
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
        try:
            values = fn(list(texts), **params)
        except (Exception, SystemExit) as e:
            log("".join(traceback.format_exception(e)).rstrip())
            raise RetrieverError(f"{where} raised {describe(e, scope)}") from None
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
    from ..fingerprint import stage_fingerprint

    return stage_fingerprint("prepare", script, *sources(variant.retriever["prepare"]))
