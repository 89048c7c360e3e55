"""Makes tests/fixtures/onnx/ops: one small ONNX graph per case (one op, or the few nodes of
a shape computation), random inputs with awkward shapes, and onnxruntime's outputs.

    .cache/onnx-venv/bin/python tests/onnx/make_op_fixtures.py tests/fixtures/onnx/ops

Per case CASE/: model.onnx, in_<name>.npy per graph input, out_<name>.npy per output
(onnxruntime CPU provider, all graph optimizations off).
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
rng = np.random.default_rng(17)
F = TensorProto.FLOAT


def rand(*shape, positive=False):
    x = rng.standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if positive else x


def case(name, nodes, inputs, outputs, inits=(), opset=18):
    """inputs: [(name, array, dims)] with dims naming symbolic ones as strings."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, F, dims) for n, _, dims in inputs],
        [helper.make_tensor_value_info(o, F, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9

    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a, _ in inputs}
    for n, a in feeds.items():
        np.save(os.path.join(d, f"in_{n}.npy"), a)
    for o, v in zip(outputs, sess.run(outputs, feeds)):
        np.save(os.path.join(d, f"out_{o}.npy"), np.ascontiguousarray(v.astype(np.float32)))


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


shutil.rmtree(OUT, ignore_errors=True)
x = rand(2, 3, 7, 9)
case("conv2d_strided_dilated_padded", [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2])],
     [("x", x, ["N", 3, 7, 9])], ["y"], [("w", rand(4, 3, 3, 2)), ("b", rand(4))])
case("conv2d_groups_no_bias", [node("Conv", ["x", "w"], ["y"], group=2, pads=[1, 1, 1, 1])],
     [("x", rand(1, 4, 5, 5), [1, 4, 5, 5])], ["y"], [("w", rand(6, 2, 3, 3))])
case("conv1d", [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2], dilations=[2], strides=[1])],
     [("x", rand(3, 3, 17), ["N", 3, 17])], ["y"], [("w", rand(5, 3, 3)), ("b", rand(5))])
for include in (0, 1):
    case(f"avgpool_pad_include{include}", [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], count_include_pad=include)],
         [("x", rand(1, 2, 7, 6), [1, 2, 7, 6])], ["y"])
case("resize_nearest_asymmetric", [node("Resize", ["x", "", "s"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
     [("x", rand(2, 3, 4, 5), ["N", 3, 4, 5])], ["y"], [("s", np.array([1, 1, 2, 3], np.float32))])
case("resize_nearest_half_pixel", [node("Resize", ["x", "", "s"], ["y"], mode="nearest")],
     [("x", rand(1, 2, 3, 4), [1, 2, 3, 4])], ["y"], [("s", np.array([1, 1, 3, 2], np.float32))])
case("matmul_batch_broadcast", [node("MatMul", ["a", "b"], ["y"])],
     [("a", rand(2, 1, 3, 17), [2, 1, 3, 17]), ("b", rand(4, 17, 5), [4, 17, 5])], ["y"])
case("matmul_const_rhs", [node("MatMul", ["a", "w"], ["y"])],
     [("a", rand(3, 1, 17), ["N", 1, 17])], ["y"], [("w", rand(17, 5))])
case("gemm_alpha_beta_no_transpose", [node("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
     [("a", rand(3, 7), ["N", 7])], ["y"], [("w", rand(7, 4)), ("c", rand(4))])
for eq, sa, sb in [("bct,bcs->bts", (2, 5, 7), (2, 5, 3)), ("bts,bcs->bct", (2, 7, 3), (2, 5, 3)),
                   ("bhqd,bhkd->bhqk", (1, 2, 3, 4), (1, 2, 5, 4)), ("ij,jk->ki", (3, 4), (4, 5))]:
    name = "einsum_" + eq.replace(",", "_").replace("->", "_to_")
    case(name, [node("Einsum", ["a", "b"], ["y"], equation=eq)],
         [("a", rand(*sa), list(sa)), ("b", rand(*sb), list(sb))], ["y"])
case("softmax_middle_axis", [node("Softmax", ["x"], ["y"], axis=1)], [("x", rand(3, 17, 4), [3, 17, 4])], ["y"])
case("softmax_last_axis", [node("Softmax", ["x"], ["y"], axis=-1)], [("x", rand(2, 1, 17) * 5, ["N", 1, 17])], ["y"])
case("instance_norm", [node("InstanceNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)],
     [("x", rand(2, 3, 17) * 3 + 1, ["N", 3, 17])], ["y"], [("g", rand(3)), ("b", rand(3))])
case("group_norm_as_exported",
     [node("Reshape", ["x", "s1"], ["r"]), node("InstanceNormalization", ["r", "g", "b"], ["n"], epsilon=1e-5),
      node("Shape", ["x"], ["sx"]), node("Reshape", ["n", "sx"], ["r2"]), node("Mul", ["r2", "gamma"], ["m"]),
      node("Add", ["m", "beta"], ["y"])],
     [("x", rand(2, 6, 3, 5), ["N", 6, 3, 5])], ["y"],
     [("s1", np.array([0, 3, -1], np.int64)), ("g", np.ones(3, np.float32)), ("b", np.zeros(3, np.float32)),
      ("gamma", rand(6, 1, 1)), ("beta", rand(6, 1, 1))])
case("split_sizes_negative_axis", [node("Split", ["x", "sp"], ["y0", "y1"], axis=-1)],
     [("x", rand(2, 5, 10), ["N", 5, 10])], ["y0", "y1"], [("sp", np.array([3, 7], np.int64))])
case("split_uneven_num_outputs", [node("Split", ["x"], ["y0", "y1", "y2"], axis=1, num_outputs=3)],
     [("x", rand(2, 17), [2, 17])], ["y0", "y1", "y2"])
binaries = [("Add", (3, 1, 17), (4, 1)), ("Sub", (2, 3), (1,)), ("Mul", (1, 17), (3, 1)), ("Div", (4, 5), (4, 5))]
for op, sa, sb in binaries:
    case(f"binary_{op.lower()}", [node(op, ["a", "b"], ["y"])],
         [("a", rand(*sa), list(sa)), ("b", rand(*sb, positive=op == "Div"), list(sb))], ["y"])
unaries = {"Sqrt": True, "Log": True, "Exp": False, "Cos": False, "Sin": False, "Reciprocal": True,
           "Neg": False, "Erf": False, "Sigmoid": False, "Tanh": False, "Relu": False}
for op, pos in unaries.items():
    case(f"unary_{op.lower()}", [node(op, ["x"], ["y"])], [("x", rand(3, 17, positive=pos), ["N", 17])], ["y"])
case("leaky_relu", [node("LeakyRelu", ["x"], ["y"], alpha=0.2)], [("x", rand(1, 17), [1, 17])], ["y"])
case("clip", [node("Clip", ["x", "lo", "hi"], ["y"])], [("x", rand(3, 17), [3, 17])], ["y"],
     [("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))])
for p in (2.0, 0.5, 3.0):
    case(f"pow_{str(p).replace('.', '_')}", [node("Pow", ["x", "p"], ["y"])], [("x", rand(2, 9, positive=True), [2, 9])], ["y"],
         [("p", np.array(p, np.float32))])
case("shape_arithmetic_reshape",
     [node("Shape", ["x"], ["s"]), node("Gather", ["s", "i0"], ["n"], axis=0), node("Unsqueeze", ["n", "ax"], ["n1"]),
      node("Concat", ["n1", "tail"], ["shape"], axis=0), node("Reshape", ["x", "shape"], ["y"])],
     [("x", rand(3, 4, 6), ["N", 4, 6])], ["y"],
     [("i0", np.array(0, np.int64)), ("ax", np.array([0], np.int64)), ("tail", np.array([2, -1], np.int64))])
case("squeeze_unsqueeze_transpose_concat",
     [node("Unsqueeze", ["x", "ax"], ["u"]), node("Transpose", ["u"], ["t"], perm=[2, 0, 1, 3]),
      node("Squeeze", ["t", "sq"], ["s"]), node("Concat", ["s", "s"], ["y"], axis=-2)],
     [("x", rand(3, 5, 4), ["N", 5, 4])], ["y"], [("ax", np.array([-2], np.int64)), ("sq", np.array([0], np.int64))])
case("slice_negative_and_gather_scalar",
     [node("Slice", ["x", "st", "en", "axes"], ["s"]), node("Gather", ["s", "i"], ["y"], axis=1)],
     [("x", rand(2, 7, 9), ["N", 7, 9])], ["y"],
     [("st", np.array([-5, 1], np.int64)), ("en", np.array([100, -1], np.int64)), ("axes", np.array([2, 1], np.int64)),
      ("i", np.array(-1, np.int64))])
print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "cases", len(os.listdir(OUT)))
