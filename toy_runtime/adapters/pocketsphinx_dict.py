"""The pronunciation dictionary cut down to the words the language model can say.

PocketSphinx's en-us model ships a 134,860-entry CMU dictionary with a 72,547-word language model; the n-gram
search can only ever produce language-model words, but the decoder still loads (and keeps) every dictionary
entry. Loading only the entries of language-model words gives the same recognizer with 79,426 entries: about
0.08 s faster to load and 13 MB smaller (measured on the en-us model).

The vocabulary is read from the binary trie LM itself (`lm_vocabulary`); the filtered copy is written once into
a cache directory and reused while neither source file changes.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Iterable, TextIO

__all__ = ["lm_vocabulary", "dictionary_for_lm"]

_TRIE_MAGIC = b"Trie Language Model"


def lm_vocabulary(lm_path: str | Path) -> frozenset[str] | None:
    """The words of a trie-format binary LM (PocketSphinx's `.lm.bin`), or None for any other format.

    The format starts with the magic text, the model order (one byte) and one little-endian uint32 count per
    order; the file ends with the unigram words, NUL-terminated, in order, preceded by their total length in
    bytes (uint32). Both counts are checked, so a file in another layout gives None rather than wrong words.
    """
    with open(lm_path, "rb") as f:
        header = f.read(len(_TRIE_MAGIC) + 1 + 4 * 8)
        if not header.startswith(_TRIE_MAGIC) or len(header) < len(_TRIE_MAGIC) + 1 + 4:
            return None
        order = header[len(_TRIE_MAGIC)]
        if not 1 <= order <= 8:
            return None
        (unigrams,) = struct.unpack_from("<I", header, len(_TRIE_MAGIC) + 1)
        size = os.fstat(f.fileno()).st_size
        tail_bytes = min(size, 32 * 1024)
        while True:
            f.seek(size - tail_bytes)
            pieces = f.read(tail_bytes).split(b"\0")
            # the tail ends with a NUL: the last piece is empty; the first may be cut (or not a word at all)
            if len(pieces) - 2 >= unigrams or tail_bytes == size:
                break
            tail_bytes = min(size, tail_bytes * 4)
        words = pieces[-1 - unigrams:-1]
        block = sum(len(w) + 1 for w in words)
        if len(words) != unigrams or block + 4 > size:
            return None
        f.seek(size - block - 4)
        if struct.unpack("<I", f.read(4))[0] != block:
            return None
    try:
        vocabulary = frozenset(w.decode("utf-8") for w in words)
    except UnicodeDecodeError:
        return None
    if "<s>" not in vocabulary or "</s>" not in vocabulary or any(not w or w.isspace() for w in vocabulary):
        return None  # not the layout we know: better the full dictionary than a wrong one
    return vocabulary


def _entries_for(lines: Iterable[str], vocabulary: frozenset[str]) -> Iterable[str]:
    for line in lines:
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        base = word.split("(", 1)[0] if word.endswith(")") else word  # "read(2)" is a variant of "read"
        if base in vocabulary:
            yield line


def dictionary_for_lm(dict_path: str | Path, lm_path: str | Path, cache_dir: str | Path) -> Path | None:
    """A copy of `dict_path` holding only the words of `lm_path`, cached in `cache_dir`; None when the LM's
    vocabulary cannot be read (use the full dictionary then).

    The cached file's name carries a digest of both sources and the file's own size, so a changed model gets a
    new file and a cut-short one (a power loss on the first boot) is rebuilt instead of loading as an empty
    vocabulary. Older copies for the same dictionary are removed.
    """
    dict_path, lm_path, cache_dir = Path(dict_path), Path(lm_path), Path(cache_dir)
    key = hashlib.sha256()
    source: Path | TextIO
    for source in (dict_path, lm_path):
        st = source.stat()
        key.update(f"{source.resolve()}:{st.st_size}:{st.st_mtime_ns};".encode())
    prefix = f"{dict_path.stem}.lm-{key.hexdigest()[:16]}-"
    if cache_dir.is_dir():
        for candidate in cache_dir.glob(f"{prefix}*.dict"):
            size = candidate.name[len(prefix):-len(".dict")]
            if size.isdigit() and int(size) > 0 and candidate.stat().st_size == int(size):
                return candidate
    vocabulary = lm_vocabulary(lm_path)
    if vocabulary is None:
        return None
    with open(dict_path, encoding="utf-8") as source:
        data = "".join(_entries_for(source, vocabulary)).encode("utf-8")
    if not data:
        return None
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached = cache_dir / f"{prefix}{len(data)}.dict"
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
    try:
        with open(partial, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, cached)  # atomic: a reader never sees half a dictionary
        _fsync_dir(cache_dir)
    finally:
        partial.unlink(missing_ok=True)
    for old in cache_dir.glob(f"{dict_path.stem}.lm-*.dict"):
        if old != cached:
            old.unlink(missing_ok=True)
    return cached


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory; the file itself is synced
    finally:
        os.close(fd)
