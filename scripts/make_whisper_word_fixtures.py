#!/usr/bin/env python3
"""Reference fixtures for the word-timestamp tests (tests/whisper_words.rs).

faster-whisper (CTranslate2's `align`: alignment heads, median filter width 7, DTW,
then faster-whisper's word grouping, punctuation merging and duration heuristics)
transcribes with word_timestamps=True, on the same CTranslate2 tiny.en weights as
the other Whisper fixtures (cpu, float32 compute type, 2 threads, no VAD), the test
clips of scripts/make_whisper_fixtures.py:

- jfk.wav (.cache/models/whisper, from scripts/fetch-models.sh whisper);
- long_2min: jfk.wav repeated with 1 s gaps, cut at 120 s (built in memory; the
  Rust tests build the same samples);

greedy (beam_size 1, temperature 0: cyb-llm's default decoding without the
fallback) and with beam search (beam_size 5, faster-whisper's default). Each case is
written as tests/fixtures/whisper/faster_whisper_words_<case>.json with the options,
the versions of faster-whisper and ctranslate2, and the segments (times, text, text
tokens, words with start, end and probability).

With the environment variable OPENAI_WHISPER_UTILS set to openai-whisper's
whisper/utils.py (it needs only the standard library; e.g. from
`pip download openai-whisper --no-deps`), the greedy jfk and long_2min cases also get
the SRT and VTT that openai-whisper's subtitle writers make from faster-whisper's
words: with the default options (faster_whisper_words_<case>.{srt,vtt}), with
max_line_width 20 and max_line_count 2 (<case>_w20_l2), max_line_width 20 alone
(<case>_w20) and max_words_per_line 1 (<case>_words: one cue per word).

The multilingual cases run the seeded-random multilingual fixture model
(tests/fixtures/whisper/tiny_multilingual_ct2; language detected; one case
translating); they need OPENAI_WHISPER_ASSETS (openai-whisper's whisper/assets, as
scripts/make_whisper_fixtures.py) for its tokenizer.

Run: /path/to/venv/bin/python scripts/make_whisper_word_fixtures.py [case ...]
(needs numpy, faster-whisper and ctranslate2; naming cases runs only those).
"""
import importlib.util
import io
import json
import os
import sys

import shutil
import tempfile

# The clips and paths of the beam-search fixtures (the same audio, built the same way),
# and the multilingual tokenizer of the language fixture.
from make_whisper_beam_fixtures import OUT, SRC, clips
from make_whisper_fixtures import multilingual_tokenizer

GREEDY = dict(beam_size=1, best_of=1, temperature=[0.0])
CASES = {
    "jfk": ("jfk", dict(GREEDY)),
    "long_2min": ("long_2min", dict(GREEDY)),
    "jfk_beam5": ("jfk", dict(GREEDY, beam_size=5)),
    "long_2min_beam5": ("long_2min", dict(GREEDY, beam_size=5)),
    # The seeded-random multilingual fixture model (tests/fixtures/whisper/tiny_multilingual_ct2):
    # language detection, the <|lang|><|task|> sot sequence, and translation.
    "multilingual_jfk": ("jfk", dict(GREEDY)),
    "multilingual_jfk_translate": ("jfk", dict(GREEDY, task="translate")),
}
MULTILINGUAL = os.path.join(OUT, "tiny_multilingual_ct2")
# openai-whisper writer options of the subtitle fixtures (suffix -> options).
SUBTITLES = {
    "": dict(max_line_width=None, max_line_count=None, highlight_words=False),
    "_w20_l2": dict(max_line_width=20, max_line_count=2, highlight_words=False),
    "_w20": dict(max_line_width=20, max_line_count=None, highlight_words=False),
    "_words": dict(max_line_width=None, max_line_count=None, highlight_words=False, max_words_per_line=1),
}


def write_subtitles(ref, name):
    path = os.environ.get("OPENAI_WHISPER_UTILS")
    if not path:
        return
    spec = importlib.util.spec_from_file_location("whisper_utils", path)
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    for suffix, opts in SUBTITLES.items():
        for ext, writer in (("srt", utils.WriteSRT), ("vtt", utils.WriteVTT)):
            buf = io.StringIO()
            writer(OUT).write_result(ref, buf, opts)
            with open(os.path.join(OUT, f"faster_whisper_words_{name}{suffix}.{ext}"), "w") as f:
                f.write(buf.getvalue())


def main():
    import ctranslate2
    import faster_whisper
    from faster_whisper import WhisperModel

    audio = clips()
    models = {}
    tmp = tempfile.TemporaryDirectory()
    for case in sys.argv[1:] or list(CASES):
        clip, opts = CASES[case]
        path = MULTILINGUAL if case.startswith("multilingual") else os.path.join(SRC, "tiny.en-ct2")
        if path not in models:
            folder = path
            if path == MULTILINGUAL:
                # The fixture folder has no tokenizer.json: faster-whisper gets the one
                # scripts/make_whisper_fixtures.py builds (openai-whisper's assets).
                folder = os.path.join(tmp.name, "multilingual")
                shutil.copytree(path, folder)
                tok, _ = multilingual_tokenizer(os.environ["OPENAI_WHISPER_ASSETS"])
                tok.save(os.path.join(folder, "tokenizer.json"))
            models[path] = WhisperModel(folder, device="cpu", compute_type="float32", cpu_threads=2)
        model = models[path]
        kwargs = dict(opts, vad_filter=False, without_timestamps=False, word_timestamps=True)
        segments, info = model.transcribe(audio[clip], **kwargs)
        segs = [{"start": s.start, "end": s.end, "text": s.text,
                 "tokens": [t for t in s.tokens if t < 50256],
                 "words": [{"word": w.word, "start": float(w.start), "end": float(w.end),
                            "probability": float(w.probability)} for w in s.words]}
                for s in segments]
        ref = {"source": f"faster-whisper {faster_whisper.__version__}, ctranslate2 {ctranslate2.__version__}, "
                         f"{os.path.basename(path)}, cpu, compute_type float32, cpu_threads 2, vad_filter False, "
                         "word_timestamps True",
               "clip": clip, "options": opts, "language": info.language, "duration": info.duration,
               "segments": segs, "text": "".join(s["text"] for s in segs)}
        with open(os.path.join(OUT, f"faster_whisper_words_{case}.json"), "w") as f:
            json.dump(ref, f, indent=1)
        if case in ("jfk", "long_2min"):
            write_subtitles(ref, case)
        print(case, len(segs), "segments", sum(len(s["words"]) for s in segs), "words", file=sys.stderr)


if __name__ == "__main__":
    main()
