#!/usr/bin/env python3
"""Reference fixtures for the VAD tests (tests/whisper_vad.rs).

faster-whisper 1.2.1's Silero VAD (faster_whisper/vad.py: SileroVADModel on its
bundled silero_vad_v6.onnx through onnxruntime, get_speech_timestamps) on the
clips below, written as tests/fixtures/whisper/faster_whisper_vad.json:

- jfk: jfk.wav (.cache/models/whisper, from scripts/fetch-models.sh whisper);
- padded_8s: 8 s of digital silence, then jfk.wav;
- long_2min: jfk.wav repeated with 1 s gaps, cut at 120 s (as the other Whisper
  fixture scripts build it);
- silence_30s: 30 s of digital silence;

per clip the speech probability of every 512-sample window (the padded audio
faster-whisper feeds), and the speech regions (samples) of get_speech_timestamps
under each option set of OPTIONS; for padded_8s also the transcript of
WhisperModel.transcribe(vad_filter=True) (tiny.en-ct2, cpu, float32, 2 threads,
beam_size 1: the greedy decoding cyb-llm transcribe runs by default), the same
with word_timestamps=True (its words mapped back through the speech chunks), and
the transcript of jfk without VAD.

Run: /path/to/venv/bin/python scripts/make_whisper_vad_fixtures.py
(needs numpy, onnxruntime and faster-whisper 1.2.1).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_whisper_beam_fixtures import ROOT, SRC, clips as beam_clips  # noqa: E402

OUT = os.path.join(ROOT, "tests", "fixtures", "whisper", "faster_whisper_vad.json")

# VadOptions keyword sets: the defaults, short silences and padding with a minimum
# speech length and a raised threshold, and a maximum region length that splits.
OPTIONS = {
    "default": {},
    "short_silence": dict(threshold=0.6, min_speech_duration_ms=250, min_silence_duration_ms=300, speech_pad_ms=100),
    "max_5s": dict(min_silence_duration_ms=500, speech_pad_ms=200, max_speech_duration_s=5.0),
}


def clips():
    base = beam_clips()
    return {"jfk": base["jfk"],
            "padded_8s": np.concatenate([np.zeros(8 * 16000, dtype=np.float32), base["jfk"]]),
            "long_2min": base["long_2min"], "silence_30s": base["silence_30s"]}


def segments_of(model, audio, **kw):
    segs, info = model.transcribe(audio, beam_size=1, **kw)
    segs = [{"start": s.start, "end": s.end, "text": s.text,
             **({"words": [{"word": w.word, "start": w.start, "end": w.end} for w in s.words]}
                if s.words else {})} for s in segs]
    return {"duration": info.duration, "segments": segs, "text": "".join(s["text"] for s in segs)}


def main():
    import faster_whisper
    import onnxruntime
    from faster_whisper import WhisperModel
    from faster_whisper.vad import VadOptions, get_speech_timestamps, get_vad_model

    vad = get_vad_model()
    ref = {"source": f"faster-whisper {faster_whisper.__version__} (silero_vad_v6.onnx), "
                     f"onnxruntime {onnxruntime.__version__}",
           "window": 512, "options": OPTIONS, "clips": {}}
    for name, audio in clips().items():
        padded = np.pad(audio, (0, 512 - audio.shape[0] % 512))
        probs = vad(padded)
        regions = {k: [[c["start"], c["end"]] for c in get_speech_timestamps(audio, VadOptions(**o))]
                   for k, o in OPTIONS.items()}
        ref["clips"][name] = {"samples": int(audio.shape[0]),
                              "speech_probs": [float(p) for p in np.asarray(probs).ravel()],
                              "regions": regions}
        print(name, len(probs), {k: v[:4] for k, v in regions.items()}, file=sys.stderr)

    audio = clips()
    model = WhisperModel(os.path.join(SRC, "tiny.en-ct2"), device="cpu", compute_type="float32", cpu_threads=2)
    ref["transcripts"] = {
        "padded_8s_vad": segments_of(model, audio["padded_8s"], vad_filter=True),
        "padded_8s_vad_words": segments_of(model, audio["padded_8s"], vad_filter=True, word_timestamps=True),
        "jfk": segments_of(model, audio["jfk"], vad_filter=False),
    }
    print(ref["transcripts"], file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump(ref, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
