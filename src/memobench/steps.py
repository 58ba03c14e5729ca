"""The former home of the stage adapter and every stage, kept importable for
one release: they live in :mod:`memobench.stages` now (the adapter in
``stages/adapter.py``, one module per stage). Importing this module loads
every stage, as it did; no job imports it, so it is in no stage's code
fingerprint and editing it reruns nothing.
"""

from __future__ import annotations

from .stages.adapter import (  # noqa: F401
    STAGES,
    TRIGGER_PARAMS,
    Job,
    Names,
    Stage,
    all_stages,
    check_names,
    environment_message,
    raise_internal,
    run,
    run_logged,
    stage,
    without_pandas,
)

all_stages()
