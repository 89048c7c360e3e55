"""Makes the fixtures of tests/diffusion.rs in tests/fixtures/diffusion.

    .cache/onnx-venv/bin/pip install --no-deps .cache/dl/adaptive_terrain_diffusion-0.4.2-py3-none-any.whl
    .cache/onnx-venv/bin/python tests/diffusion/make_fixtures.py tests/fixtures/diffusion

Terrain cases (the package's own TerrainGenerator, onnxruntime CPU):
- onestep_b1, onestep_b3: `TerrainGenerator._sample_native`, the package's
  one-step consistency sampling, with a seeded numpy generator; the noise it
  draws is drawn again from the same seed and saved for `--noise`.
- cm2: two-step consistency sampling (Song et al. 2023, Algorithm 1) on the
  package's denoiser call, levels [80, tau_1] of a 3-level Karras schedule.
- euler3: k-diffusion's `sample_euler` (derivative form) on the package's
  denoiser, 3 Karras levels then 0.

Timestep cases (a small epsilon/v network written here as ONNX, run by
onnxruntime), with the sampler steps as diffusers' schedulers write them:
- ddim_eps: DDIMScheduler.step (eta 0, "leading" spacing, steps_offset 1,
  set_alpha_to_one), epsilon prediction, scaled_linear betas, in the
  variance-preserving form of the scheduler.
- euler_v: EulerDiscreteScheduler ("linspace" spacing, init_noise_sigma,
  scale_model_input), v-prediction, linear betas.
diffusers itself needs torch, which is not installed here; its step
formulas are restated in numpy below.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from terrain_diffusion.generator import TerrainGenerator

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cases = {}


def save(name, value):
    np.save(os.path.join(out, f"{name}.npy"), np.ascontiguousarray(value, dtype=np.float32))


def karras(n, lo, hi, rho=7.0):
    ramp = np.linspace(0, 1, n)
    return (hi ** (1 / rho) + ramp * (lo ** (1 / rho) - hi ** (1 / rho))) ** rho


gen = TerrainGenerator(device="cpu")
shape = (1, 128, 128)
for name, seed, labels in [("onestep_b1", 11, [37]), ("onestep_b3", 12, [1, 50, 100])]:
    n = len(labels)
    cond, _ = gen._difficulty_labels(labels, n, np.random.default_rng(seed))
    samples = gen._sample_native(cond, generator=np.random.default_rng(seed), batch_size=16)
    noise = np.random.default_rng(seed).standard_normal((n,) + shape, dtype=np.float32)
    save(f"{name}_noise", noise)
    save(f"{name}_samples", samples)
    cases[name] = {"labels": labels, "steps": 1}

labels = [20, 80]
cond, _ = gen._difficulty_labels(labels, 2, np.random.default_rng(0))
rng = np.random.default_rng(13)
noise = rng.standard_normal((2, 2) + shape, dtype=np.float32)
taus = karras(3, gen.sigma_min, gen.sigma_max)[:2]
x = noise[0] * np.float32(taus[0])
for i, tau in enumerate(taus):
    x0 = gen._denoise(x, np.full(2, tau, dtype=np.float32), cond)
    if i + 1 < len(taus):
        x = x0 + np.float32(np.sqrt(taus[i + 1] ** 2 - gen.sigma_min ** 2)) * noise[i + 1]
save("cm2_noise", noise)
save("cm2_samples", x0)
cases["cm2"] = {"labels": labels, "steps": 2}

noise = rng.standard_normal((2,) + shape, dtype=np.float32)
sigmas = np.append(karras(3, gen.sigma_min, gen.sigma_max), 0.0)
x = noise * np.float32(sigmas[0])
for i in range(3):
    denoised = gen._denoise(x, np.full(2, sigmas[i], dtype=np.float32), cond)
    d = (x - denoised) / np.float32(sigmas[i])
    x = x + d * np.float32(sigmas[i + 1] - sigmas[i])
save("euler3_noise", noise)
save("euler3_samples", x)
cases["euler3"] = {"labels": labels, "steps": 3}

# A small timestep network: y = Conv3x3(sample) + sin(0.01 * t) per sample.
w = np.random.default_rng(5).standard_normal((1, 1, 3, 3)).astype(np.float32) * 0.3
nodes = [
    helper.make_node("Conv", ["sample", "w"], ["conv"], pads=[1, 1, 1, 1]),
    helper.make_node("Mul", ["timestep", "scale"], ["ts"]),
    helper.make_node("Sin", ["ts"], ["sin"]),
    helper.make_node("Reshape", ["sin", "shape4"], ["bias"]),
    helper.make_node("Add", ["conv", "bias"], ["out"]),
]
graph = helper.make_graph(
    nodes,
    "tiny_unet",
    [
        helper.make_tensor_value_info("sample", TensorProto.FLOAT, ["batch", 1, 8, 8]),
        helper.make_tensor_value_info("timestep", TensorProto.FLOAT, ["batch"]),
    ],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 1, 8, 8])],
    [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array([0.01], np.float32), "scale"),
        numpy_helper.from_array(np.array([-1, 1, 1, 1], np.int64), "shape4"),
    ],
)
tiny = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
tiny.ir_version = 10
onnx.checker.check_model(tiny)
onnx.save(tiny, os.path.join(out, "tiny_unet.onnx"))
session = ort.InferenceSession(os.path.join(out, "tiny_unet.onnx"), providers=["CPUExecutionProvider"])


def net(x, t):
    feeds = {"sample": x.astype(np.float32), "timestep": np.full(len(x), t, dtype=np.float32)}
    return session.run(["out"], feeds)[0].astype(np.float64)


def alphas_cumprod(steps, b0, b1, kind):
    if kind == "linear":
        betas = np.linspace(b0, b1, steps, dtype=np.float64)
    else:
        betas = np.linspace(b0 ** 0.5, b1 ** 0.5, steps, dtype=np.float64) ** 2
    return np.cumprod(1.0 - betas)


# DDIM, epsilon prediction.
T, n_steps, offset = 1000, 10, 1
ab = alphas_cumprod(T, 0.00085, 0.012, "scaled_linear")
ratio = T // n_steps
timesteps = (np.arange(0, n_steps) * ratio).round()[::-1].astype(np.int64) + offset
noise = np.random.default_rng(21).standard_normal((2, 1, 8, 8), dtype=np.float32)
x = noise.astype(np.float64)  # init_noise_sigma = 1
for t in timesteps:
    prev = t - ratio
    a_t, a_prev = ab[t], (ab[prev] if prev >= 0 else 1.0)
    eps = net(x, float(t))
    x0 = (x - (1 - a_t) ** 0.5 * eps) / a_t ** 0.5
    x = a_prev ** 0.5 * x0 + (1 - a_prev) ** 0.5 * eps
save("ddim_eps_noise", noise)
save("ddim_eps_samples", x)
cases["ddim_eps"] = {"steps": n_steps}
with open(os.path.join(out, "ddim_eps.toml"), "w") as f:
    f.write(
        '[diffusion]\nsampler = "ddim"\nprediction = "epsilon"\nnoise_level = "timestep"\n'
        f"steps = {n_steps}\ntrain_timesteps = {T}\nbeta_start = 0.00085\nbeta_end = 0.012\n"
        f'beta_schedule = "scaled_linear"\nsteps_offset = {offset}\n'
    )

# Euler (discrete), v-prediction.
n_steps = 8
ab = alphas_cumprod(T, 0.0001, 0.02, "linear")
train_sigmas = ((1 - ab) / ab) ** 0.5
timesteps = np.linspace(0, T - 1, n_steps, dtype=np.float64)[::-1].copy()
sigmas = np.append(np.interp(timesteps, np.arange(T), train_sigmas), 0.0)
noise = np.random.default_rng(22).standard_normal((2, 1, 8, 8), dtype=np.float32)
x = noise.astype(np.float64) * (sigmas[0] ** 2 + 1) ** 0.5  # init_noise_sigma
for i, t in enumerate(timesteps):
    s = sigmas[i]
    v = net(x / (s ** 2 + 1) ** 0.5, float(t))  # scale_model_input
    x0 = v * (-s / (s ** 2 + 1) ** 0.5) + x / (s ** 2 + 1)
    x = x + (x - x0) / s * (sigmas[i + 1] - s)
save("euler_v_noise", noise)
save("euler_v_samples", x)
cases["euler_v"] = {"steps": n_steps}
with open(os.path.join(out, "euler_v.toml"), "w") as f:
    f.write(
        'sampler = "euler"\nprediction = "v"\nnoise_level = "timestep"\n'
        f'steps = {n_steps}\ntrain_timesteps = {T}\nbeta_start = 0.0001\nbeta_end = 0.02\nbeta_schedule = "linear"\n'
    )

with open(os.path.join(out, "cases.json"), "w") as f:
    json.dump(cases, f, indent=1)
print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "numpy", np.__version__)
