#!/usr/bin/env python3
"""Reference fixtures for the beam-search and decoding-flag tests (tests/whisper_beam.rs).

faster-whisper (which runs CTranslate2's beam search) transcribes, on the same
CTranslate2 tiny.en weights as the other Whisper fixtures (cpu, float32 compute
type, 2 threads, no VAD), the test clips of scripts/make_whisper_fixtures.py:

- jfk.wav (.cache/models/whisper, from scripts/fetch-models.sh whisper);
- long_2min: jfk.wav repeated with 1 s gaps, cut at 120 s (built in memory; the
  Rust tests build the same samples);
- silence_30s: 30 s of digital silence;

with beam_size 5 (patience 1, length penalty 1: faster-whisper's defaults) and
the cases below; each is written as tests/fixtures/whisper/faster_whisper_beam_<case>.json
with the options used, the versions of faster-whisper and ctranslate2, and the
segments (times, text, tokens with timestamps, avg_logprob, no_speech_prob,
temperature, compression_ratio).

Run: /path/to/venv/bin/python scripts/make_whisper_beam_fixtures.py [case ...]
(needs numpy, faster-whisper and ctranslate2; naming cases runs only those).
"""
import json
import os
import sys
import wave

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("CYB_MODELS_DIR", os.path.join(ROOT, ".cache", "models"))
SRC = os.path.join(MODELS, "whisper")
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper")

# An initial prompt longer than faster-whisper keeps (the last 223 tokens of
# <|startofprev|>'s text go into the first window's prompt).
LONG_PROMPT = " ".join(f"Speech number {i} of the President, given in Washington." for i in range(40))

BEAM = dict(beam_size=5, best_of=5, patience=1.0, length_penalty=1.0)
CASES = {
    # Defaults of faster-whisper's transcribe (beam 5, the temperature fallback).
    "jfk": ("jfk", dict(BEAM)),
    "long_2min": ("long_2min", dict(BEAM)),
    "silence_30s": ("silence_30s", dict(BEAM)),
    # A fixed temperature list: beam search only, no fallback.
    "long_2min_t0": ("long_2min", dict(BEAM, temperature=[0.0])),
    "long_2min_no_condition": ("long_2min", dict(BEAM, temperature=[0.0], condition_on_previous_text=False)),
    "jfk_prompt": ("jfk", dict(BEAM, initial_prompt="President Kennedy's inaugural address; January 20, 1961.")),
    "long_2min_prompt_no_condition": (
        "long_2min", dict(BEAM, temperature=[0.0], condition_on_previous_text=False,
                          initial_prompt="Transcript of a speech, with punctuation!")),
    "jfk_long_prompt": ("jfk", dict(BEAM, initial_prompt=LONG_PROMPT)),
    # Patience and the length-penalty exponent.
    "long_2min_patience2_lp06": ("long_2min", dict(BEAM, temperature=[0.0], patience=2.0, length_penalty=0.6)),
    "jfk_beam2": ("jfk", dict(BEAM, beam_size=2)),
}


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return data.astype(np.float32) / 32768.0


def clips():
    jfk = read_wav(os.path.join(SRC, "jfk.wav"))
    gap = np.zeros(16000, dtype=np.float32)
    parts = []
    while sum(len(p) for p in parts) < 120 * 16000:
        parts += [jfk, gap]
    return {"jfk": jfk, "long_2min": np.concatenate(parts)[: 120 * 16000],
            "silence_30s": np.zeros(30 * 16000, dtype=np.float32)}


def main():
    import ctranslate2
    import faster_whisper
    from faster_whisper import WhisperModel

    audio = clips()
    model = WhisperModel(os.path.join(SRC, "tiny.en-ct2"), device="cpu", compute_type="float32", cpu_threads=2)
    for case in sys.argv[1:] or list(CASES):
        clip, opts = CASES[case]
        kwargs = dict(opts, vad_filter=False, without_timestamps=False)
        segments, info = model.transcribe(audio[clip], **kwargs)
        segs = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                 "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob,
                 "temperature": s.temperature, "compression_ratio": s.compression_ratio}
                for s in segments]
        ref = {"source": f"faster-whisper {faster_whisper.__version__}, ctranslate2 {ctranslate2.__version__}, "
                         "tiny.en-ct2, cpu, compute_type float32, cpu_threads 2, vad_filter False",
               "clip": clip, "options": opts, "language": info.language, "duration": info.duration,
               "segments": segs, "text": "".join(s["text"] for s in segs)}
        with open(os.path.join(OUT, f"faster_whisper_beam_{case}.json"), "w") as f:
            json.dump(ref, f, indent=1)
        print(case, [(s["start"], s["end"], s["temperature"]) for s in segs], ref["text"][:160], file=sys.stderr)


if __name__ == "__main__":
    main()
