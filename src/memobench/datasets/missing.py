"""Datasets a run could not do, and how to get them (an offline first run).

A download that fails does not fail the workflow: the download stage records
it in the dataset's receipt (``results/{dataset}/raw.json``) as

    {"file": <where to place it>, "missing": <the one-line reason>,
     "why": <the reason without URLs or advice>, "bytes": N,
     "sha256": H or null, "urls": [...], "attempt": <n>}

and the workflow leaves that dataset (and every dataset that searches its
haystacks, ``haystacks_from``) out of the report's inputs. The report says
which datasets are missing and how to get each; the last rule of the run
writes ``results/datasets.json`` (which of the run's datasets are there and
which are missing), and the end of the run prints one ``memobench:`` line
per missing dataset and a summary line, and exits non-zero: every run, as
long as one of its config's datasets is missing.

The download checkpoint's ``attempt`` param (:func:`attempt_param`) counts
the attempts and says, on a retry, why the last one failed: it changes while
the receipt records a failure, so every run retries the download, and
Snakemake's rerun reason reads e.g. ``before: {'download attempt': 1} now:
{'download attempt': 2, 'retrying after': 'attempt 1: could not download
(no network?): ...'}``.

Stdlib only: the workflow's input functions import it too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..core import layout


ATTEMPT = "download attempt"
RETRYING = "retrying after"


def missing_receipt(dest, reason: str, nbytes: int, sha256: str | None, urls, attempt: dict,
                    brief: str | None = None) -> dict:
    """The receipt of a download that failed (see the module docstring);
    ``attempt``: the download's ``attempt`` param."""
    return {"file": str(Path(dest).absolute()), "missing": reason, "why": brief or reason, "bytes": nbytes,
            "sha256": sha256, "urls": list(urls or []), "attempt": attempt[ATTEMPT]}


def present_receipt(dest, attempt: dict) -> dict:
    """The receipt of a raw file that is there (downloaded now or before, or
    placed by hand); it keeps the attempt that got it, so nothing reruns."""
    out = {"file": str(Path(dest).resolve()), "attempt": attempt[ATTEMPT]}
    if RETRYING in attempt:
        out["retrying_after"] = attempt[RETRYING]
    return out


def attempt_param(receipt: dict | None) -> dict:
    """The download's ``attempt`` param, from the dataset's receipt of the
    last run (None before the first): attempt 1 at first; while the receipt
    records a failure, the next attempt and why the last one failed (a
    changed param, so every run retries the download); once the file is
    there, the attempt that got it, unchanged."""
    if not receipt:
        return {ATTEMPT: 1}
    n = receipt.get("attempt") if isinstance(receipt.get("attempt"), int) else 0
    if receipt.get("missing"):
        return {ATTEMPT: n + 1, RETRYING: f"attempt {n}: {receipt.get('why') or receipt['missing']}"}
    out = {ATTEMPT: n or 1}
    if receipt.get("retrying_after"):
        out[RETRYING] = receipt["retrying_after"]
    return out


def retry_line(name: str, attempt: dict) -> str | None:
    """What a retried download says before it starts (None for a first try)."""
    if RETRYING not in attempt:
        return None
    last = attempt[RETRYING].split(": ", 1)[-1]
    return f"retrying the download of {name} (attempt {attempt[ATTEMPT]}; last time: {last})"


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
    """The report's "Missing datasets" section (doc.py blocks; none when nothing is missing): in Markdown one
    table, a row per dataset; in HTML a two-column table per dataset, so a path, a sha256 and each URL (a line
    of its own) get the page's width instead of a column squeezed between six others."""
    from ..core.doc import Cell, Code, Heading, Html, Line, Markdown, Para, Strong, Table, to_html, to_markdown

    if not missing:
        return []
    rows, cards = [], []
    for ds, why in missing.items():
        if "needs" in why:
            reason = f"searches the haystacks of {why['needs']}, which is missing"
            rows.append([ds, "-", "-", "-", "-", "-", reason])
            cards.append(Table(["dataset", Strong(ds)], [["why", reason]], left=2, cls="missing"))
            continue
        path = Path(why["file"])
        # the table says where to place the file: the reason without that advice
        reason = re.sub(r"\s*Place the file .*$", "", why["missing"].removeprefix(f"{path.name}: "))
        urls = why.get("urls") or []
        rows.append([ds, path.name, str(path), why.get("bytes", "-"), why.get("sha256") or "-",
                     " ".join(urls) or "-", reason])
        cards.append(Table(["dataset", Strong(ds)], [
            ["file", Code(path.name)], ["place it at", Cell(Code(str(path)), cls="wrap")],
            ["bytes", why.get("bytes", "-")], ["sha256", Cell(Code(why.get("sha256") or "-"), cls="wrap")],
            ["download from", Cell([x for u in urls for x in (Line(u), " ")][:-1] or "-", cls="wrap")],
            ["why", reason]], left=2, cls="missing"))
    table = Table(["dataset", "file", "place it at", "bytes", "sha256", "download from", "why"], rows, left=7)
    return [Heading(2, "Missing datasets", anchor="missing"),
            Para([f"{len(missing)} dataset(s) did not run: their raw file is not there and could not be downloaded. "
                  "Place each file (exactly that many bytes; the sha256 when given) where the table says, or give "
                  "the machine network, and rerun the same command: the failed downloads are retried and only what "
                  "is missing runs. Until then the run ends with one ", Code("memobench:"),
                  " line per missing dataset and a non-zero exit status."]),
            Markdown(to_markdown([table])), Html(to_html(cards))]


def markdown(missing: dict[str, dict]) -> str:
    """The report's "Missing datasets" section ("" when nothing is missing)."""
    from ..core.doc import to_markdown

    return to_markdown(blocks(missing)) if missing else ""


def summary(missing: dict[str, dict], others: list[str]) -> str:
    """The run's last line while datasets are missing; ``others``: the run's
    datasets that are there (the report covers them; it lists the missing
    ones either way)."""
    report = (f"{layout.REPORT_MD} covers the others and says how to get these" if others
              else f"none of the run's datasets is there, so nothing ran; {layout.REPORT_MD} says how to get them")
    return f"{len(missing)} dataset(s) missing: {', '.join(missing)}; {report}; rerun the same command once they are there"


def end_lines(missing: dict[str, dict], others: list[str]) -> list[str]:
    """What the end of the run says: one line per missing dataset and the
    summary; nothing when none is missing. ``others``: as :func:`summary`'s."""
    if not missing:
        return []
    return [how_to_get(ds, why) for ds, why in missing.items()] + [summary(missing, others)]


def datasets_record(run, receipts: dict, needs: dict) -> dict:
    """results/datasets.json: the run's datasets (``run``: the config's list),
    those whose raw file is there (``present``: every receipt that records no
    failure), those that are missing and what the end of the run says about
    them (``lines``). ``receipts``: dataset -> receipt path."""
    missing = find_missing(receipts, needs)
    return {"run": list(run), "present": sorted(ds for ds in receipts if ds not in missing),
            "missing": list(missing), "lines": end_lines(missing, [ds for ds in run if ds not in missing])}
