"""Read the raw dataset files and write the normalized Parquet tables: what
the normalize stage calls, one function per format (formats.py names it).

The readers (readers/, one module per format) keep exactly what the original
harnesses read (docs/harnesses.md#input-files-and-environment to #cn-pairing):
the JS ``String()`` coercions, the date parsing and its fallbacks, LoCoMo's
numeric session-key order and exact ``dia_id`` evidence lookup, CN pairing.
Each distinct session is stored once (store.py).

``out``: where the tables go, by table name (the normalize rule's named
outputs), or a folder, where they take layout.py's names.
"""

from __future__ import annotations

from pathlib import Path

from ..core.layout import table_paths
from .inparts import can_fork, cut_points, parts_for, read_in_parts


def _paths(out) -> dict[str, Path]:
    """``out`` as each table's path, by name."""
    if isinstance(out, dict):
        return {name: Path(p) for name, p in out.items()}
    return table_paths(out)


def normalize_longmemeval(path, out, log=print, lenient: bool = False, workers: int = 1) -> dict:
    """Stream a LongMemEval JSON array into the tables (readers/longmemeval.py).

    ``lenient`` follows the streamed M harnesses (run-m, exp*-m): an element
    that does not parse is skipped and counted instead of stopping the run
    (docs/harnesses.md#streaming-the-m-file). Otherwise, like run.cjs's JSON.parse of the whole file,
    malformed JSON is an error naming the item and the exact byte. Either way
    the bytes pass :mod:`jsonguard` first: nesting deeper than ``MAX_DEPTH`` or
    a number literal longer than ``MAX_NUMBER`` characters is an error.

    ``workers``: the cores it may use. A large file is then read in parts at
    once (inparts.py); the tables are the same bytes as one pass's, and a file
    whose parts do not each read cleanly is read in one pass, which reports
    its errors as above."""
    from .readers.longmemeval import read_longmemeval

    path, paths = Path(path), _paths(out)
    n_parts = parts_for(path.stat().st_size, workers)
    if n_parts > 1 and can_fork():
        cuts = cut_points(path, n_parts)
        stats = read_in_parts(path, paths, cuts, log) if cuts else None
        if stats is not None:
            return stats
    return read_longmemeval(path, paths, log, lenient)


def normalize_locomo(path, out, log=print) -> dict:
    """A LoCoMo file into the tables (readers/locomo.py)."""
    from .readers.locomo import read_locomo

    return read_locomo(Path(path), _paths(out), log)


def normalize_cn(path, base, out, log=print) -> dict:
    """CN rows paired to a normalized LongMemEval-S dataset's questions
    (readers/cn.py): ``base`` is its questions table, or its folder."""
    from .readers.cn import read_cn

    base = Path(base)
    return read_cn(Path(path), _paths(base)["questions"] if base.is_dir() else base, _paths(out), log)


def normalize_zh(out, log=print) -> dict:
    """The embedded Chinese functional set into the tables (readers/zh.py)."""
    from .readers.zh import read_zh

    return read_zh(_paths(out), log)
