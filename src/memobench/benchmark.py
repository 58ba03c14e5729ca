"""`python -m memobench.benchmark` still runs `python -m memobench.tools.benchmark` (its home
since the package's layers became subpackages); kept for one release, see
docs/changelog.md. Nothing imports this module."""

import runpy

if __name__ == "__main__":
    runpy.run_module("memobench.tools.benchmark", run_name="__main__", alter_sys=True)
