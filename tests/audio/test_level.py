"""Frame levels for the endpointer: RMS in dBFS from every other sample, without numpy."""

from __future__ import annotations

import math
from array import array

import pytest

from toy_runtime.audio.level import SILENCE_DB, level_db
from toy_runtime.fakes.audio import silence, tone


def test_a_full_scale_square_wave_is_0_dbfs_and_silence_is_the_floor():
    square = array("h", [32767, -32768] * 160).tobytes()
    assert level_db(square) == pytest.approx(0.0, abs=0.01)
    assert level_db(silence(20)) == SILENCE_DB
    assert level_db(b"") == SILENCE_DB


@pytest.mark.parametrize("amplitude", [8000, 800, 80])
def test_a_sine_is_3_db_under_its_peak(amplitude):
    expected = 20 * math.log10(amplitude / 32768) - 3.01
    assert level_db(tone(20, amplitude=amplitude, freq_hz=440.0)) == pytest.approx(expected, abs=0.5)


def test_alsa_xrun_messages_are_counted_not_printed(capfd):
    from toy_runtime.adapters.sounddevice_base import AlsaErrors

    errors = AlsaErrors()
    errors._on_error(b"pcm.c", 8568, b"snd_pcm_recover", -32, b"%s occurred")
    errors._on_error(b"pcm.c", 8568, b"snd_pcm_recover", -32, b"%s occurred")
    errors._on_error(b"conf.c", 1, b"snd_config_load", -2, b"cannot open")
    assert (errors.xruns, errors.other) == (2, 1)
    assert "occurred" not in capfd.readouterr().err
