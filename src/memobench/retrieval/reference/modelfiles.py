"""Finding an embedding retriever's model files in an installed package, and
checking them against their pinned sha256 before use (nothing is fetched)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from ...core.errors import ConfigError


def package_folder(package: str, who: str, hint: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ConfigError(f"{who}: the model package {package} is not installed ({hint})")
    return Path(spec.origin).parent


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def checked_files(path: Path, pinned: dict[str, str], who: str, model: str, hint: str) -> dict[str, str]:
    """{file: sha256} of the files ``pinned`` names under ``path``, each
    equal to its pinned digest (else a one-line error naming the file)."""
    out = {}
    for name, want in pinned.items():
        f = path / name
        if not f.is_file():
            raise ConfigError(f"{who}: {f} is missing ({hint})")
        got = sha256_of(f)
        if got != want:
            raise ConfigError(f"{who}: {f} has sha256 {got}, expected {want} (not {model}'s file)")
        out[name] = got
    return out
