"""Shared fixtures and hooks: the real LoCoMo file, a folder served over HTTP,
the small workflow's data, and the ``workflow`` mark on every test under
tests/workflow/ (docs/testing.md says where the test for X lives)."""

from __future__ import annotations

import compileall
import functools
import http.server
import os
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import SKIP_PREFIX, find_locomo, small_datasets

HERE = Path(__file__).resolve().parent


def _one_blas_thread() -> None:
    """numpy's OpenBLAS in the test processes on one thread: each xdist worker keeps a core busy, and
    OpenBLAS's second thread, spinning for the core the other worker holds, made a matrix product up to
    15 times slower (minilm's forward pass: 1.5 s instead of 0.1 s). OpenBLAS reads the variable once,
    as numpy loads it; the variable is taken back at once, so the processes the tests start (Snakemake's
    jobs, servers) run as a user's do."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


_one_blas_thread()

_LOCOMO: tuple[Path | None, str] | None = None


def _locomo() -> tuple[Path | None, str]:
    global _LOCOMO
    if _LOCOMO is None:
        _LOCOMO = find_locomo()
    return _LOCOMO


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    path, how = _locomo()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"the real LoCoMo file is missing: {how}")
        pytest.skip(f"{SKIP_PREFIX}: {how}")
    return path


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[-1]) if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    """Say at the end of the run how many exactness tests (the ones that need
    the real LoCoMo file) did not run, and why; and, in one line, every other
    skip by its reason (an optional extra not installed, chromium absent), so
    that a run on a fresh clone names what it left out."""
    skipped = terminalreporter.stats.get("skipped", [])
    exact = [r for r in skipped if SKIP_PREFIX in _skip_reason(r)]
    if exact:
        terminalreporter.write_line(
            f"memobench: {len(exact)} exactness tests skipped ({_skip_reason(exact[0])})", yellow=True)
    elif terminalreporter.stats.get("passed") and _LOCOMO is not None and _LOCOMO[0] is not None:
        terminalreporter.write_line(f"memobench: exactness tests ran on the real LoCoMo file ({_LOCOMO[1]})")
    others: dict[str, int] = {}
    for r in skipped:
        if r not in exact:
            others[_skip_reason(r)] = others.get(_skip_reason(r), 0) + 1
    if others:
        terminalreporter.write_line(
            f"memobench: {sum(others.values())} other tests skipped: "
            + "; ".join(f"{reason} ({n})" for reason, n in sorted(others.items())), yellow=True)


# the workflow files that take longest, longest first (every docs page's blocks on the real LoCoMo file,
# minilm's embeddings among them; the recipes' real servers; interrupted and repeated runs; the API's runs):
# loadfile hands the first file to one worker and the second to the other, the next ones as each runs short
LONGEST = ("test_docs_commands.py", "test_recipes.py", "test_interrupts.py", "test_python_api.py")


def pytest_collection_modifyitems(config, items):
    """Every test under tests/workflow/ starts Snakemake (or a pipeline of
    processes as long): marked ``workflow``, so ``-m "not workflow"`` leaves
    them out. A unit test marked ``slow`` (big data) is marked ``workflow``
    too. The workflow files run first."""
    workflow = HERE / "workflow"
    for item in items:
        if workflow in Path(str(item.fspath)).parents or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.workflow)
    # the long files first: with --dist loadfile the short unit files then fill the workers' last minutes,
    # where a long workflow file at the end would leave one worker idle until it finishes; the longest
    # (real servers started per namespace, many Snakemake runs) before the other workflow files
    def first(item):
        name = Path(str(item.fspath)).name
        return workflow not in Path(str(item.fspath)).parents, LONGEST.index(name) if name in LONGEST else len(LONGEST)

    items.sort(key=first)


def pytest_configure(config):
    """Bytecode cached even where PYTHONDONTWRITEBYTECODE is set: the suite
    starts a Python process per Snakemake job (hundreds), each of which would
    compile the package from source; they inherit the variable, so the
    package is compiled here once (the controller, before any worker) and
    they read it. The test modules' rewritten bytecode is cached likewise.

    The naive reference keeps its tables' answers across calls
    (tests/oracles/naive.py, SHARE_TABLES: the tests run it on one file under
    several variants).

    tqdm's monitor thread off: bm25s makes tqdm bars (disabled ones too),
    whose monitor then lives as long as the test process, and normalize forks
    its workers only from a process with a single thread (datasets/inparts.py)."""
    sys.dont_write_bytecode = False
    # xdist (3.7 and later) hands out the files with the most tests first unless told not to, which put
    # the longest files (few tests, long runs) last: the order pytest_collection_modifyitems gives is kept
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(HERE.parent / "src" / "memobench", quiet=1)
    from tests.oracles import naive
    naive.SHARE_TABLES = True
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_dir(tmp_path):
    """A folder served over real HTTP on 127.0.0.1: yields (folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()




@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """The small workflow's raw files, made by the generator (no real file
    needed): ``small_data(variants, seed)`` makes a folder holding a
    LoCoMo-format conversation of 19 sessions and 40 questions,
    ``locomo1.json``, and a LongMemEval file of 10 questions x 6 sessions,
    ``lme.json`` (``spice``: both with the generator's edge cases), and
    returns (folder, the ``datasets`` config running ``variants``: LoCoMo in
    one segment, LongMemEval in two), the folder ``data`` when given."""

    def make(variants: list[str], seed: int, spice: bool = False, data: Path | None = None) -> tuple[Path, dict]:
        data = data or tmp_path_factory.mktemp("small") / "data"
        return data, small_datasets(data, variants, seed, spice=spice)

    return make


@pytest.fixture
def fake():
    """Fake memory services on 127.0.0.1, one fault each (tests/helpers/services.py, ``Fake``):
    ``fake(fault)`` starts one and returns (its URL, the server); all are stopped after the test."""
    from tests.helpers.services import Fake, start

    made = []

    def make(fault: str = ""):
        server = Fake(fault)
        made.append(server)
        return start(server), server

    yield make
    for server in made:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _no_secret_left():
    """The secrets a test's variant read from the environment are process-wide (core/secrets.py): forgotten
    after it, so that a later test on the same worker never finds its own text starred."""
    yield
    from memobench.core import secrets

    secrets.forget()
