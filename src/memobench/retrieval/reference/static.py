"""The static-embedding reference retriever ``wordllama``: WordLlama's
``l2_supercat`` token vectors (256 dimensions, MIT licence), a text's vector
the mean of its tokens' vectors, cosine similarity of the question to each
session document.

Offline by construction. The weights (``weights/l2_supercat_256.safetensors``,
32,000 x 256 float16, 16 MB) and the tokenizer (``tokenizers/
l2_supercat_tokenizer_config.json``, Llama 2's) are files inside the PyPI
wheel ``wordllama==0.4.0.post1``; they are read from the installed package
(found without importing it), their sha256 checked first, and nothing is
fetched at run time. (The package's own ``WordLlama.load()`` looks for the
tokenizer under ``wordllama/tokenizer/``, not the ``tokenizers/`` folder the
wheel ships, and so downloads it from Hugging Face unless given
``cache_dir=<the package folder>``.)

The computation is ``WordLlamaInference.embed`` (``norm=False``), written out
in numpy: the tokenizer's ids without special tokens, no truncation, each
clipped to the vocabulary, their float32 rows summed in token order and
divided by the token count (at least 1, so the empty text is the zero
vector). Equal to the package's vectors bit for bit (tested). The vectors
are stored as they are; ranking takes the cosine in float64 (a zero vector
scores 0), descending, ties by haystack position.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ...catalog.row import Row, register
from ...core.errors import ConfigError
from .modelfiles import checked_files, package_folder
from .ranking import Ranking, rank_embedded

PACKAGE = "wordllama"
VERSION = "0.4.0.post1"
MODEL_ENV = "MEMOBENCH_WORDLLAMA_DIR"  # a folder holding the same two files, instead of the package
WEIGHTS = "weights/l2_supercat_256.safetensors"
TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
SHA256 = {
    WEIGHTS: "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    TOKENIZER: "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
}
DIM = 256
INSTALL_HINT = f"pip install 'memobench[static]', which installs wordllama=={VERSION}"


def model_dir() -> Path:
    """``$MEMOBENCH_WORDLLAMA_DIR``, else the installed package's folder."""
    if os.environ.get(MODEL_ENV):
        return Path(os.environ[MODEL_ENV])
    return package_folder(PACKAGE, "wordllama", INSTALL_HINT)


class WordLlama:
    """WordLlama l2_supercat (256 dimensions) mean-pooled token vectors, on the CPU."""

    name = "wordllama"
    dim = DIM
    device = "cpu"
    # what the embeddings table's metadata records of the model (beside the files' sha256)
    meta = {"model": f"wordllama {VERSION} l2_supercat 256", "pooling": "mean of token vectors, not normalized"}

    def __init__(self, path=None):
        import numpy as np

        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ConfigError(f"wordllama needs the [static] extra: {e} ({INSTALL_HINT})") from None
        self.path = Path(path) if path is not None else model_dir()
        self.sha256 = checked_files(self.path, SHA256, "wordllama", "WordLlama l2_supercat 256", INSTALL_HINT)
        tok = Tokenizer.from_file(str(self.path / TOKENIZER))
        tok.no_padding()
        tok.no_truncation()
        self.tokenizer = tok
        self.embedding = np.ascontiguousarray(load_file(str(self.path / WEIGHTS))["embedding.weight"]
                                              .astype(np.float32))
        if self.embedding.shape[1] != DIM:
            raise ConfigError(f"wordllama: {self.path / WEIGHTS} holds {self.embedding.shape[1]}-wide vectors, "
                              f"not {DIM}")

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def encode(self, texts: Sequence[str], batch: int = 256, on_batch=None) -> np.ndarray:
        """float32 vectors, one row per text in input order: the mean of its
        tokens' rows. Tokenized ``batch`` texts at a time (the tokenizer's
        encodings of a few thousand long sessions take hundreds of MB).
        ``on_batch(n)``: called after each batch with the texts done so far."""
        import numpy as np

        texts = list(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        last = self.embedding.shape[0] - 1
        for lo in range(0, len(texts), batch):
            for i, ids in enumerate(self.token_ids(texts[lo:lo + batch]), lo):
                if ids:
                    rows = self.embedding[np.clip(np.asarray(ids, dtype=np.int64), 0, last)]
                    out[i] = rows.sum(axis=0, dtype=np.float32) / np.float32(len(ids))
            if on_batch is not None:
                on_batch(min(lo + batch, len(texts)))
        return out


_default: WordLlama | None = None


def default_encoder() -> WordLlama:
    global _default
    if _default is None:
        _default = WordLlama()
    return _default


def rank_wordllama(question: str, docs: Sequence[str], vectors: np.ndarray | None = None,
                   encoder: WordLlama | None = None) -> Ranking:
    """Cosine similarity of the question's vector to each document's
    (``vectors``, rows in haystack order, from the embeddings stage's table;
    embedded now when not given), descending, ties by haystack position."""
    return rank_embedded("wordllama", DIM, question, docs, vectors, encoder, default_encoder, cosine=True)


def new_encoder(device: str = "auto", batch_size: int | None = None) -> WordLlama:
    """The embeddings stage's encoder (numpy on the CPU whatever ``device``)."""
    return WordLlama()


register(Row("wordllama", "reference", label="WordLlama l2_supercat 256",
             description="static WordLlama embeddings (l2_supercat, 256 dimensions): the mean of a text's token "
                         "vectors, cosine similarity", module=__name__, rank=rank_wordllama,
             embedding="wordllama_embeddings", encoder=new_encoder,
             default_encoder=default_encoder, turns=True))
