"""What a memory service is, as metrics.json records it and the report and the latency page show it
(docs/memory-services.md#which-server-measured-it): an MCP server's ``serverInfo`` (the name and version
of its ``initialize`` answer), the package a stdio server's command runs, and for HTTP the host. Read when
the retrieve job runs, beside the figures: never part of a variant's definition, so upgrading a server
reruns nothing unless asked, and the same server gives the same bytes run after run."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

# Parquet key-value metadata of a system variant's outcomes tables: what served them (services/job/rank.py
# served_by), which the merge writes into metrics.json's ``system`` (:func:`merged`)
SERVICE_KEY = b"memobench.service"
# programs that run the script named after their options: its package.json names the package
_NODE = re.compile(r"^(node|nodejs|bun|deno|tsx)(\.exe)?$")
# programs that fetch and run a package named by their first argument (npx @scope/pkg@1.2.0)
_RUNNERS = re.compile(r"^(npx|pnpx|bunx|uvx)(\.exe)?$")


def package_of(command: list[str]) -> str:
    """The package a server's command runs, ``name@version`` where it can be found: a node script's
    package.json (``node .../node_modules/@scope/pkg/dist/index.js``, or a program on ``PATH`` linked into
    one), a console script's distribution in its virtual environment, ``python -m module``'s; the package
    a runner is given (``npx -y @scope/pkg``, as given); otherwise the program's name."""
    program, args = command[0], [a for a in command[1:]]
    name = Path(program).name
    if _NODE.match(name):
        script = next((a for a in args if not a.startswith("-") and a not in ("run",)), None)
        found = _npm_package(Path(script)) if script else None
        return found or name
    if _RUNNERS.match(name):
        given = next((a for a in args if not a.startswith("-")), None)
        return given or name
    if re.match(r"^python(\d(\.\d+)?)?$", name) and "-m" in args[:-1]:
        module = args[args.index("-m") + 1]
        return _python_module(program, module) or module
    where = shutil.which(program)
    if where is None:
        return name
    return _npm_package(Path(where)) or _console_script(Path(where), name) or name


def _npm_package(script: Path) -> str | None:
    """``name@version`` of the package.json nearest above ``script`` (its real path: an npm bin is a link)."""
    try:
        at = script.resolve()
    except OSError:
        return None
    for folder in at.parents:
        manifest = folder / "package.json"
        if manifest.is_file():
            try:
                pkg = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            if isinstance(pkg, dict) and isinstance(pkg.get("name"), str):
                return f"{pkg['name']}@{pkg['version']}" if isinstance(pkg.get("version"), str) else pkg["name"]
        if folder.name == "node_modules":
            return None
    return None


def _site_packages(program: Path) -> list[Path]:
    """The site-packages folders of the environment whose ``bin`` holds ``program`` (a virtual environment)."""
    root = program.absolute().parent.parent
    return sorted(root.glob("lib/python*/site-packages")) + sorted(root.glob("Lib/site-packages"))


def _distributions(program: Path):
    """(name, version, its dist-info folder) of each distribution installed beside ``program``."""
    for site in _site_packages(program):
        for info in sorted(site.glob("*.dist-info")):
            meta = info / "METADATA"
            try:
                text = meta.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            name = re.search(r"^Name:\s*(.+)$", text, re.M)
            version = re.search(r"^Version:\s*(.+)$", text, re.M)
            if name and version:
                yield name.group(1).strip(), version.group(1).strip(), info


def _console_script(program: Path, name: str) -> str | None:
    """``name@version`` of the distribution whose console script ``name`` is, in ``program``'s environment."""
    entry = re.compile(rf"^\s*{re.escape(name)}\s*=", re.M)
    for dist, version, info in _distributions(program):
        try:
            points = (info / "entry_points.txt").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        scripts = points.split("[console_scripts]", 1)[1].split("\n[", 1)[0] if "[console_scripts]" in points else ""
        if entry.search(scripts):
            return f"{dist}@{version}"
    return None


def _python_module(python: str, module: str) -> str | None:
    """``name@version`` of the distribution that installs ``module``'s top-level package, in ``python``'s
    environment."""
    where = shutil.which(python)
    if where is None:
        return None
    top = module.split(".")[0]
    if Path(where).absolute().parent.parent == Path(sys.prefix):  # this environment: an editable install too
        import importlib.metadata

        for dist in importlib.metadata.packages_distributions().get(top, [])[:1]:
            return f"{dist}@{importlib.metadata.version(dist)}"
    for dist, version, info in _distributions(Path(where)):
        try:
            record = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
            listed = (info / "top_level.txt").read_text(encoding="utf-8") if (info / "top_level.txt").is_file() else ""
        except OSError:
            continue
        if top in listed.split() or re.search(rf"^{re.escape(top)}(/|\.py,)", record, re.M):
            return f"{dist}@{version}"
    return None


def host_of(url: str) -> str:
    """A URL's host and port, without its user information (which may hold a secret)."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    host = f"[{u.hostname}]" if u.hostname and ":" in u.hostname else u.hostname or ""
    return host + (f":{u.port}" if u.port else "")


def shown(identity: dict | None) -> str:
    """An identity as the report and the latency page show it: ``memory 0.6.0 (@scope/pkg@0.6.0)``,
    ``127.0.0.1:8765``; "" for none."""
    if not identity:
        return ""
    server = identity.get("server") or {}
    said = " ".join(x for x in (server.get("name"), server.get("version")) if x)
    where = [x for x in (identity.get("package"), identity.get("host")) if x and x != said]
    if said and where:
        return f"{said} ({', '.join(where)})"
    return said or ", ".join(where)


def served_text(system: dict | None) -> str:
    """What served a memory service's figures (metrics.json's ``system``), as the report and the latency
    page say it: ``memory 0.6.0 (@scope/pkg@0.6.0)``, several joined by `` / ``; "" for none."""
    if not system:
        return ""
    return " / ".join(filter(None, map(shown, system.get("served_by") or [system])))


def merged(tables) -> dict:
    """What served a variant's segments (their :data:`SERVICE_KEY`), as metrics.json's ``system`` adds it:
    the one identity, or ``served_by``, each distinct one in segment order, where segments differ (a
    server upgraded between two jobs)."""
    found = []
    for t in tables:
        raw = (t.schema.metadata or {}).get(SERVICE_KEY)
        said = json.loads(raw) if raw else None
        if said and said not in found:
            found.append(said)
    if not found:
        return {}
    return found[0] if len(found) == 1 else {"served_by": found}
