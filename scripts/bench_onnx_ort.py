"""onnxruntime's time for one graph on .npy inputs (the peer of `cyb-llm eval --repeat`).

    python scripts/bench_onnx_ort.py MODEL.onnx THREADS REPEAT NAME=FILE.npy ...

Prints `ort_ms <fastest run in ms>`; CPU provider, default graph optimizations.
"""
import sys
import time

import numpy as np
import onnxruntime as ort

model, threads, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
feeds = {k: np.load(v) for k, v in (a.split("=", 1) for a in sys.argv[4:])}
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
session.run(None, feeds)
best = float("inf")
for _ in range(repeat):
    t = time.perf_counter()
    session.run(None, feeds)
    best = min(best, time.perf_counter() - t)
print(f"ort_ms {best * 1e3:.2f}")
