"""The merge stage (its rule: ``merge``)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage, without


@stage("merge", inputs=["rankings", "outcomes", "deep", "turns", "data_summary", "questions", "haystacks", "events"],
       optional=["verified", "base_verified", "context", "context_turns"],
       outputs=["rankings", "outcomes", "metrics", "deep", "turns", "official", "run"], params=["variant", "fmt", "budgets"])
def merge(job: Job) -> None:
    """A variant's segments merged, then the field's yardsticks on the merged
    deep list: official metrics (official.json) and the TREC run. One job, so
    a variant's results cost one process start."""
    if job.params.variant.get("grain") != "turn":
        # pyarrow imports numpy when installed (its import and BLAS threads: a fifth of this job's CPU);
        # nothing a session variant's merge does uses it; a turn variant's figures (turn_metrics) need it
        without("numpy")
    from ..runs import trec
    from ..evaluation import official as off
    from ..evaluation.metrics import concat_rankings, merge_segments
    from ..evaluation.published import data_file
    from ..core.tables import write_table

    i, o, w = job.input, job.output, job.wildcards
    # the deep lists (depth 50), concatenated in question order like the rankings
    write_table(o.deep, concat_rankings(i.deep))
    reads: dict = {}  # the questions, lists and haystacks official.compute read, which the budgets read too
    block, rows = off.compute(job.params.fmt, i.questions, i.haystacks, i.events, o.deep, log=job.log, reads=reads)
    # a turn variant's turn lists, and its figures at both grains (a session variant's official.json is
    # as it was before turn variants existed)
    turns = concat_rankings(i.turns)
    write_table(o.turns, turns)
    turn_block, turn_rows = None, []
    if turns.num_rows:  # a session variant: no turn figures, and no numpy (turn_metrics') to import
        from ..evaluation import turn_metrics

        turn_block, turn_rows = turn_metrics.compute(job.params.fmt, i.questions, i.haystacks, i.events, o.turns,
                                                     log=job.log, items=True)
    # recall within token budgets of the context a list delivers: a session variant's deep list (the sessions
    # it lists), a turn variant's turn lists at turn grain; the outcomes' columns are there for every variant
    # (null where nothing was measured)
    from ..evaluation import budgets

    budget_block, per_question = None, {}
    if job.params.variant.get("grain") == "turn":
        if turn_block is not None and i.get("context_turns"):
            budget_block, per_question = budgets.compute_turns(job.params.fmt, turn_rows, i.questions, i.haystacks,
                                                               i.context_turns, job.params.budgets, o.turns)
    elif block is not None and i.get("context"):
        budget_block, per_question = budgets.compute(job.params.fmt, rows, i.questions, i.haystacks, o.deep,
                                                     i.context, job.params.budgets, reads=reads)
    columns = budgets.outcome_columns(per_question)
    merge_segments(w.dataset, job.params.variant, i.rankings, i.outcomes, i.data_summary,
                   o.rankings, o.outcomes, o.metrics, log=job.log, deep_in=i.deep,
                   warn=lambda line: print(line, file=sys.stderr, flush=True), columns=columns)
    run = trec.write(o.deep, i.questions, w.variant, o.run, log=job.log)
    official = {"dataset": w.dataset, "variant": w.variant, "format": job.params.fmt,
                "grain": job.params.variant.get("grain") or "session",  # what the figures are of
                "data_file": data_file(i.get("verified")), "rankings": Path(o.deep).name, "official": block,
                "run_trec": run}
    if budget_block is not None:
        official["budgets"] = budget_block
    if i.get("base_verified"):  # the sessions come from another dataset's file (CN: LongMemEval-S's)
        official["haystacks_data_file"] = data_file(i.base_verified)
    if turn_block is not None:
        official["turn_rankings"] = Path(o.turns).name
        official["turn"] = turn_block
    write_json(o.official, official)
