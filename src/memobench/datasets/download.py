"""Resumable, verified downloads of benchmark datasets (stdlib only).

``fetch`` downloads one file from a list of mirror URLs into ``dest``:

* the data is streamed in 1 MiB chunks into ``dest + ".part"`` (memory stays
  flat for multi-GB files) while its sha256 is computed incrementally;
* an existing ``.part`` (from an interrupted run, or from a connection cut
  during this run) is resumed with an HTTP ``Range: bytes=N-`` request;
  servers that ignore ``Range`` (answer 200) are handled by restarting from
  zero;
* only a part with exactly ``expected_bytes`` bytes (and the expected sha256,
  when given) is fsync'ed and atomically renamed to ``dest``, so ``dest``
  either does not exist or is complete and verified.

Every failure ends in a ``DownloadError`` whose message is a single line that
names the file and says what is wrong (and, when the network is unavailable,
where to place the file by hand).

Command line::

    python -m memobench.datasets.download --dest data/locomo10.json --bytes 2805274 \\
        [--sha256 HEX] URL [URL ...]
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterable

from ..core.errors import DownloadError
from ..core.progress import Progress

__all__ = ["DownloadError", "fetch", "verify", "main"]

CHUNK_SIZE = 1 << 20  # bytes read / written / hashed at a time
RETRY_DELAY = 1.0  # seconds; the n-th retry of a URL waits n * RETRY_DELAY
PROGRESS_STEP = 5.0  # log a progress line every this many percent ...
PROGRESS_INTERVAL = 5.0  # ... or after this many seconds, whichever is first
USER_AGENT = "memobench-download/0.1 (python urllib)"

_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CONTENT_RANGE_RE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.I)


class _Interrupted(Exception):
    """The transfer broke off; retry the same URL (resuming with Range)."""


class _UrlFailed(Exception):
    """This URL cannot serve the file; move on to the next URL."""


def _one_line(text: object) -> str:
    return " ".join(str(text).splitlines())


def _describe(exc: BaseException) -> str:
    """Short one-line description of a network exception."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}".strip()
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return _describe(reason) if isinstance(reason, BaseException) else _one_line(reason)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, http.client.IncompleteRead):
        return "incomplete read"
    if isinstance(exc, OSError) and exc.strerror:
        return _one_line(exc.strerror)
    return _one_line(exc) or type(exc).__name__


def _size_of(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _sha256_file(path: Path, limit: int | None = None, progress: Progress | None = None) -> "hashlib._Hash":
    h = hashlib.sha256()
    remaining = limit
    done = 0
    with open(path, "rb") as f:
        while remaining is None or remaining > 0:
            n = CHUNK_SIZE if remaining is None else min(CHUNK_SIZE, remaining)
            chunk = f.read(n)
            if not chunk:
                break
            h.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done)
            if remaining is not None:
                remaining -= len(chunk)
    if progress is not None:
        progress(done, ", done", force=True)
    return h


def _check_sha_arg(sha256: str | None) -> str | None:
    if sha256 is None or sha256 == "":
        return None
    sha = sha256.strip().lower()
    if not _SHA256_RE.fullmatch(sha):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return sha


def check_bytes(path: str | Path, expected_bytes: int) -> None:
    """Raise ``DownloadError`` (one line) unless ``path`` has ``expected_bytes`` bytes."""
    path = Path(path)
    size = _size_of(path)
    if size is None:
        raise DownloadError(f"{path.name}: not found at {path.absolute()}")
    if size != expected_bytes:
        raise DownloadError(
            f"{path.name}: expected {expected_bytes} bytes, got {size} ({path.absolute()})"
        )


def sha256_of(path: str | Path, log: Callable[[str], object] | None = None) -> str:
    """The hex sha256 of ``path``; with ``log``, the hashing logs its progress."""
    path = Path(path)
    progress = (Progress(log, f"sha256 {path.name}", path.stat().st_size, every_s=PROGRESS_INTERVAL, unit="bytes")
                if log is not None else None)
    return _sha256_file(path, progress=progress).hexdigest()


def verify(path: str | Path, expected_bytes: int, sha256: str | None = None,
           log: Callable[[str], object] | None = None) -> str:
    """Check ``path`` has ``expected_bytes`` bytes (and ``sha256``); return its sha256.

    Raises ``DownloadError`` (one line naming the file, the expected and the
    actual byte count or hash) when the file is missing or does not match.
    With ``log``, the hashing logs its progress.
    """
    path = Path(path)
    want = _check_sha_arg(sha256)
    check_bytes(path, expected_bytes)
    digest = sha256_of(path, log)
    if want is not None and digest != want:
        raise DownloadError(
            f"{path.name}: sha256 mismatch: expected {want}, got {digest} ({path.absolute()})"
        )
    return digest


# --------------------------------------------------------------------------
# download


class _PartHash:
    """Incremental sha256 of the ``.part`` file, kept across resumes."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.h = hashlib.sha256()
        self.n = 0

    def sync(self, part: Path, size: int) -> None:
        """Make the hash cover exactly the first ``size`` bytes of ``part``."""
        if self.n == size:
            return
        if size == 0:
            self.reset()
            return
        self.h = _sha256_file(part, size)
        self.n = size

    def update(self, chunk: bytes) -> None:
        self.h.update(chunk)
        self.n += len(chunk)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _parse_content_range(value: str | None) -> tuple[int, int | None] | None:
    """``bytes START-END/TOTAL`` -> (START, TOTAL or None)."""
    if not value:
        return None
    m = _CONTENT_RANGE_RE.match(value.strip())
    if not m:
        return None
    return int(m.group(1)), (None if m.group(3) == "*" else int(m.group(3)))


def _int_header(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _attempt(url: str, part: Path, ph: _PartHash, expected: int, name: str,
             log: Callable[[str], object], timeout: float,
             progress: Progress) -> int | None:
    """One HTTP request appending to ``part``.

    Returns the actual size of the remote file as far as known once the body
    ended cleanly (``None`` when it is larger than expected but of unknown
    size). Raises ``_Interrupted`` (retry this URL) or ``_UrlFailed``.
    """
    have = _size_of(part) or 0
    if have > expected:
        log(f"{name}: discarding {part.name} ({have} bytes, more than the expected {expected})")
        part.unlink()
        have = 0
    ph.sync(part, have)
    if have == expected and part.exists():
        return have

    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=timeout)
    except urllib.error.HTTPError as e:
        with e:
            code, reason = e.code, e.reason
        if code == 416 and have:
            if have == expected:  # pragma: no cover - handled before the request
                return have
            # The server's file ends before our offset: the part is stale or
            # the file is short. Start over; a full download settles it.
            part.unlink(missing_ok=True)
            ph.reset()
            raise _Interrupted(f"server refused to resume at byte {have} (HTTP 416)")
        raise _UrlFailed(f"HTTP {code} {reason}".strip())
    except urllib.error.URLError as e:  # DNS, connection refused, connect timeout
        raise _UrlFailed(_describe(e))
    except OSError as e:  # reset / timeout while waiting for the response
        raise _Interrupted(f"connection lost before the response: {_describe(e)}")
    except (http.client.HTTPException, ValueError) as e:
        raise _UrlFailed(_describe(e))

    with resp:
        status = resp.status
        length = _int_header(resp.headers.get("Content-Length"))
        resumable = status == 206 or "bytes" in resp.headers.get("Accept-Ranges", "").lower()
        if status == 206:
            cr = _parse_content_range(resp.headers.get("Content-Range"))
            if cr is None or cr[0] != have:
                part.unlink(missing_ok=True)
                ph.reset()
                raise _Interrupted(
                    f"server answered a resume at byte {have} with "
                    f"Content-Range {resp.headers.get('Content-Range')!r}"
                )
            announced = cr[1] if cr[1] is not None else (
                have + length if length is not None else None)
            mode = "ab" if have else "wb"
            if have:
                log(f"{name}: resuming at byte {have} of {expected} from {url}")
            else:
                log(f"{name}: downloading {expected} bytes from {url}")
        elif status == 200:
            if have:
                log(f"{name}: server ignored the resume request; restarting from zero")
                have = 0
                ph.reset()
            else:
                log(f"{name}: downloading {expected} bytes from {url}")
            announced = length
            mode = "wb"
        else:
            raise _UrlFailed(f"unexpected HTTP {status}")

        progress.begin(have)
        # read1() returns whatever has arrived (at most one socket read), so a
        # stall or reset loses nothing already received; the data is gathered
        # into CHUNK_SIZE pieces before it is written and hashed.
        read1 = getattr(resp, "read1", resp.read)
        received = 0
        oversized = False
        pending = bytearray()
        with open(part, mode) as f:
            while True:
                error = None
                try:
                    chunk = read1(CHUNK_SIZE - len(pending))
                except (OSError, http.client.HTTPException) as e:
                    error, chunk = e, b""
                pending += chunk
                eof = not chunk
                oversized = have + received + len(pending) > expected
                if pending and (eof or oversized or len(pending) >= CHUNK_SIZE):
                    f.write(pending)
                    ph.update(pending)
                    received += len(pending)
                    pending.clear()
                    if not oversized:
                        progress(have + received)
                if error is not None:
                    raise _Interrupted(
                        f"connection lost after {have + received} of {expected} bytes "
                        f"({_describe(error)})"
                    )
                if eof or oversized:
                    break

    done = have + received
    if oversized:
        return announced if announced is not None and announced > expected else None
    if length is not None and received < length:
        raise _Interrupted(f"connection closed after {done} of {have + length} bytes")
    if length is None and done < expected and resumable:
        # A body of unknown length that ended early on a server that supports
        # ranges: most likely a cut connection, so resume rather than fail.
        raise _Interrupted(f"connection closed after {done} of {expected} bytes")
    return done


def _finalize(part: Path, dest: Path) -> None:
    with open(part, "ab") as f:
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, dest)
    try:  # persist the rename itself (best effort, POSIX only)
        fd = os.open(dest.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def fetch(urls: Iterable[str] | str, dest: str | Path, expected_bytes: int,
          sha256: str | None = None, log: Callable[[str], object] = print,
          timeout: float = 60, retries: int = 3) -> Path:
    """Download ``dest`` from the first working URL and verify it.

    Returns the (absolute) path of ``dest``. See the module docstring.
    """
    if isinstance(urls, str):
        urls = [urls]
    urls = [u for u in urls if u]
    if expected_bytes < 0:
        raise ValueError(f"expected_bytes must be >= 0, got {expected_bytes}")
    want = _check_sha_arg(sha256)
    dest = Path(dest).expanduser().absolute()
    name = dest.name
    part = dest.with_name(name + ".part")

    # 1. already there?
    if dest.exists():
        try:
            size = _size_of(dest)
            if size != expected_bytes:
                raise DownloadError(
                    f"{name}: expected {expected_bytes} bytes, got {size} ({dest})")
            if want is not None:
                verify(dest, expected_bytes, want)
        except DownloadError as e:
            if not urls:
                raise
            log(f"{name}: existing file is wrong ({str(e).split(': ', 1)[-1]}); downloading again")
        else:
            part.unlink(missing_ok=True)
            return dest
    elif not urls:
        raise DownloadError(f"{name}: not found at {dest} and no download URL is configured")

    dest.parent.mkdir(parents=True, exist_ok=True)
    ph = _PartHash()
    progress = Progress(log, name, expected_bytes, every_s=PROGRESS_INTERVAL, every_pct=PROGRESS_STEP, unit="bytes")

    def complete(actual: int | None, source: str) -> Path:
        size = _size_of(part)
        if actual is None or actual != expected_bytes or size != expected_bytes:
            part.unlink(missing_ok=True)
            got = f"more than {expected_bytes}" if actual is None else str(actual)
            raise DownloadError(
                f"{name}: expected {expected_bytes} bytes, got {got} from {source}")
        ph.sync(part, size)
        digest = ph.hexdigest()
        if want is not None and digest != want:
            part.unlink(missing_ok=True)
            raise DownloadError(
                f"{name}: sha256 mismatch: expected {want}, got {digest} from {source}")
        _finalize(part, dest)
        log(f"{name}: complete ({expected_bytes} bytes, sha256 {digest}) -> {dest}")
        return dest

    # 2. a complete part left by a run that stopped just before the rename
    if _size_of(part) == expected_bytes and expected_bytes > 0:
        ph.sync(part, expected_bytes)
        if want is None or ph.hexdigest() == want:
            log(f"{name}: found a complete {part.name}")
            return complete(expected_bytes, f"{part.name} (earlier download)")
        log(f"{name}: discarding {part.name} (sha256 mismatch)")
        part.unlink()
        ph.reset()

    # 3. download
    failures: list[str] = []
    reasons: list[str] = []  # why each URL failed, without the URL
    for i, url in enumerate(urls):
        more = i + 1 < len(urls)
        tries = 0
        while True:
            try:
                actual = _attempt(url, part, ph, expected_bytes, name, log, timeout, progress)
            except _Interrupted as e:
                tries += 1
                if tries > retries:
                    log(f"{name}: {e}; giving up on {url} after {retries} retries"
                        + ("; trying the next URL" if more else ""))
                    failures.append(f"{url} ({e})")
                    reasons.append(str(e))
                    break
                log(f"{name}: {e}; retrying {url} ({tries}/{retries})")
                time.sleep(RETRY_DELAY * tries)
                continue
            except _UrlFailed as e:
                log(f"{name}: {url} failed: {e}" + ("; trying the next URL" if more else ""))
                failures.append(f"{url} ({e})")
                reasons.append(str(e))
                break
            return complete(actual, url)

    sha_note = f", sha256 {want}" if want else ""
    raise DownloadError(
        f"{name}: could not download (no network?): tried {', '.join(failures)}. "
        f"Place the file ({expected_bytes} bytes{sha_note}) at {dest} and rerun.",
        brief=f"could not download (no network?): {'; '.join(dict.fromkeys(reasons))}",
    )


# --------------------------------------------------------------------------
# command line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m memobench.datasets.download",
        description="Download a file (resuming, verifying its size and sha256).",
    )
    p.add_argument("--dest", required=True, help="where to write the file")
    p.add_argument("--bytes", type=int, required=True, dest="expected_bytes",
                   help="expected size in bytes")
    p.add_argument("--sha256", default=None, help="expected sha256 hex digest")
    p.add_argument("--timeout", type=float, default=60.0, help="socket timeout (s)")
    p.add_argument("--retries", type=int, default=3,
                   help="resume attempts per URL after a cut connection")
    p.add_argument("urls", nargs="*", metavar="URL", help="mirrors, tried in order")
    args = p.parse_args(argv)
    if args.sha256 is not None:
        try:
            _check_sha_arg(args.sha256)
        except ValueError as e:
            p.error(str(e))
    try:
        fetch(args.urls, args.dest, args.expected_bytes, sha256=args.sha256,
              log=lambda msg: print(msg, flush=True), timeout=args.timeout,
              retries=args.retries)
    except DownloadError as e:
        print(str(e), file=sys.stderr, flush=True)
        return 1
    except OSError as e:  # local problems: disk full, permissions, ...
        print(_one_line(f"{Path(args.dest).name}: {e}"), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
