#!/usr/bin/env python3
"""Makes the speech fixtures of tests/speak_voice.rs with Piper itself (piper-tts, PyPI).

    python3 scripts/make_tts_audio_fixtures.py VOICE.onnx OUT_DIR TEXT...

For each TEXT (one sentence each), writes piper-tts's phoneme ids and the audio
its onnxruntime session makes from them with both noise scales at 0 and
length_scale 1 (`scales = [0, 1, 0]`: deterministic), peak-normalized as
`PiperVoice.synthesize` does, as `OUT_DIR/audio_K.npy` (f32), plus
`OUT_DIR/audio.json` (texts, ids, sample counts, versions). Run in a venv with
piper-tts==1.8.0 (tests/fixtures/tts/README.md).
"""
import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
from piper import PiperVoice, SynthesisConfig


def main() -> None:
    voice_path, out_dir, *texts = sys.argv[1:]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    voice = PiperVoice.load(voice_path)
    syn = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=1.0)
    cases = []
    for k, text in enumerate(texts):
        sentences = [s for s in voice.phonemize(text) if s]
        if len(sentences) != 1:
            sys.exit(f"{text!r}: {len(sentences)} sentences; give one sentence per text")
        ids = voice.phonemes_to_ids(sentences[0])
        audio = voice.phoneme_ids_to_audio(ids, syn).astype(np.float32)
        peak = float(np.max(np.abs(audio)))
        normalized = np.clip(audio / peak, -1.0, 1.0).astype(np.float32)
        np.save(out / f"audio_{k}.npy", normalized)
        cases.append({"text": text, "ids": ids, "samples": int(normalized.size), "peak": peak})
    made_by = {
        "script": "scripts/make_tts_audio_fixtures.py",
        "piper-tts": version("piper-tts"),
        "onnxruntime": version("onnxruntime"),
        "numpy": version("numpy"),
        "voice": Path(voice_path).name,
        "scales": [0.0, 1.0, 0.0],
    }
    with open(out / "audio.json", "w", encoding="utf-8") as f:
        json.dump({"made_by": made_by, "cases": cases}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
