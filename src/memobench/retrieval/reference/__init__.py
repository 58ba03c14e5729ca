"""Reference retrievers run under the benchmark's protocol
(docs/protocol.md#reference-retrievers): LongMemEval's flat BM25 (``bm25-official``), the bm25s
library (``bm25s``), SQLite FTS5's ``bm25()`` (``fts5-bm25``), the dense
all-MiniLM-L6-v2 (``minilm``, optional extra ``[dense]``) and WordLlama's static
token vectors (``wordllama``, optional extra ``[static]``).

A retriever ranks one question's haystack (:mod:`.ranking`)::

    ranking = rank("bm25-official", question_text, docs)       # docs in haystack order
    ranking.positions[:50], ranking.scores[:50]

and for ``minilm`` and ``wordllama`` the documents' vectors come from the cached
embedding stage (:func:`memobench.retrieval.reference.embeddings.embed_sessions`)::

    ranking = rank("minilm", question_text, docs, vectors=doc_vectors)

Documents are built by :mod:`memobench.retrieval.documents`. This file
imports nothing: a package's __init__ is in each of its modules' code
fingerprints, so an import here would rerun the embeddings jobs after a
BM25 edit.
"""

