"""A user's Python callable found and loaded (config ``retriever.callable``, ``prepare``, a memory service's
``system.query`` transform and ``system.library``): a file path or a module name, the folder that goes first on
``sys.path``, the files that make its code fingerprint (:func:`sources`) and the loaded modules it does not
hold (:func:`uncovered`), and an exception described by the frames of the user's own code."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import tempfile
import threading
import traceback
from functools import lru_cache
from pathlib import Path

from ..core.errors import ConfigError
from .returned import RetrieverError


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
    folders: dict[str, str] = {}  # each folder resolved once: modules share a few hundred of them
    for name, module in list(sys.modules.items()):
        if module is main or name in ("__main__", "__mp_main__"):
            continue  # the job's script (multiprocessing aliases it), whose path Snakemake sets: not the user's
        f = getattr(module, "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        folder, base = os.path.split(f)
        if os.path.islink(f):  # Path(f).resolve(), as for every module before: a linked file is its target
            p = Path(f).resolve()
        else:
            if folder not in folders:
                folders[folder] = os.path.realpath(folder)
            p = Path(folders[folder], base)
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



def check_covered(variant: str, spec: str, scope: Path) -> None:
    """Stop when the job loaded a module of the user's that the code
    fingerprint misses (:func:`uncovered`)."""
    missed = uncovered(spec, scope)
    if missed:
        raise RetrieverError(f"variant {variant!r}: {spec} loaded {missed[0]}, which is not in its code "
                             f"fingerprint (a folder without __init__.py inside {scope}), so an edit to it would "
                             f"not rerun the variant; add an __init__.py to its folder or import it with an "
                             f"import statement")
