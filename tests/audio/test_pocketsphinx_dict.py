"""The recognizer's dictionary cut down to the language model's words: vocabulary parsing, filtering, caching."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from toy_runtime.adapters.pocketsphinx_dict import dictionary_for_lm, lm_vocabulary

pocketsphinx = pytest.importorskip("pocketsphinx")
BUNDLED = Path(pocketsphinx.get_model_path()) / "en-us"


def fake_trie_lm(path: Path, words: list[str], junk: bytes = b"\x01\x02\x00\x7f") -> Path:
    """A file in the trie layout: magic, order, counts, opaque n-gram data, then the words' length and words."""
    block = b"".join(w.encode() + b"\0" for w in words)
    path.write_bytes(b"Trie Language Model" + bytes([2]) + struct.pack("<II", len(words), 7) + junk
                     + struct.pack("<I", len(block)) + block)
    return path


def test_the_bundled_language_model_vocabulary():
    vocabulary = lm_vocabulary(BUNDLED / "en-us.lm.bin")
    assert vocabulary is not None and len(vocabulary) == 72_547
    assert {"<s>", "</s>", "weather", "dinosaur", "volume"} <= vocabulary


def test_other_formats_and_damaged_files_give_no_vocabulary(tmp_path):
    assert lm_vocabulary(BUNDLED / "cmudict-en-us.dict") is None  # not a trie LM
    assert lm_vocabulary(fake_trie_lm(tmp_path / "no-sentence-marks.bin", ["a", "b"])) is None
    short = fake_trie_lm(tmp_path / "short.bin", ["<s>", "</s>", "hi"])
    short.write_bytes(short.read_bytes().replace(struct.pack("<I", 3), struct.pack("<I", 400), 1))
    assert lm_vocabulary(short) is None  # claims more words than the file holds
    cut = tmp_path / "cut.bin"
    cut.write_bytes(b"Trie Language Model\x03\x01")
    assert lm_vocabulary(cut) is None  # the header itself is cut short
    unmarked = fake_trie_lm(tmp_path / "unmarked.bin", ["<s>", "</s>", "hi"])
    data = bytearray(unmarked.read_bytes())
    data[-len(b"<s>\0</s>\0hi\0") - 4] ^= 0xFF  # the words' length no longer matches them
    unmarked.write_bytes(bytes(data))
    assert lm_vocabulary(unmarked) is None


def test_filtering_keeps_pronunciation_variants_and_the_cache_follows_its_sources(tmp_path):
    lm = fake_trie_lm(tmp_path / "lm.bin", ["</s>", "<s>", "hello", "read"])
    full = tmp_path / "words.dict"
    full.write_text("hello HH AH L OW\nread R EH D\nread(2) R IY D\nzebra Z IY B R AH\n", encoding="utf-8")
    cache = tmp_path / "cache"
    small = dictionary_for_lm(full, lm, cache)
    assert small is not None and small.parent == cache
    assert small.read_text(encoding="utf-8").splitlines() == ["hello HH AH L OW", "read R EH D", "read(2) R IY D"]
    assert dictionary_for_lm(full, lm, cache) == small  # reused
    full.write_text(full.read_text(encoding="utf-8") + "hello(2) HH EH L OW\n", encoding="utf-8")
    changed = dictionary_for_lm(full, lm, cache)
    assert changed != small and "hello(2) HH EH L OW" in changed.read_text(encoding="utf-8")
    assert os.listdir(cache) == [changed.name]  # the old copy and no temporary file are left


def test_a_cut_short_cache_file_is_rebuilt_not_loaded(tmp_path):
    """A power loss while the first boot writes the cache can leave it empty or cut mid-line: never reuse that."""
    lm = fake_trie_lm(tmp_path / "lm.bin", ["</s>", "<s>", "hello"])
    full = tmp_path / "words.dict"
    full.write_text("hello HH AH L OW\nzebra Z IY B R AH\n", encoding="utf-8")
    cache = tmp_path / "cache"
    small = dictionary_for_lm(full, lm, cache)
    for damage in (b"", b"hello HH A"):
        small.write_bytes(damage)
        rebuilt = dictionary_for_lm(full, lm, cache)
        assert rebuilt == small and rebuilt.read_text(encoding="utf-8") == "hello HH AH L OW\n"


def test_an_unreadable_vocabulary_means_the_full_dictionary(tmp_path):
    full = tmp_path / "words.dict"
    full.write_text("hello HH AH L OW\n", encoding="utf-8")
    assert dictionary_for_lm(full, full, tmp_path / "cache") is None
