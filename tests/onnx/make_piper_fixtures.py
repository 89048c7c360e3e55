"""Makes the Piper VITS voice fixtures of tests/onnx_piper.rs with onnxruntime.

    .cache/onnx-venv/bin/python tests/onnx/make_piper_fixtures.py \
        .cache/models/piper/en_US-joe-medium.onnx tests/fixtures/onnx/piper

Per case: the inputs (`input` i64 phoneme ids [batch, phonemes], `input_lengths`
i64 [batch], `scales` f32 [3] = noise 0, length 1, noise_w 0, so the model's
random draws are multiplied by 0) as .npy, and onnxruntime's `output` for them
(CPU provider, 1 thread, all graph optimizations off). The ids are the first
sentences of tests/fixtures/tts/phoneme_ids.json (piper's own phonemizer), of
different lengths (the three shortest); `b2` is two of them in one batch, the shorter one padded with
0 (input_lengths gives the real lengths).
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort

model, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "fixtures", "tts", "phoneme_ids.json")) as f:
    cases_json = json.load(f)["cases"]
sentences = [c["ids"][0] for c in cases_json]
sentences.sort(key=len)
# The three shortest of different lengths (the fixtures stay small: the audio
# is 256 samples per frame).
picked = []
for ids in sentences:
    if len(picked) < 3 and all(len(p) != len(ids) for p in picked):
        picked.append(ids)

scales = np.array([0.0, 1.0, 0.0], dtype=np.float32)


def run(name, rows):
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    (audio,) = session.run(["output"], {"input": ids, "input_lengths": lengths, "scales": scales})
    for key, value in [("input", ids), ("input_lengths", lengths), ("scales", scales)]:
        np.save(os.path.join(out, f"{name}_{key}.npy"), np.ascontiguousarray(value))
    np.save(os.path.join(out, f"{name}_output.npy"), np.ascontiguousarray(audio.astype(np.float32)))
    print(name, ids.shape, audio.shape, float(np.abs(audio).max()))


for k, rows in enumerate(picked):
    run(f"s{k}", [rows])
run("b2", [picked[0], picked[1]])
print("onnxruntime", ort.__version__, "numpy", np.__version__)
