"""Deterministic generators of LongMemEval-, LoCoMo- and LongMemEval-CN-shaped files.

The real LongMemEval files cannot be downloaded here, so tests and benchmarks
run on files made by this package.  Everything is a pure function of the seed
and the parameters: every random choice comes from a ``random.Random`` whose
seed is a BLAKE2 digest of ``(seed, purpose, index)``, so no output depends on
hash randomization, set order or the process.  Same arguments, same bytes.

One module per job, imported from itself (this file imports nothing, like
every subpackage's): vocabulary.py (word lists, seeded randomness, dates, the
atomic file), longmemeval.py, repeated.py (repeated and uneven session ids),
surrogates.py (JSON surrogate escapes), locomo.py, cn.py, and __main__.py (the
command line).

Formats written (see docs/harnesses.md#input-files-and-environment):

* :func:`write_longmemeval` -- a JSON array written like ``json.dumps(items,
  ensure_ascii=False)`` (one line, items separated by ``", "``).  Each item has
  ``question_id``, ``question_type``, ``question``, ``answer``,
  ``question_date``, ``haystack_session_ids``, ``haystack_dates``,
  ``haystack_sessions`` and ``answer_session_ids``.  Filler sessions come from
  a shared pool: the same id always carries the same content, but the date
  attached to it differs per question.  The output is streamed (one item in
  memory at a time, plus a bounded cache of pool sessions), so an M-scale
  file of ~2.7 GB is written with flat memory.
* :func:`write_locomo` -- ``json.dumps(conversations, indent=2)`` like the
  real ``locomo10.json``, with the same key structure, the real date format,
  orphan date keys, image turns and the real messy evidence strings.
* :func:`write_cn` -- a ``results.jsonl`` whose rows pair (by ``questionId``
  minus ``_cn``) with a LongMemEval file's question ids, with unmatched ids,
  suffix-less ids, duplicates and blank lines.

``spice=True`` adds the edge cases of the harness verification list (see
:data:`LME_SPICE_CASES` and :data:`LOCOMO_SPICE_CASES`); ``surrogates=True``
puts JSON surrogate escapes, paired and lone, into about 2% of the turn texts
(:data:`SURROGATE_CASES`).

Only the standard library is used, except :mod:`ijson` in :func:`write_cn`
when it reads a LongMemEval file (it falls back to :mod:`json` if ijson is
missing).

CLI::

    python -m memobench.tools.generate longmemeval --out S.json --questions 500 \\
        --sessions 50 --seed 0 [--spice] [--surrogates [SHARE]] [--target-bytes 280e6]
    python -m memobench.tools.generate locomo --out locomo10.json --conversations 10
    python -m memobench.tools.generate cn --out results.jsonl --lme S.json
"""
