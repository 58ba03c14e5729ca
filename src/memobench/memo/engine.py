"""The retrieval engine: discovery, representative events, merge and final list.

Two discovery backends, as the original harnesses have them:

* ``FtsBackend``: SQLite FTS5 discovery over ``docs(id, body)`` with one row
  per session in haystack order (docs/harnesses.md#fts5-discovery), computed in memory
  (fts5.py) or asked of a real FTS5 table; the rows are then checked with the
  JS tokens (docs/harnesses.md#candidates-and-the-js-check);
* ``IndexBackend``: the in-memory inverted index of exp6 and the 0.12+ product
  (docs/harnesses.md#the-inverted-index).

Everything that decides a list (tokens, windows, weights, merge order,
tie-breaks, float addition order) follows docs/harnesses.md, from #tokenizers to #merge-and-final-list.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .fts5 import Unicode61
from .tokenize import FTS5_TOKENS
from ..core.jsmath import js_log, utf16_key, utf16_len
from ..core.protocol import DEPTH, TOP
from .recipe import Recipe
from .termids import SEPARATOR, HayEvents, Vocab
from .timewords import date_words, relative_min_time
from .tokenize import SEQ, STOP_LISTS, TERM_MAX, WINDOWS, joined_tokens

REQUEST_LIMIT = TOP  # what the engine asks for and returns: the harness list


# --------------------------------------------------------------------------- sessions


class Corpus:
    """Event texts per session key, tokenized lazily once per tokenizer.

    A session is stored as its FTS body (the event texts joined by "\n", as the
    harnesses index it) plus each event's start offset and code-point length,
    so the text is held once and the body is never rebuilt per question.
    Tokens are held as ids (termids.py): under a JS tokenizer, each event's
    ids followed by a separator (``token_ids``); under FTS5's unicode61, the
    body column's ids (``fts_ids``)."""

    def __init__(self, events: dict[int, tuple[list[str], list[int]]] | None = None):
        self.sessions: dict[int, tuple[str, list[int], list[int]]] = {}
        # key -> the session's FTS5 body token ids (numpy int32): loaded from the
        # tokens stage (retrieval.py), or computed on first use (fts_ids)
        self.fts: dict[int, object] = {}
        self._unicode61: Unicode61 | None = None
        self.fts_vocab = Vocab()  # the ids of the FTS5 tokens (termids.py)
        # (tokenizer, key) -> its events' JS token ids, each event followed by a
        # separator: loaded from the tokens stage, or computed on first use
        self.ids: dict[tuple[str, int], object] = {}
        self.vocabs: dict[str, Vocab] = {}  # tokenizer -> the ids of its tokens
        self._hay: dict[str, tuple[Haystack, HayEvents]] = {}  # tokenizer -> the current haystack's
        for key, (texts, lengths) in (events or {}).items():
            self.add(key, texts, lengths)

    def add(self, key: int, texts: list[str] | None, lengths: list[int]) -> None:
        """``texts`` may be None when the job needs no text: the tokens come
        from the tokens stage (FTS5 tokens included)."""
        if texts is None:
            self.sessions[key] = (None, None, lengths)
            return
        starts, pos = [], 0
        for t in texts:
            starts.append(pos)
            pos += len(t) + 1
        self.sessions[key] = ("\n".join(texts), starts, lengths)

    def __len__(self) -> int:
        return len(self.sessions)

    def texts(self, key: int) -> list[str]:
        body, starts, _ = self.sessions[key]
        ends = [s - 1 for s in starts[1:]] + [len(body)]
        return [body[a:b] for a, b in zip(starts, ends)]

    def n_events(self, key: int) -> int:
        return len(self.sessions[key][2])

    def vocab(self, seq_name: str) -> Vocab:
        v = self.vocabs.get(seq_name)
        if v is None:
            v = self.vocabs[seq_name] = Vocab()
        return v

    def token_ids(self, key: int, seq_name: str):
        """The session's events' token ids under a JS tokenizer, each event
        followed by a separator (``Vocab.encode_events``)."""
        ids = self.ids.get((seq_name, key))
        if ids is None:
            seq = SEQ[seq_name]
            ids = self.ids[(seq_name, key)] = self.vocab(seq_name).encode_events(
                [joined_tokens(t, seq) for t in self.texts(key)])
        return ids

    def event_tokens(self, key: int, seq_name: str) -> list[list[str]]:
        """Each event's tokens under a JS tokenizer."""
        ids = self.token_ids(key, seq_name).tolist()  # first: it may add tokens to the vocabulary
        tokens = self.vocab(seq_name).tokens()
        events, current = [], []
        for i in ids:
            if i == SEPARATOR:
                events.append(current)
                current = []
            else:
                current.append(tokens[i])
        return events

    def hay_events(self, hay: Haystack, seq_name: str) -> HayEvents:
        """The haystack's events under a JS tokenizer (termids.HayEvents), kept
        until another haystack is asked, so the variants ranking a question
        under one tokenizer share it and its phrases' representatives."""
        current = self._hay.get(seq_name)
        if current is None or current[0] is not hay:
            events = HayEvents([self.token_ids(k, seq_name) for k in hay.keys],
                               [self.sessions[k][2] for k in hay.keys], self.vocab(seq_name))
            current = self._hay[seq_name] = (hay, events)
        return current[1]

    def body(self, key: int) -> str:
        return self.sessions[key][0]

    def fts_ids(self, key: int):
        """The session's FTS5 body column as token ids (``fts_vocab``): its
        events' unicode61 tokens in order (the harnesses join the event texts
        with "\n", a separator). From the tokens stage's ``fts5`` table when
        loaded, else tokenized here."""
        ids = self.fts.get(key)
        if ids is None:
            if self._unicode61 is None:
                self._unicode61 = Unicode61()
            joined = "".join(self._unicode61.joined(t) for t in self.texts(key))
            ids = self.fts[key] = self.fts_vocab.encode(joined)
        return ids

    def drop(self, keys, texts: bool = False) -> None:
        """Forget the tokenizations (and with ``texts`` the sessions themselves)
        that no later question needs."""
        for k in keys:
            if texts:
                self.sessions.pop(k, None)
            self.fts.pop(k, None)
            for name in SEQ:
                self.ids.pop((name, k), None)


@dataclass
class Haystack:
    """The sessions one question searches, in haystack order."""

    ids: list[str]
    keys: list[int]
    bases: list[int]

    def __post_init__(self):
        # Duplicate ids resolve to the last session, as the harnesses' id map does.
        self.by_id = {sid: i for i, sid in enumerate(self.ids)}
        self.id_keys = [utf16_key(s) for s in self.ids]
        # Where an id repeats, the position that stands for every entry with that
        # id once a list is keyed by id (the last one, as ``by_id``); None when
        # every id is unique.
        self.id_pos = None if len(self.by_id) == len(self.ids) else [self.by_id[s] for s in self.ids]

    def n_sessions(self, mode: str) -> int:
        return len(set(self.ids)) if mode == "distinct" else len(self.ids)


# --------------------------------------------------------------------------- backends


def fts_quote(phrase: str) -> str:
    return '"' + phrase.replace('"', '""') + '"'


class FtsBackend:
    """SQLite FTS5 discovery (docs/harnesses.md#fts5-discovery): the harnesses' ``fts5(id, body)``
    with one row per session in haystack order, asked ``MATCH '"phrase"'
    ORDER BY rowid LIMIT n``.

    With ``matcher`` (an ``fts5.PhraseMatcher``, as the workflow runs it) the
    rows are computed in memory from the sessions' unicode61 tokens, and
    variants sharing the matcher share them. Without it, a real contentless
    FTS5 table is rebuilt per haystack, as the harnesses do (the tests' oracle).
    Either way a row is a haystack position, so the id of a row comes from the
    haystack."""

    def __init__(self, corpus: Corpus, limit: int, matcher=None):
        self.corpus = corpus
        self.limit = limit
        self.matcher = matcher
        self.db = None
        if matcher is None:
            self.db = sqlite3.connect(":memory:")
            self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(id, body, content='')")
        self.current = None
        self._rows: dict[str, list[int]] = {}

    def load(self, hay: Haystack, hay_token) -> None:
        if self.matcher is not None:
            # the matcher, shared between variants, knows which haystack it holds
            # (another variant's may have come in between this one's questions)
            if self.matcher.current != hay_token:
                self.matcher.load(hay_token, hay.ids, [self.corpus.fts_ids(k) for k in hay.keys])
            return
        if self.current == hay_token:
            return
        self.db.execute("INSERT INTO docs(docs) VALUES('delete-all')")
        self.db.executemany(
            "INSERT INTO docs(rowid, id, body) VALUES (?, ?, ?)",
            ((n, sid, self.corpus.body(key)) for n, (sid, key) in enumerate(zip(hay.ids, hay.keys), 1)),
        )
        self.current = hay_token
        self._rows = {}

    def rows(self, phrase: str) -> list[int]:
        """Haystack positions of the matching rows, in rowid order, at most LIMIT."""
        if self.matcher is not None:
            return self.matcher.rows(phrase, self.limit)  # remembered there per haystack
        rows = self._rows.get(phrase)
        if rows is None:
            try:
                rows = [
                    r[0] - 1
                    for r in self.db.execute(
                        "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rowid LIMIT ?",
                        (fts_quote(phrase), self.limit),
                    )
                ]
            except sqlite3.Error:
                rows = []  # the harnesses catch every FTS error as "no rows"
            self._rows[phrase] = rows
        return rows

    def positions(self, hay: Haystack, phrase: str, check: tuple, seq_name: str) -> list[int]:
        # A row resolves through its id to the last session with that id.
        rows = self.rows(phrase)
        return rows if hay.id_pos is None else [hay.id_pos[p] for p in rows]

    def df(self, hay: Haystack, token: str, seq_name: str) -> int:
        return len(self.rows(token))


class IndexBackend:
    """The in-memory inverted index of exp6 / index.js (docs/harnesses.md#the-inverted-index): the
    sessions holding a term, in haystack order, looked up once per term."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        self.current = None
        self._postings: dict[str, list[int]] = {}

    def load(self, hay: Haystack, hay_token) -> None:
        if self.current != hay_token:
            self.current = hay_token
            self._postings = {}

    def _holding(self, hay: Haystack, term: str, seq_name: str) -> list[int]:
        found = self._postings.get(term)
        if found is None:
            found = self._postings[term] = list(self.corpus.hay_events(hay, seq_name).reps((term,)))
        return found

    def positions(self, hay: Haystack, phrase: str, check: tuple, seq_name: str) -> list[int]:
        # Only sessions holding the phrase's first token can match it.
        return self._holding(hay, check[0], seq_name) if check else []

    def df(self, hay: Haystack, token: str, seq_name: str) -> int:
        return len({hay.ids[i] for i in self._holding(hay, token, seq_name)})


# --------------------------------------------------------------------------- recipe


# Recipe lives in the registry (recipe.py), which declares each field once.


IDF_CAP = 50


class Scorer:
    """Per-question idf cache (df from the backend, N from the haystack)."""

    def __init__(self, backend, hay: Haystack, recipe: Recipe):
        self.backend, self.hay, self.recipe = backend, hay, recipe
        self.n = hay.n_sessions(recipe.n_mode)
        self._idf: dict[tuple[str, bool], float] = {}

    def idf(self, token: str, capped: bool = True) -> float:
        key = (token, capped)
        v = self._idf.get(key)
        if v is None:
            df = self.backend.df(self.hay, token, self.recipe.seq)
            if capped:
                df = min(df, IDF_CAP)
            v = self._idf[key] = js_log((self.n + 1) / (1 + df))
        return v


def _len_w(kind, text, parts, sc):
    return utf16_len(text)


def _idf080_w(kind, text, parts, sc):
    if kind == "token":
        return 4 * sc.idf(text)
    return utf16_len(text) * max(sc.idf(parts[0]), sc.idf(parts[1]))


def _one_w(kind, text, parts, sc):
    return 1


def _v3_w(kind, text, parts, sc):
    return 1 if kind == "token" else 2


def _v5_w(kind, text, parts, sc):
    return utf16_len(text) if kind == "token" else 2 * utf16_len(text)


def _token_or_len(token_weight):
    """exp4 idf variants: tokens weigh by idf, pairs (and stems) by length only."""

    def w(kind, text, parts, sc):
        return token_weight(text, sc) if kind == "token" else utf16_len(text)

    return w


WEIGHTS = {
    "len": _len_w,  # 0.4.x/0.5.0/0.7.x length weights
    "idf080": _idf080_w,  # 0.8.0 df-proxy IDF (shipped)
    "one": _one_w,  # exp V0/V1/V4
    "v3": _v3_w,  # exp V3: tokens 1, pairs 2
    "v5": _v5_w,  # exp2 V5: len(t), 2*len(pair)
    "idfO4": _token_or_len(lambda t, sc: 4 * sc.idf(t, capped=False)),  # exp4 C-idfOracle
    "idfP4": _token_or_len(lambda t, sc: 4 * sc.idf(t)),  # exp4 C-idfProxy
    "lenIdfO": _token_or_len(lambda t, sc: utf16_len(t) * sc.idf(t, capped=False)),  # exp4 C-lenIdf
    "lenIdfP": _token_or_len(lambda t, sc: utf16_len(t) * sc.idf(t)),  # exp4-m lenIdfProxy
}


# --------------------------------------------------------------------------- ranking


class Ranker:
    """Ranks one question's haystack under one recipe."""

    def __init__(self, corpus: Corpus, recipe: Recipe, matcher=None, shared: dict | None = None):
        self.corpus = corpus
        self.recipe = recipe
        if recipe.backend == "fts":
            self.backend = FtsBackend(corpus, recipe.fts_limit, matcher)
            backend_key = ("fts", recipe.fts_limit)
        elif recipe.backend == "index":
            self.backend = IndexBackend(corpus)
            backend_key = ("index",)
        else:
            raise ValueError(f"unknown backend {recipe.backend!r}")
        self.seq = SEQ[recipe.seq]
        # What a candidate list depends on besides the haystack, the phrase, its
        # kind's check mode and min_time: rankers with the same key get the same lists.
        self._list_key = (recipe.seq, backend_key)
        # {key: candidates} of the current question, shared by the rankers of a
        # pass over one corpus (run_segments clears it between questions); None: not shared
        self.shared = shared

    def check_tokens(self, phrase: str, kind: str) -> tuple:
        r = self.recipe
        mode = r.question_check if kind == "question" else r.token_check
        if mode == "raw_split" or mode == "split":
            parts = tuple(phrase.split(" "))
            # A piece that is empty or holds other whitespace can never equal an
            # event token, so such a phrase never matches (the empty tuple). Left
            # in, an empty piece would build the pattern "  ", which matches events
            # with no tokens at all.
            if any(len(p.split()) != 1 or p.split()[0] != p for p in parts):
                return ()
            return parts
        return tuple(self.seq(phrase))

    def candidates(self, hay: Haystack, phrase: str, kind: str, min_time: int | None = None) -> list[tuple]:
        """The phrase's candidates in backend order: (session position, rep time).

        ``min_time`` (exp3 T2h): a session is dropped unless some event has
        time >= min_time; its representative is still chosen among all events.

        Every list is keyed by session id, as the harnesses' maps are: a
        candidate's position is that of the last session with its id
        (``Haystack.id_pos``). Under FTS a row already resolves to that session
        (docs/harnesses.md#candidates-and-the-js-check); under the index each entry of a repeated id is a candidate with
        its own representative (docs/harnesses.md#the-inverted-index), so one id can fill two places of a list,
        and the merge adds its weight once per place (docs/edge-cases.md,
        "Repeated session ids")."""
        shared = self.shared
        if shared is not None:
            mode = self.recipe.question_check if kind == "question" else self.recipe.token_check
            key = (self._list_key, mode, phrase, min_time)
            found = shared.get(key)
            if found is None:
                found = shared[key] = self._candidates(hay, phrase, kind, min_time)
            return found
        return self._candidates(hay, phrase, kind, min_time)

    def _candidates(self, hay: Haystack, phrase: str, kind: str, min_time: int | None) -> list[tuple]:
        check = self.check_tokens(phrase, kind)
        seq_name = self.recipe.seq
        reps = self.corpus.hay_events(hay, seq_name).reps(check)
        if not reps:
            return []
        found = []
        for i in self.backend.positions(hay, phrase, check, seq_name):
            rep = reps.get(i)
            if rep is None:
                continue
            if min_time is not None:
                n_events = self.corpus.n_events(hay.keys[i])
                if not n_events or hay.bases[i] + n_events - 1 < min_time:
                    continue
            occ, length, k = rep
            found.append((-occ, length, -(hay.bases[i] + k), hay.id_keys[i], -k, i))
        found.sort(key=lambda c: c[:5])
        if hay.id_pos is not None:
            return [(hay.id_pos[c[5]], -c[2]) for c in found]
        return [(c[5], -c[2]) for c in found]

    def window(self, question: str) -> list[str]:
        window = self.recipe.window_tokens(question)
        if self.recipe.date_words:
            # exp3 T1: appended without de-duplication, so a date word already in
            # the window is queried (and weighted) twice.
            window = (window + date_words(question))[:TERM_MAX]
        return window

    def rank(self, hay: Haystack, hay_token, question: str, question_date: str | None = None) -> dict:
        """Returns the final list of session ids, its deep continuation
        (``deep``, see ``deep_list``), plus the parts (P, window, T)."""
        r = self.recipe
        self.backend.load(hay, hay_token)
        window = self.window(question)
        if r.time_filter:
            min_time = relative_min_time(question, question_date)
            hard = self._rank_once(hay, question, window, min_time)
            if r.time_filter == "hard":
                return hard
            plain = self._rank_once(hay, question, window, None)
            final = merge_final(hard["final"], plain["final"])
            # exp3 T2m continued: the T2h deep list, then the plain deep list.
            return {**plain, "final": final, "deep": deep_list(final, hard["deep"] + plain["deep"])}
        return self._rank_once(hay, question, window, None)

    def _rank_once(self, hay: Haystack, question: str, window: list[str], min_time) -> dict:
        r = self.recipe
        phrase_list = self.candidates(hay, question, "question", min_time)[:REQUEST_LIMIT]
        p_ids = [hay.ids[i] for i, _ in phrase_list]
        counts: dict[int, float] = {}
        rep_time: dict[int, int] = {}
        if len(window) >= 2:
            counts, rep_time = self.weighted(hay, window, min_time)
        order = sorted(counts, key=lambda i: (-counts[i], -rep_time[i]))
        t_all = [hay.ids[i] for i in order]
        t_ids = t_all[:REQUEST_LIMIT]
        if r.final == "bonus":
            pool = bonus_pool(hay, phrase_list, counts, rep_time, r.bonus)
            final, continued = pool[:REQUEST_LIMIT], pool
        else:
            final = merge_final(p_ids, t_ids, r.final)
            if r.final == "drop_p":
                p_set = set(p_ids)
                continued = [s for s in t_all if s not in p_set]
            else:
                continued = p_ids + t_all
        return {"final": final, "deep": deep_list(final, continued), "phrase": p_ids, "window": window,
                "weighted": t_ids}

    def phrases(self, window: list[str]) -> list[tuple[str, str, tuple]]:
        out = [("token", t, (t,)) for t in window]
        if self.recipe.pairs:
            out += [("pair", f"{a} {b}", (a, b)) for a, b in zip(window, window[1:])]
        if self.recipe.stems:
            out += stem_phrases(window, out, dedupe=self.recipe.stems == "s2")
        return out

    def weighted(self, hay: Haystack, window: list[str], min_time=None) -> tuple[dict, dict]:
        """The token/pair merge (docs/harnesses.md#merge-and-final-list): scores and first-list representative times,
        keyed by session position, in first-appearance order."""
        r = self.recipe
        weight = WEIGHTS[r.weights]
        sc = Scorer(self.backend, hay, r)
        counts: dict[int, float] = {}
        rep_time: dict[int, int] = {}
        phrases = self.phrases(window)
        if r.v1_first_list_only:
            phrases = phrases[:1]
        for kind, text, parts in phrases:
            w = weight(kind, text, parts, sc)
            for i, t in self.candidates(hay, text, kind, min_time)[: r.page]:
                if i in counts:
                    counts[i] += w
                else:
                    counts[i] = w
                    rep_time[i] = t
        return counts, rep_time


def stem_phrases(window: list[str], earlier: list[tuple], dedupe: bool) -> list[tuple]:
    """exp5 stem phrases: stem(t) for every window token, UTF-16 length >= 2.
    S1 keeps them all (a stem equal to its token is queried twice); S2 skips a
    stem equal to any token or pair string or an earlier stem."""
    from .stemmer import stem

    seen = {text for _, text, _ in earlier}
    out = []
    for t in window:
        st = stem(t)
        if utf16_len(st) < 2:
            continue
        if dedupe:
            if st in seen:
                continue
            seen.add(st)
        out.append(("stem", st, (st,)))
    return out


def bonus_pool(hay: Haystack, phrase_list, counts: dict, rep_time: dict, bonus: int) -> list[str]:
    """exp4 phrase-order loosening, uncut: P entries score bonus + (10 - index)
    and compete with the weighted scores in one pool (max of the two)."""
    pool: dict[int, list] = {}
    for idx, (i, t) in enumerate(phrase_list):
        # A repeated entry (duplicate ids) overwrites in place, as a JS Map.set does.
        pool[i] = [bonus + (REQUEST_LIMIT - idx), t]
    for i, c in counts.items():
        if i in pool:
            pool[i][0] = max(pool[i][0], c)
        else:
            pool[i] = [c, rep_time[i]]
    order = sorted(pool, key=lambda i: (-pool[i][0], -pool[i][1]))
    return [hay.ids[i] for i in order]


def deep_list(final: list[str], continued: list[str], depth: int = DEPTH) -> list[str]:
    """A question's ranking to depth 50 (docs/protocol.md#deep-lists-and-exports): the harness's
    list, then the same ordering continued.

    What "continued" means: every list the harness uses to *score* keeps its
    harness size (P is the phrase step's first REQUEST_LIMIT = 10 candidates,
    each token/pair/stem list its page of 10 or 20), so no score and no tie
    changes; only the final cut at 10 moves to 50, applied to the uncut
    orderings, as analyze.cjs does for its near-miss rank (docs/harnesses.md#analyzecjs):

    * ``prepend`` (run, locomo, exp3-5, exp6, ...): P, then all of T (every
      session in ``counts``, by score then representative time), de-duplicated;
    * ``drop_p`` (exp, exp2): all of T minus every session of P;
    * ``bonus`` (exp4 B-bonus*): the whole pool, sorted as the harness sorts it;
    * ``dual`` (exp3 T2m): the T2h deep list, then the plain (V6) deep list,
      de-duplicated; ``hard`` (T2h): its own deep list.

    ``continued`` is that uncut ordering; the deep list is ``final`` followed by
    its entries not already listed, cut to ``depth``. Ranks 1-10 are therefore
    ``final`` itself by construction. When ``final`` is shorter than 10 the
    deep list is ``final`` alone: more entries would take ranks the harness
    leaves empty (only drop_p gets there with candidates left, when P removes
    entries of T's first 10, or where duplicate ids inside one haystack fill
    some of them; otherwise no candidate is left), and the top-10 metrics of
    the deep list must equal the harness's.
    Sessions that are no candidate of any list are never ranked, so a list can
    stop short of 50."""
    if len(final) < REQUEST_LIMIT:
        return list(final)
    out = list(final)
    seen = set(out)
    for s in continued:
        if len(out) >= depth:
            break
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def merge_final(p_ids: list[str], t_ids: list[str], mode: str = "prepend", cut: int | None = REQUEST_LIMIT) -> list[str]:
    """P then T de-duplicated (docs/harnesses.md#merge-and-final-list); ``drop_p`` is exp/exp2's T minus P."""
    if mode == "drop_p":
        seen = set(p_ids)
        return [s for s in t_ids if s not in seen][:cut]
    out, seen = [], set()
    for s in p_ids + t_ids:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out[:cut]
