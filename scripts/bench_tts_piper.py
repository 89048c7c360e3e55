"""piper-tts's side of scripts/bench-tts.sh: the voice loaded as `PiperVoice.load`
does, its onnxruntime session remade with THREADS intra-op threads, then every
line of TEXT synthesized with the voice's defaults (`synthesize`, per-sentence
normalization), REPS times.

    python scripts/bench_tts_piper.py VOICE.onnx TEXT THREADS REPS

Prints `load_ms`, `best_ms` (the fastest repetition: phonemization and synthesis
of all lines) and `audio_s` (seconds of audio of one repetition) as `key value` lines.
"""
import sys
import time

import onnxruntime as ort
from piper import PiperVoice

voice_path, text_path, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
start = time.perf_counter()
voice = PiperVoice.load(voice_path)
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
voice.session = ort.InferenceSession(voice_path, sess_options=opts, providers=["CPUExecutionProvider"])
load_ms = (time.perf_counter() - start) * 1e3
lines = [l.strip() for l in open(text_path, encoding="utf-8") if l.strip()]
best = None
for _ in range(reps):
    t = time.perf_counter()
    samples = sum(chunk.audio_int16_array.size for line in lines for chunk in voice.synthesize(line))
    ms = (time.perf_counter() - t) * 1e3
    best = ms if best is None else min(best, ms)
print(f"load_ms {load_ms:.1f}")
print(f"best_ms {best:.1f}")
print(f"audio_s {samples / voice.config.sample_rate:.3f}")
