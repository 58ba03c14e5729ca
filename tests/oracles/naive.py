"""A deliberately naive, literal second reading of docs/harnesses.md: the test
oracle of the pipeline, and the benchmark's baseline (it works the way the
original harnesses do: the whole file parsed, everything rebuilt per question).

Written from the harness description alone (docs/harnesses.md: the shared steps, run, run-m,
locomo, exp6 and the traps), without
looking at the project's engine / normalize / retrieval / variants modules.
It only imports the node-verified building blocks: ``memobench.core.jsmath``,
``memobench.memo.tokenize`` (tokenizers and windows) and ``memobench.datasets.dates``.

Everything is recomputed from scratch for every question, with plain loops:

* :func:`reference_run`    -- run.cjs (fts_limit 500) / run-m.cjs (fts_limit 2000)
* :func:`reference_locomo` -- locomo.cjs (FTS rebuilt once per conversation);
  ``backend="index"`` runs the exp6 algorithm on the LoCoMo sessions instead.
* :func:`reference_exp6`   -- exp6.cjs / exp6-m.cjs (inverted index)

Each returns a list of dicts ``{question_id, question_type, q_index, status,
reason, rank, final, pool_size}`` in file order (skipped questions included,
with ``final == []``). ``reason`` is None for a normal evaluated question,
"empty_seq" for one counted as a miss (run/run-m/exp6), and "no_gold",
"no_sessions" or "empty_window" (locomo) for a skipped one.
"""

from __future__ import annotations

import json
import re
import sqlite3

from memobench.datasets.dates import parse_lme, parse_locomo
from memobench.core.jsmath import MISSING, js_log, js_string, utf16_key, utf16_len
from memobench.memo.tokenize import seq_ascii, seq_exp6, window_cf, window_exp6, window_plain

DAY_MS = 86_400_000
PAGE = 10  # REQUEST_LIMIT = 10; token/pair pages are max(10, 8) = 10
FINAL_CUT = 10

__all__ = ["reference_run", "reference_locomo", "reference_exp6"]


# ---------------------------------------------------------------------------
# Small literal helpers
# ---------------------------------------------------------------------------


def occurrences(event_tokens, phrase_tokens):
    """occ(E, P): number of start positions i with E[i:i+|P|] == P (tokenizers)."""
    phrase_tokens = list(phrase_tokens)
    m = len(phrase_tokens)
    if m == 0:
        return 0
    if m == 1:
        return event_tokens.count(phrase_tokens[0])
    count = 0
    first = phrase_tokens[0]
    for i in range(len(event_tokens) - m + 1):
        if event_tokens[i] == first and event_tokens[i : i + m] == phrase_tokens:
            count += 1
    return count


def get_index(arr, i):
    """JS ``arr[i]``: MISSING when out of range."""
    if isinstance(arr, list) and 0 <= i < len(arr):
        return arr[i]
    return MISSING


def representative(events, phrase_tokens):
    """Representative event: the best event (occ desc, len asc, time desc, seq desc), strict improvement only."""
    best = None
    for ev in events:  # event order
        # an event without the phrase's first token holds no occurrence (a shortcut, not a rule)
        if not phrase_tokens or phrase_tokens[0] not in ev["token_set"]:
            continue
        o = occurrences(ev["tokens"], phrase_tokens)
        if o < 1:
            continue
        cand = {"occ": o, "len": ev["len"], "time": ev["time"], "seq": ev["seq"]}
        if best is None:
            best = cand
            continue
        better = False
        if cand["occ"] != best["occ"]:
            better = cand["occ"] > best["occ"]
        elif cand["len"] != best["len"]:
            better = cand["len"] < best["len"]
        elif cand["time"] != best["time"]:
            better = cand["time"] > best["time"]
        elif cand["seq"] != best["seq"]:
            better = cand["seq"] > best["seq"]
        if better:
            best = cand
    return best


def session_representative(session, phrase_tokens):
    """representative() of a session's events, kept on the session, whose
    events never change: a conversation's questions ask many of the same
    phrases (computed less often, the same answer)."""
    memo = session.setdefault("reps", {})
    key = tuple(phrase_tokens)
    if key not in memo:
        memo[key] = representative(session["events"], phrase_tokens)
    return memo[key]


def session_tokens(session):
    """The tokens of any of a session's events (the union of their sets),
    kept on the session: "does an event hold t" asked once per session."""
    if "tokens_any" not in session:
        session["tokens_any"] = frozenset().union(*(ev["token_set"] for ev in session["events"]))
    return session["tokens_any"]


def session_order(candidates):
    """Session order: occ desc, len asc, time desc, id asc (UTF-16), seq desc; stable."""
    return sorted(
        candidates,
        key=lambda c: (-c["occ"], c["len"], -c["time"], utf16_key(c["id"]), -c["seq"]),
    )


def fts_quote(phrase):
    return '"' + phrase.replace('"', '""') + '"'


_LONE = re.compile("[\ud800-\udfff]")


def v8_utf8(text):
    """A JS string as UTF-8 for SQLite: a lone surrogate (a JSON escape that
    is not half of a pair, kept by JSON.parse as one UTF-16 unit) as U+FFFD.
    The harnesses' binding may hand SQLite the surrogate's own three bytes
    instead; unicode61 splits at both, and Python's sqlite3 takes only UTF-8."""
    return _LONE.sub("\ufffd", text)


# Tests run this reference on one file under several variants, each call asking
# the same haystacks' tables the same phrases: with SHARE_TABLES set (the tests'
# conftest sets it), a table's answers are kept across calls, keyed by its
# limit and rows, and a table is built only when a phrase is new to it. The
# benchmark loads this file alone (SHARE_TABLES unset): every question's table
# is built, as the harnesses build it.
SHARE_TABLES = False
_ANSWERS: dict = {}  # (limit, rows) -> {phrase: ids}


class Fts:
    """The in-memory ``docs USING fts5(id, body)`` table of 3.1."""

    def __init__(self, limit):
        self.limit = limit
        self.rows = None  # what the table holds, or is to hold (built when a phrase is first asked)
        self.built = False
        self.found = {}  # phrase -> the ids matching it in this table
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(id, body)")

    def rebuild(self, sessions):
        rows = tuple((v8_utf8(s["id"]), v8_utf8("\n".join(ev["text"] for ev in s["events"]))) for s in sessions)
        if rows == self.rows:
            return  # the table holds these rows already (the last question's haystack again)
        self.rows, self.built = rows, False
        if SHARE_TABLES:
            if len(_ANSWERS) > 4096:  # the test files hold about 1,000 haystacks (70 MB of text): a bound
                _ANSWERS.clear()
            self.found = _ANSWERS.setdefault((self.limit, rows), {})
        else:
            self.found = {}
            self._build()

    def _build(self):
        self.db.execute("DELETE FROM docs")
        self.db.executemany("INSERT INTO docs(id, body) VALUES (?, ?)", self.rows)  # haystack order
        self.built = True

    def query(self, phrase):
        """The ids of the rows matching ``phrase`` (asked once per table: the caller only reads them)."""
        if phrase not in self.found:
            if not self.built:
                self._build()
            try:
                rows = self.db.execute(
                    "SELECT id FROM docs WHERE docs MATCH ? LIMIT ?", (fts_quote(v8_utf8(phrase)), self.limit)
                ).fetchall()
            except sqlite3.Error:
                rows = []
            self.found[phrase] = [r[0] for r in rows]
        return self.found[phrase]

    def close(self):
        self.db.close()


_TOKENS: dict = {}  # (seq_fn, text) -> (tokens, their set): a text's tokens, computed once (read only)


def make_events(texts, base, seq_fn):
    events = []
    for k, text in enumerate(texts):
        known = _TOKENS.get((seq_fn, text))
        if known is None:
            if len(_TOKENS) > 500_000:
                _TOKENS.clear()
            tokens = seq_fn(text)
            known = _TOKENS[(seq_fn, text)] = (tokens, frozenset(tokens))
        tokens, token_set = known
        events.append(
            {
                "text": text,
                "tokens": tokens,
                "token_set": token_set,
                "len": len(text),  # code points
                "time": base + k,  # one millisecond per turn
                "seq": k,
            }
        )
    return events


# ---------------------------------------------------------------------------
# Candidate lists (the JS check; the inverted index)
# ---------------------------------------------------------------------------


def fts_candidates(fts, by_id, phrase, js_tokens):
    """Candidates and the JS check: FTS rows (row order), each resolved to the LAST session with that id, kept if a
    representative exists; then the session order."""
    cands = []
    for sid in fts.query(phrase):
        session = by_id[sid]
        rep = session_representative(session, js_tokens)
        if rep is None:
            continue
        cands.append({"id": session["id"], **rep})
    return session_order(cands)


def index_candidates(sessions, phrase_tokens):
    """The inverted index: walk sessions in haystack order; a session is considered only if one of its events
    has the phrase's first token; representative over its events. A repeated id
    (docs/edge-cases.md): every entry is matched on its own events and is a candidate of its
    own, named by the id."""
    if not phrase_tokens:
        return []
    cands = []
    first = phrase_tokens[0]
    for s in sessions:
        if first not in session_tokens(s):  # no event has it
            continue
        rep = session_representative(s, phrase_tokens)
        if rep is None:
            continue
        cands.append({"id": s["id"], **rep})
    return session_order(cands)


# ---------------------------------------------------------------------------
# The 0.8.0 pipeline for one question (section 5)
# ---------------------------------------------------------------------------


def rank_one(question, sessions, window_tokens, weights, backend, fts=None, token_check=None):
    """Returns the final list (session ids) for one question.

    backend "fts": ``fts`` is an already rebuilt Fts; ``token_check`` is "split" (run.cjs:
    ``p.split(" ")``) or "ascii" (run-m / locomo: S-ASCII(p)).
    backend "index": exp6 (S-EXP6 tokens, exact df).
    """
    N = len(sessions)
    if backend == "fts":
        by_id = {}
        for s in sessions:
            by_id[s["id"]] = s  # last session object with that id wins

        def candidates(phrase, js_tokens):
            return fts_candidates(fts, by_id, phrase, js_tokens)

        def df(term):
            return len(fts.query(term))

        question_tokens = seq_ascii(question)
        if token_check == "split":
            phrase_tokens = lambda p: p.split(" ")  # noqa: E731
        else:
            phrase_tokens = seq_ascii
    else:

        def candidates(phrase, js_tokens):
            return index_candidates(sessions, js_tokens)

        def df(term):
            # distinct ids whose events hold the term (a repeated id counts once)
            return len({s["id"] for s in sessions if term in session_tokens(s)})

        question_tokens = seq_exp6(question)
        phrase_tokens = seq_exp6

    # the phrase step
    P = [c["id"] for c in candidates(question, question_tokens)[:PAGE]]

    # the weighted step
    T = []
    w = list(window_tokens)
    if len(w) >= 2:
        idf_cache = {}

        def idfP(t):
            if t not in idf_cache:
                d = df(t)
                idf_cache[t] = js_log((N + 1) / (1 + min(d, 50)))
            return idf_cache[t]

        phrase_list = []
        for t in w:
            if weights == "idf080":
                weight = 4 * idfP(t)
            else:
                weight = utf16_len(t)
            phrase_list.append((t, weight))
        for a, b in zip(w, w[1:]):
            pair_len = utf16_len(a) + 1 + utf16_len(b)
            if weights == "idf080":
                weight = pair_len * max(idfP(a), idfP(b))
            else:
                weight = pair_len
            phrase_list.append((a + " " + b, weight))

        counts = {}
        rep_time = {}
        for phrase, weight in phrase_list:
            for c in candidates(phrase, phrase_tokens(phrase))[:PAGE]:
                if c["id"] not in counts:
                    counts[c["id"]] = weight
                    rep_time[c["id"]] = c["time"]
                else:
                    counts[c["id"]] = counts[c["id"]] + weight
        keys = list(counts)  # first-appearance order
        keys = sorted(keys, key=lambda k: (-counts[k], -rep_time[k]))
        T = keys[:FINAL_CUT]

    # 4.3 / 5.6 final = P + T, de-duplicated, cut to 10
    final = []
    for sid in P + T:
        if sid not in final:
            final.append(sid)
    return final[:FINAL_CUT]


def gold_rank(final, gold):
    for i, sid in enumerate(final):
        if sid in gold:
            return i + 1
    return 0


# ---------------------------------------------------------------------------
# LongMemEval (sessions and events)
# ---------------------------------------------------------------------------


def lme_sessions(entry, seq_fn):
    ids = entry.get("haystack_session_ids")
    dates = entry.get("haystack_dates")
    raw_sessions = entry.get("haystack_sessions") or []
    sessions = []
    for i, raw in enumerate(raw_sessions):
        rid = get_index(ids, i)
        sid = "s" + str(i) if rid is MISSING or rid is None else js_string(rid)
        base = parse_lme(js_string(get_index(dates, i)))
        if base is None:
            base = (len(dates) - i) * DAY_MS
        texts = []
        for turn in raw if raw is not None else []:
            if turn is None or not isinstance(turn, dict) or "content" not in turn:
                texts.append("")
            else:
                texts.append(js_string(turn["content"]))
        sessions.append({"id": sid, "events": make_events(texts, base, seq_fn)})
    return sessions


def lme_gold(entry):
    """1.2 gold: ``String(a)`` for each element of ``answer_session_ids`` that
    also occurs among ``String(x)`` of the elements of the raw
    ``haystack_session_ids`` array (``|| []`` for both). The raw array, not the
    session ids: an element past the last session still counts, the ``"s" + i``
    of a missing or null element does not, and a null element is ``"null"``.
    ``for ... of`` a string goes through its characters, as iterating a Python
    str does."""
    hay = {js_string(x) for x in (entry.get("haystack_session_ids") or [])}
    return {js_string(a) for a in (entry.get("answer_session_ids") or [])} & hay


def _entries(path, start, limit):
    """run.cjs parses the whole file; with ``start``/``limit`` the entries are
    streamed (like run-m's M_START/M_LIMIT) so a multi-GB file fits in memory."""
    if start is None and limit is None:
        with open(path, encoding="utf-8") as f:
            yield from enumerate(json.load(f))
        return
    import ijson

    start = start or 0
    with open(path, "rb") as f:
        for q_index, e in enumerate(ijson.items(f, "item", use_float=True)):
            if limit is not None and q_index >= start + limit:
                return
            if q_index >= start:
                yield q_index, e


def _lme(path, backend, fts_limit, weights, window, start=None, limit=None):
    entries = _entries(path, start, limit)
    seq_fn = seq_ascii if backend == "fts" else seq_exp6
    window_fn = {"cf": window_cf, "plain": window_plain, "exp6": window_exp6}[window]
    token_check = "split" if fts_limit == 500 else "ascii"
    fts = Fts(fts_limit) if backend == "fts" else None
    out = []
    for q_index, e in entries:
        qtype = e.get("question_type")
        rec = {
            "question_id": js_string(e.get("question_id", MISSING)),
            "question_type": "unknown" if qtype is None else js_string(qtype),
            "q_index": q_index,
            "status": "skipped",
            "reason": None,
            "rank": 0,
            "final": [],
        }
        out.append(rec)
        sessions = lme_sessions(e, seq_fn)
        rec["pool_size"] = len(sessions)  # N counts every session (sessions and events)
        gold = lme_gold(e)
        rec["gold_in_pool"] = sum(sess["id"] in gold for sess in sessions)  # positions: a repeated id counts each time
        if not gold:
            rec["reason"] = "no_gold"
            continue
        if not sessions:
            rec["reason"] = "no_sessions"
            continue
        question = e["question"]
        if not seq_fn(question):
            rec["status"] = "evaluated"  # counted in the denominator as a miss
            rec["reason"] = "empty_seq"
            continue
        if backend == "fts":
            fts.rebuild(sessions)
        win = window_fn(question)  # base stop list (45 words), cut to 8
        final = rank_one(question, sessions, win, weights, backend, fts, token_check)
        rec["status"] = "evaluated"
        rec["final"] = final
        rec["rank"] = gold_rank(final, gold)
    if fts is not None:
        fts.close()
    return out


def reference_run(lme_json_path, fts_limit=500, weights="idf080", window="cf", start=None, limit=None):
    """run.cjs (fts_limit 500) / run-m.cjs (fts_limit 2000), with the given weights/window."""
    return _lme(lme_json_path, "fts", fts_limit, weights, window, start, limit)


def reference_exp6(lme_json_path, start=None, limit=None):
    """exp6.cjs / exp6-m.cjs (the inverted index)."""
    return _lme(lme_json_path, "index", None, "idf080", "exp6", start, limit)


# ---------------------------------------------------------------------------
# LoCoMo (LoCoMo conversations)
# ---------------------------------------------------------------------------

_SESSION_KEY = re.compile(r"session_([0-9]+)")


def js_truthy(v):
    if v is None or v is MISSING or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v == v and v != 0
    if isinstance(v, str):
        return v != ""
    return True


def locomo_sessions(conversation, seq_fn):
    keys = [k for k in conversation if _SESSION_KEY.fullmatch(k)]
    keys.sort(key=lambda k: int(_SESSION_KEY.fullmatch(k).group(1)))
    sessions = []
    dia = {}
    for key in keys:
        base = parse_locomo(js_string(conversation.get(key + "_date_time", MISSING)))
        if base is None:
            base = len(sessions) * DAY_MS
        turns = conversation[key] or []
        texts = []
        for turn in turns:
            texts.append(js_string(turn["text"]) if "text" in turn else "")
        session = {"id": key, "events": make_events(texts, base, seq_fn)}
        for turn in turns:
            d = turn.get("dia_id", MISSING)
            if js_truthy(d):
                dia[js_string(d)] = session  # last one wins
        sessions.append(session)
    return sessions, dia


def reference_locomo(locomo_json_path, weights="idf080", window="cf", backend="fts"):
    """locomo.cjs (LoCoMo conversations, the 0.8.0 pipeline): FTS rebuilt once per conversation, LIMIT 500, S-ASCII(p) checks.

    ``backend="index"`` applies the exp6 algorithm (S-EXP6, W-EXP6, exact df) to the same
    sessions and skips.
    """
    with open(locomo_json_path, encoding="utf-8") as f:
        convs = json.load(f)
    seq_fn = seq_ascii if backend == "fts" else seq_exp6
    if backend == "index":
        window = "exp6"
    window_fn = {"cf": window_cf, "plain": window_plain, "exp6": window_exp6}[window]
    fts = Fts(500) if backend == "fts" else None
    out = []
    q_index = 0
    for conv in convs:
        sessions, dia = locomo_sessions(conv["conversation"], seq_fn)
        if fts is not None:
            fts.rebuild(sessions)
        for j, qa in enumerate(conv.get("qa") or []):
            rec = {
                "question_id": f"{js_string(conv.get('sample_id', MISSING))}#{j}",
                "question_type": js_string(qa["category"]) if "category" in qa else "unknown",
                "pool_size": len(sessions),
                "q_index": q_index,
                "status": "skipped",
                "reason": None,
                "rank": 0,
                "final": [],
            }
            q_index += 1
            out.append(rec)
            gold = set()
            for ev in qa.get("evidence") or []:
                s = dia.get(js_string(ev))
                if s is not None:
                    gold.add(s["id"])
            rec["gold_in_pool"] = sum(sess["id"] in gold for sess in sessions)
            if not gold:
                rec["reason"] = "no_gold"
                continue
            if not sessions:
                rec["reason"] = "no_sessions"
                continue
            question = qa["question"]
            win = window_fn(question)
            if not win:
                rec["reason"] = "empty_window"
                continue
            final = rank_one(question, sessions, win, weights, backend, fts, "ascii")
            rec["status"] = "evaluated"
            rec["final"] = final
            rec["rank"] = gold_rank(final, gold)
    if fts is not None:
        fts.close()
    return out
