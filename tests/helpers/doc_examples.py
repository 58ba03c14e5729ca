"""What the test that runs the documentation's examples as copied
(tests/workflow/test_docs_commands.py: README.md, then docs/*.md) uses: finding a page's fenced
blocks in order, a copy of the project set up as the README tells a user to
(a venv at `.venv`, the real LoCoMo file in `data/`), running a shell line
there with bash, and the reference servers a page starts
(`memobench serve ...`) on the ports it names."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from tests.helpers import copy_project

# a fenced block, at the margin or indented (inside a list item: its body is dedented)
FENCED = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
FILE_HEADER = re.compile(r"# (\w+\.py)\b")  # a Python block that is a file to write: "# name.py ..."


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def fenced(text: str) -> list[tuple[str, str]]:
    """Every fenced block of a page in its order: (language, body), an indented block's body dedented."""
    return [(m.group("lang"), textwrap.dedent(m.group("body"))) for m in FENCED.finditer(text)]


def blocks(text: str, lang: str) -> list[str]:
    return [body for got, body in fenced(text) if got == lang]


def commands(code: str) -> list[str]:
    """A shell block's command lines, comments (whole-line and trailing) and blank lines left out, a
    line continued with a backslash joined to the next."""
    code = re.sub(r"\\\n\s*", "", code)
    return [re.sub(r"\s+#\s.*$", "", line.strip()) for line in code.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def steps(text: str) -> list[tuple[str, str]]:
    """A page's runnable blocks in its order: ("sh", a command line),
    ("yaml", a config block) or ("python", a file's code: a block headed
    `# name.py`; other Python blocks are excerpts of the package, not run)."""
    out = []
    for lang, body in fenced(text):
        if lang == "sh":
            out += [("sh", line) for line in commands(body)]
        elif lang == "yaml":
            out.append(("yaml", body))
        elif lang == "python" and FILE_HEADER.match(body):
            out.append(("python", body))
    return out


def python_file(body: str) -> str:
    """The file name a `# name.py` Python block is written to."""
    return FILE_HEADER.match(body).group(1)


def user_project(dest: Path, locomo: Path) -> Path:
    """A copy of the project at ``dest`` as a user's clone after the
    README's set-up: the tests' environment as its `.venv`, the real LoCoMo
    file in `data/`."""
    proj = copy_project(dest)
    (proj / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    (proj / "data").mkdir()
    shutil.copy(locomo, proj / "data" / "locomo10.json")  # "Copy the file into data/"
    return proj


def user_env(proj: Path, activated: bool = False) -> dict[str, str]:
    """The environment a user's commands run in: the tests' own venv not on
    PATH, and `.venv/bin` first on it when ``activated`` (a user who ran
    `source .venv/bin/activate`, as the docs' bare `memobench` and
    `snakemake` assume)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p != os.path.dirname(sys.executable)]
    if activated:
        path.insert(0, str(proj / ".venv" / "bin"))
        env["VIRTUAL_ENV"] = str(proj / ".venv")
    env["PATH"] = os.pathsep.join(path)
    return env


def run_line(line: str, proj: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    """One shell line of a page, run with bash in the project's copy."""
    return subprocess.run(["bash", "-c", line], cwd=proj, env=env, capture_output=True, text=True, timeout=timeout)


def serve_port(line: str) -> int | None:
    """The port a `memobench serve` line listens on (its `--port`, else the
    server's default: 8765, 8766 with `--mcp http`); None over stdio."""
    args = shlex.split(line.rstrip("&"))
    if "--port" in args:
        return int(args[args.index("--port") + 1])
    mcp = args[args.index("--mcp") + 1] if "--mcp" in args else None
    return None if mcp == "stdio" else 8766 if mcp == "http" else 8765


class DocServer:
    """A `memobench serve` line of a page, started as the page says (bash, in
    the project's copy), its first line (where it listens: on stderr over
    stdio) checked. The port it names is held with a lock file while it runs,
    so that two test modules running the docs' servers (on the docs' fixed
    ports) on two workers take turns instead of failing to bind."""

    def __init__(self, line: str, proj: Path, env: dict[str, str]):
        self.line, self.port = line, serve_port(line)
        self.lock = None
        if self.port is not None:
            self.lock = open(Path(tempfile.gettempdir()) / f"memobench-docs-port-{self.port}.lock", "w")
            fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.proc = subprocess.Popen(["bash", "-c", f"exec {line.rstrip('&').strip()}"], cwd=proj, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started = (self.proc.stderr if self.port is None else self.proc.stdout).readline()
        if not re.match(r"memobench(: serving| serve: )", self.started):  # over stdio: "memobench serve: ..."
            self.stop()
            raise AssertionError(f"{line}: the server did not start: {self.started}{self.proc.stderr.read()}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.lock is not None:
            self.lock.close()  # the lock goes with the file
            self.lock = None
