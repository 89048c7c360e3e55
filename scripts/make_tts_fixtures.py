#!/usr/bin/env python3
"""Makes the text-to-speech fixtures with Piper itself (piper-tts, PyPI).

    python3 scripts/make_tts_fixtures.py VOICE.onnx SENTENCES.txt OUT.json

For every line of SENTENCES.txt, writes piper-tts's phonemes (one string per
sentence) and phoneme ids, plus the versions that made them. The voice's JSON
config must sit beside VOICE.onnx. Run in a venv with piper-tts==1.8.0
(tests/fixtures/tts/README.md says how the committed file was made).
"""
import json
import sys
from importlib.metadata import version

from piper import PiperVoice


def main() -> None:
    voice_path, sentences_path, out_path = sys.argv[1:]
    voice = PiperVoice.load(voice_path)
    cases = []
    for line in open(sentences_path, encoding="utf-8"):
        text = line.rstrip("\n")
        if not text:
            continue
        sentences = [s for s in voice.phonemize(text) if s]
        cases.append(
            {
                "text": text,
                "phonemes": ["".join(s) for s in sentences],
                "ids": [voice.phonemes_to_ids(s) for s in sentences],
            }
        )
    out = {
        "made_by": f"piper-tts {version('piper-tts')} (its bundled espeak-ng), "
        "scripts/make_tts_fixtures.py",
        "voice": voice_path.split("/")[-1],
        "cases": cases,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
