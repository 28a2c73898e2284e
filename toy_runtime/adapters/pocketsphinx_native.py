"""pocketsphinx's decoder through its C API, so that decoding lets go of the interpreter lock.

The `pocketsphinx` package's own `Decoder` (Cython) holds the GIL for as long as the C code runs: 1-7.5 ms for each
10 ms of speech, and 12-40 ms when an utterance is finished (measured on this project's phrases). Everything else in
the process waits meanwhile: the event loop and the PortAudio callbacks, whose late blocks are heard as underruns.
The same library, called through ctypes (which releases the GIL around every foreign call), decodes while the rest
of the runtime goes on. The functions are the ones the package's extension module exports; its Python `Config`
still resolves the options and the default model, exactly as `Decoder(**options)` does.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from typing import Any

__all__ = ["NativeDecoder"]


@functools.cache
def _library() -> ctypes.CDLL:
    """The extension module of the installed `pocketsphinx` package, with the C API's signatures declared."""
    import pocketsphinx

    found = glob.glob(os.path.join(os.path.dirname(pocketsphinx.__file__), "_pocketsphinx*.so"))
    if not found:
        raise OSError(f"no _pocketsphinx extension module in {os.path.dirname(pocketsphinx.__file__)}")
    lib = ctypes.CDLL(found[0])  # the module Python already loaded: the same copy of the library
    p = ctypes.c_void_p
    for name, restype, argtypes in (
        ("ps_config_parse_json", p, [p, ctypes.c_char_p]),
        ("ps_config_free", ctypes.c_int, [p]),
        ("ps_init", p, [p]),
        ("ps_free", ctypes.c_int, [p]),
        ("ps_start_utt", ctypes.c_int, [p]),
        ("ps_process_raw", ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
        ("ps_end_utt", ctypes.c_int, [p]),
        ("ps_get_hyp", ctypes.c_char_p, [p, ctypes.POINTER(ctypes.c_int32)]),
        ("ps_add_jsgf_string", ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_char_p]),
        ("ps_activate_search", ctypes.c_int, [p, ctypes.c_char_p]),
    ):
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


class NativeDecoder:
    """The calls of `pocketsphinx.Decoder` the recognizer makes, each one without the GIL.

    `options` are `Decoder()`'s keyword options. Raises RuntimeError (as `Decoder` does) when the model cannot be
    loaded or a call fails; not thread-safe (one utterance at a time, as the recognizer uses it).
    """

    def __init__(self, **options: Any) -> None:
        from pocketsphinx import Config

        self.config = Config(**options)  # fills in the model inside the wheel, as Decoder() does
        lib = self._lib = _library()
        c_config = lib.ps_config_parse_json(None, self.config.dumps().encode())
        if not c_config:
            raise RuntimeError("pocketsphinx did not accept its configuration")
        try:
            self._ps = lib.ps_init(c_config)
        finally:
            lib.ps_config_free(c_config)  # the decoder keeps its own reference
        if not self._ps:
            raise RuntimeError("Failed to initialize PocketSphinx")

    def _check(self, status: int, what: str) -> None:
        if status < 0:
            raise RuntimeError(f"pocketsphinx failed to {what}")

    def start_utt(self) -> None:
        self._check(self._lib.ps_start_utt(self._ps), "start an utterance")

    def process_raw(self, pcm: bytes, no_search: bool = False, full_utt: bool = False) -> None:
        """Decode signed 16-bit mono samples at the configured rate."""
        self._check(self._lib.ps_process_raw(self._ps, pcm, len(pcm) // 2, int(no_search), int(full_utt)),
                    f"process {len(pcm) // 2} samples")

    def end_utt(self) -> None:
        self._check(self._lib.ps_end_utt(self._ps), "finish the utterance")

    def hyp(self) -> str | None:
        """The best hypothesis so far (after end_utt: the final one), None when there is none."""
        score = ctypes.c_int32()
        text = self._lib.ps_get_hyp(self._ps, ctypes.byref(score))
        return None if text is None else text.decode("utf-8")

    def add_jsgf_string(self, name: str, jsgf: str) -> None:
        self._check(self._lib.ps_add_jsgf_string(self._ps, name.encode(), jsgf.encode()), "parse the grammar")

    def activate_search(self, name: str) -> None:
        self._check(self._lib.ps_activate_search(self._ps, name.encode()), f"activate search {name!r}")

    def close(self) -> None:
        """Free the decoder (also done when it is collected)."""
        ps, self._ps = getattr(self, "_ps", None), None  # None too when __init__ failed before ps_init
        if ps:
            self._lib.ps_free(ps)

    __del__ = close
