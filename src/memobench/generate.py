"""`python -m memobench.generate` still runs `python -m memobench.tools.generate` (its home
since the package's layers became subpackages); kept for one release, see
docs/changelog.md. Nothing imports this module."""

import runpy

if __name__ == "__main__":
    runpy.run_module("memobench.tools.generate", run_name="__main__", alter_sys=True)
