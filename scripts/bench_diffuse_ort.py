"""onnxruntime's side of scripts/bench-diffuse.sh: the terrain package's one-step
sampling (noise * sigma_max, labels (d - 1) / 99, one denoiser call) for COUNT
images in batches of BATCH, on the CPU provider with THREADS threads.

    python scripts/bench_diffuse_ort.py MODEL.onnx THREADS BATCH BATCHES

Prints `load_ms`, `first_ms` (the first batch, cold) and `best_ms` (the fastest
later batch) as `key value` lines.
"""
import sys
import time

import numpy as np
import onnxruntime as ort

model, threads, batch, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
start = time.perf_counter()
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
load_ms = (time.perf_counter() - start) * 1e3
rng = np.random.default_rng(1)
times = []
for _ in range(batches):
    t = time.perf_counter()
    noise = rng.standard_normal((batch, 1, 128, 128), dtype=np.float32)
    labels = ((rng.integers(1, 101, batch) - 1) / 99).astype(np.float32)
    feeds = {"noisy": noise * np.float32(80.0), "sigma": np.full(batch, 80.0, np.float32), "difficulty": labels}
    session.run(["denoised"], feeds)
    times.append((time.perf_counter() - t) * 1e3)
print(f"load_ms {load_ms:.1f}")
print(f"first_ms {times[0]:.1f}")
print(f"best_ms {min(times[1:] or times):.1f}")
