"""The static-embedding reference retriever ``wordllama`` and its embeddings
table. Needs the ``[static]`` extra (the wordllama wheel, whose weights it
reads); skipped without it. Its vectors are held against the package's own
``WordLlamaInference.embed``, bit for bit."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.helpers import REPO, tiny_normalized
from memobench.core.errors import ConfigError
from memobench.datasets.normalize import normalize_longmemeval

static = pytest.importorskip("memobench.retrieval.reference.static")
if importlib.util.find_spec("wordllama") is None:
    pytest.skip("wordllama needs the [static] extra", allow_module_level=True)

TEXTS = ["", "hello world", " leading space", "The quick brown fox. " * 300, "¿Dónde está 東京? café naïve",
         "𠀀𠀁 astral", "a", "tab\tand\nnewline", "K\u212a Kelvin and \u0130stanbul"]


@pytest.fixture(scope="module")
def model():
    return static.WordLlama()


@pytest.fixture(scope="module")
def package_model():
    """The package's own loader, from its installed folder, with downloads off
    (its load() looks for the tokenizer under tokenizer/, which the wheel
    does not have: the cache_dir lookup finds tokenizers/)."""
    from wordllama import WordLlama

    folder = static.model_dir()
    return WordLlama.load(cache_dir=folder, disable_download=True)


def test_vectors_are_the_packages_bit_for_bit(model, package_model):
    got = model.encode(TEXTS)
    assert got.shape == (len(TEXTS), 256) and got.dtype == np.float32
    assert np.array_equal(got, package_model.embed(TEXTS))
    assert np.array_equal(got, np.stack([package_model.embed(t)[0] for t in TEXTS]))
    assert not got[0].any()  # the empty text: no token, the zero vector


def test_ranking_is_the_cosine_of_the_packages_vectors(model, package_model):
    from memobench.retrieval.reference.ranking import rank

    docs = TEXTS[1:] + [TEXTS[1]]  # a repeated document ties: haystack order
    r = rank("wordllama", "where is Tokyo?", docs, encoder=model)
    d = package_model.embed(docs).astype(np.float64)
    q = package_model.embed("where is Tokyo?")[0].astype(np.float64)
    cos = d @ q / (np.linalg.norm(d, axis=1) * np.linalg.norm(q))
    assert r.positions.tolist() == np.argsort(-cos, kind="stable").tolist()
    assert np.allclose(r.scores, cos[r.positions], atol=1e-12)
    assert r.positions.tolist().index(0) < r.positions.tolist().index(len(docs) - 1)
    # the package's own float32 cosine agrees on the scores
    assert np.allclose(r.scores, package_model.vector_similarity(q, d)[0][r.positions], atol=1e-6)


def test_files_are_pinned_and_foreign_ones_refused(model, tmp_path):
    assert model.sha256 == static.SHA256
    for name in static.SHA256:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(model.path / name, tmp_path / name)
    assert static.WordLlama(path=tmp_path).sha256 == static.SHA256
    with open(tmp_path / static.TOKENIZER, "a") as f:
        f.write(" ")
    with pytest.raises(ConfigError, match=r"wordllama: .*l2_supercat_tokenizer_config.json has sha256 \w+, expected"):
        static.WordLlama(path=tmp_path)
    (tmp_path / static.WEIGHTS).unlink()
    with pytest.raises(ConfigError, match=r"l2_supercat_256.safetensors is missing \(pip install 'memobench\[static\]'"):
        static.WordLlama(path=tmp_path)


def test_embeddings_table_and_cached_ranking(model, tmp_path):
    from memobench.retrieval.reference.ranking import rank
    from memobench.retrieval.documents import haystack_documents
    from memobench.retrieval.reference.embeddings import SessionVectors, embed_sessions, read_meta

    norm = tiny_normalized(tmp_path)
    out = tmp_path / "wordllama.parquet"
    stats = embed_sessions(norm / "events.parquet", "longmemeval", out, log=lambda m: None, model="wordllama",
                           chunk_sessions=7, sessions_path=norm / "sessions.parquet")
    t = pq.read_table(out)
    assert stats["sessions"] == t.num_rows == pq.read_metadata(norm / "sessions.parquet").num_rows
    assert t.schema.field("vector").type.list_size == 256
    meta = read_meta(out)
    assert meta["sha256"] == static.SHA256 and meta["documents"] == "user turns" and meta["device"] == "cpu"
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet", "longmemeval")
    q = pq.read_table(norm / "questions.parquet").to_pylist()
    vecs = SessionVectors(out, keys=hays[0].keys).vectors(hays[0].keys)
    assert np.array_equal(vecs, model.encode(hays[0].docs))
    cached = rank("wordllama", q[0]["question"], hays[0].docs, vectors=vecs, encoder=model)
    fresh = rank("wordllama", q[0]["question"], hays[0].docs, encoder=model)
    assert cached.positions.tolist() == fresh.positions.tolist()
    assert np.array_equal(cached.scores, fresh.scores)
    again = tmp_path / "again.parquet"
    embed_sessions(norm / "events.parquet", "longmemeval", again, log=lambda m: None, model="wordllama",
                   chunk_sessions=3, sessions_path=norm / "sessions.parquet")
    assert pq.read_table(again).equals(t)


def test_a_table_of_the_other_model_is_refused(tmp_path):
    """A retrieve job checks the table's files against its model's: minilm's
    vectors (or a stale wordllama table) are not read as wordllama's."""
    from memobench.retrieval import sharing as retrievers
    from memobench.catalog import variants
    from memobench.retrieval.reference.embeddings import embed_sessions
    from memobench.core.errors import DataError

    normalize_longmemeval(REPO / ".test/data/lme_tiny.json", tmp_path, log=lambda m: None)
    table = tmp_path / "wordllama.parquet"
    embed_sessions(tmp_path / "events.parquet", "longmemeval", table, log=lambda m: None, model="wordllama",
                   sessions_path=tmp_path / "sessions.parquet")
    t = pq.read_table(table)
    meta = json.loads(t.schema.metadata[b"memobench"])
    meta["sha256"] = {"model.safetensors": "0" * 64}
    pq.write_table(t.replace_schema_metadata({"memobench": json.dumps(meta)}), tmp_path / "foreign.parquet")
    v = variants.resolve("wordllama", "s")
    outs = {"wordllama": {k: tmp_path / f"out.{k}.parquet" for k in ("rankings", "outcomes", "deep")}}
    args = (tmp_path / "questions.parquet", tmp_path / "haystacks.parquet", tmp_path / "events.parquet", 1, 1, outs)
    retrievers.write_segments([v], *args, log=lambda m: None, inputs={"wordllama_embeddings": table})
    assert pq.read_table(outs["wordllama"]["deep"]).num_rows > 0
    with pytest.raises(DataError, match="was made with other model files"):
        retrievers.write_segments([v], *args, log=lambda m: None,
                                  inputs={"wordllama_embeddings": tmp_path / "foreign.parquet"})
