"""Datasets a run could not do, and how to get them (an offline first run).

A download that fails does not fail the workflow: the download stage records
it in the dataset's receipt (``results/{dataset}/raw.json``) as

    {"file": <where to place it>, "missing": <the one-line reason>,
     "bytes": N, "sha256": H or null, "urls": [...], "attempt": <n>}

and the workflow leaves that dataset (and every dataset that searches its
haystacks, ``haystacks_from``) out of the report's inputs. The report says
which datasets are missing and how to get each; the last rule of the run
prints one ``memobench:`` line per missing dataset and fails, so the exit
status stays non-zero until nothing is missing.

Stdlib only: the workflow's input functions import it too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import DownloadError


def missing_receipt(dest, reason: str, nbytes: int, sha256: str | None, urls, attempt) -> dict:
    """The receipt of a download that failed (see the module docstring)."""
    return {"file": str(Path(dest).absolute()), "missing": reason, "bytes": nbytes, "sha256": sha256,
            "urls": list(urls or []), "attempt": attempt}


def read_receipt(path) -> dict | None:
    """A receipt's content; None when there is none yet (or a half-written one)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def find_missing(receipts: dict, needs: dict) -> dict[str, dict]:
    """``{dataset: why}`` in a stable order: the datasets whose receipt records
    a failed download (``why`` is the receipt), then those that need one of them
    (``needs``: dataset -> the dataset whose haystacks it searches; ``why`` is
    ``{"needs": that dataset}``). ``receipts``: dataset -> receipt (dict) or path."""
    out: dict[str, dict] = {}
    for ds, r in receipts.items():
        r = read_receipt(r) if isinstance(r, (str, Path)) else r
        if r and r.get("missing"):
            out[ds] = r
    for ds, base in needs.items():
        if base in out and ds not in out:
            out[ds] = {"needs": base}
    return out


def receipts_by_dataset(paths) -> dict[str, str]:
    """results/{dataset}/raw.json paths keyed by their dataset (the folder name)."""
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    return {Path(p).parent.name: str(p) for p in paths}


def how_to_get(ds: str, why: dict) -> str:
    """One line: what is missing and what to do about it."""
    if "needs" in why:
        return (f"missing dataset {ds}: it searches the haystacks of {why['needs']}, which is missing; "
                f"it runs once {why['needs']} is there")
    return f"missing dataset {ds}: {why['missing']}"


def blocks(missing: dict[str, dict]) -> list:
    """The report's "Missing datasets" section (doc.py blocks; none when nothing is missing)."""
    from .doc import Cell, Code, Heading, Para, Table

    if not missing:
        return []
    rows = []
    for ds, why in missing.items():
        if "needs" in why:
            rows.append([ds, "-", "-", "-", "-", "-", f"searches the haystacks of {why['needs']}, which is missing"])
            continue
        path = Path(why["file"])
        # the table says where to place the file: the reason without that advice
        reason = re.sub(r"\s*Place the file .*$", "", why["missing"].removeprefix(f"{path.name}: "))
        # long paths, hashes and URLs break anywhere in HTML, so the table fits the page
        rows.append([ds, path.name, Cell(str(path), cls="wrap"), why.get("bytes", "-"),
                     Cell(why.get("sha256") or "-", cls="wrap"), Cell(" ".join(why.get("urls") or []) or "-", cls="wrap"),
                     reason])
    return [Heading(2, "Missing datasets", anchor="missing"),
            Para([f"{len(missing)} dataset(s) did not run: their raw file is not there and could not be downloaded. "
                  "Place each file (exactly that many bytes; the sha256 when given) where the table says, or give "
                  "the machine network, and rerun the same command: the failed downloads are retried and only what "
                  "is missing runs. Until then the run ends with one ", Code("memobench:"),
                  " line per missing dataset and a non-zero exit status."]),
            Table(["dataset", "file", "place it at", "bytes", "sha256", "download from", "why"], rows, left=7)]


def markdown(missing: dict[str, dict]) -> str:
    """The report's "Missing datasets" section ("" when nothing is missing)."""
    from .doc import to_markdown

    return to_markdown(blocks(missing)) if missing else ""


def check(missing: dict[str, dict], log=print) -> None:
    """Nothing missing: return. Otherwise one line per missing dataset through
    ``log``, then a ``DownloadError`` naming them all."""
    if not missing:
        return
    for ds, why in missing.items():
        log(how_to_get(ds, why))
    raise DownloadError(f"{len(missing)} dataset(s) missing: {', '.join(missing)}; results/report.md covers the "
                        f"others and says how to get these; rerun the same command once they are there")
