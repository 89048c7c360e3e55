"""Makes the terrain UNet fixtures of tests/onnx_unet.rs with onnxruntime.

    .cache/onnx-venv/bin/python tests/onnx/make_unet_fixtures.py MODEL.onnx tests/fixtures/onnx/unet

Per case: the inputs (noisy, sigma, difficulty) as .npy, seeded, and
onnxruntime's `denoised` for them (CPU provider, 1 thread, all graph
optimizations off, so the reference is onnxruntime's plain kernels).
"""
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

# (name, sigmas, difficulty labels): one-step generation from sigma_max (80),
# a mid-noise batch, and a low-noise entry.
cases = [
    ("b1", [80.0], [1.0]),
    ("b2", [80.0, 2.5], [50.0, 100.0]),
    ("b3", [0.05, 80.0, 10.0], [100.0, 37.0, 1.0]),
]
rng = np.random.default_rng(20261202)
for name, sigmas, labels in cases:
    sigma = np.array(sigmas, dtype=np.float32)
    noisy = (rng.standard_normal((len(sigmas), 1, 128, 128)) * sigma[:, None, None, None]).astype(np.float32)
    difficulty = np.array(labels, dtype=np.float32)
    (denoised,) = session.run(["denoised"], {"noisy": noisy, "sigma": sigma, "difficulty": difficulty})
    for key, value in [("noisy", noisy), ("sigma", sigma), ("difficulty", difficulty), ("denoised", denoised)]:
        np.save(os.path.join(out, f"{name}_{key}.npy"), np.ascontiguousarray(value.astype(np.float32)))
    print(name, denoised.shape, float(np.abs(denoised).max()))
print("onnxruntime", ort.__version__, "numpy", np.__version__)
