"""The embedded format's reader: the Chinese functional set shipped in the
package (zh_data.py), no file read."""

from __future__ import annotations

from ..store import _Tables


def read_zh(paths: dict, log=print) -> dict:
    """The embedded Chinese functional set (zh_data) into the tables at
    ``paths``: one haystack of ten sessions whose events are the sentence
    pieces, time = seq = k (base 0)."""
    from ..zh_data import QUERIES, SESSIONS, pieces

    tables = _Tables(paths)
    store, questions, haystacks = tables.store, tables.questions, tables.haystacks
    with tables:
        for i, (sid, text) in enumerate(SESSIONS):
            key = store.key(sid, [(p, None, None) for p in pieces(text)])
            haystacks.append(haystack_id=0, position=i, session_key=key, session_id=sid, date=None,
                             base_time=0, date_fallback=False)
        for qi, (query, gold) in enumerate(QUERIES):
            questions.append(q_index=qi, question_id=f"zh#{qi}", question=query, question_type="zh",
                             question_date=None, haystack_id=0, gold=[gold], paired_question_id=None,
                             parse_error=False, answer=None, answer_session_ids=[], question_exact=None,
                             evidence=None)
        tables.close()
    stats = {"questions": len(QUERIES), "sessions": len(store.keys), "events": store.n_events, "haystacks": 1}
    log(f"normalize zh: {stats}")
    return stats
