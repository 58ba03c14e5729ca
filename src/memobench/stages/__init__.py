"""The workflow's stages: the adapter every rule goes through
(:mod:`.adapter`) and one module per stage, named like its rule.

Nothing here imports a stage module: a job imports its own (``main``), so
each stage's code fingerprint holds the adapter and that stage's code only
(``fingerprint.py``), and editing one stage reruns that stage and what
follows it.
"""

from .adapter import (STAGES, Job, Stage, all_stages, check_names, files_literal, job_literal, load_stage, main, named_values,
                      run_logged, stage, without_pandas)

__all__ = ["STAGES", "Job", "Stage", "all_stages", "check_names", "files_literal", "job_literal", "load_stage", "main", "named_values",
           "run_logged", "stage", "without_pandas"]
