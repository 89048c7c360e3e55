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
    """inputs: [(name, array, dims)] with dims naming symbolic ones as strings; an int64
    array makes an int64 input."""
    kind = lambda a: TensorProto.INT64 if a.dtype == np.int64 else F
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, kind(a), dims) for n, a, dims in inputs],
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

# Run-time integer, index and data-dependent ops (the Piper VITS voice's); integer or bool
# results end in a Cast to float, the form the fixtures compare.
def ints(*values):
    return np.array(values, np.int64)


def to_float(src, dst):
    return node("Cast", [src], [dst], to=TensorProto.FLOAT)


case("gather_tensor_indices_negative_axis", [node("Gather", ["x", "i"], ["y"], axis=-2)],
     [("x", rand(3, 17, 4), ["N", 17, 4]), ("i", ints([0, -1, 5], [16, -17, 3]), [2, 3])], ["y"])
case("gather_elements_last_axis", [node("GatherElements", ["x", "i"], ["y"], axis=-1)],
     [("x", rand(3, 5), [3, 5]), ("i", rng.integers(-5, 5, (3, 7)).astype(np.int64), [3, 7])], ["y"])
case("gathernd_pairs", [node("GatherND", ["x", "i"], ["y"])],
     [("x", rand(2, 3, 17), [2, 3, 17]), ("i", ints([0, 2], [1, -1], [1, 0], [0, 0], [1, 1]), [5, 2])], ["y"])
case("scatternd_rows", [node("ScatterND", ["x", "i", "u"], ["y"])],
     [("x", rand(4, 17), [4, 17]), ("i", ints([3], [0]), [2, 1]), ("u", rand(2, 17), [2, 17])], ["y"])
case("cumsum_exclusive_reverse", [node("CumSum", ["x", "ax"], ["y"], exclusive=1, reverse=1)],
     [("x", rand(3, 17), ["N", 17])], ["y"], [("ax", np.array(-1, np.int64))])
case("cumsum_first_axis", [node("CumSum", ["x", "ax"], ["y"])],
     [("x", rand(5, 1, 3), [5, 1, 3])], ["y"], [("ax", np.array(0, np.int64))])
case("reduce_sum_keepdims_negative_axis", [node("ReduceSum", ["x", "ax"], ["y"])],
     [("x", rand(3, 1, 17), ["N", 1, 17])], ["y"], [("ax", ints(-1))])
case("reduce_max_no_keepdims", [node("ReduceMax", ["x", "ax"], ["y"], keepdims=0)],
     [("x", rand(3, 4, 17), [3, 4, 17])], ["y"], [("ax", ints(0, 2))])
case("reduce_mean_all_keepdims", [node("ReduceMean", ["x"], ["y"])], [("x", rand(3, 17), [3, 17])], ["y"])
case("less_where_broadcast",
     [node("Less", ["a", "b"], ["c"]), node("Where", ["c", "a", "b"], ["y"])],
     [("a", rand(3, 17), ["N", 17]), ("b", rand(17), [17])], ["y"])
case("equal_not_and_on_ints",
     [node("Equal", ["i", "j"], ["e"]), node("Not", ["e"], ["n"]), node("GreaterOrEqual", ["i", "k"], ["g"]),
      node("LessOrEqual", ["i", "k"], ["l"]), node("And", ["n", "g"], ["a"]), to_float("a", "y"), to_float("l", "z")],
     [("i", rng.integers(-3, 3, (3, 17)).astype(np.int64), ["N", 17]),
      ("j", rng.integers(-3, 3, (1, 17)).astype(np.int64), [1, 17])], ["y", "z"], [("k", np.array(0, np.int64))])
case("expand_to_runtime_shape",
     [node("Shape", ["b"], ["s"]), node("Expand", ["x", "s"], ["y"])],
     [("x", rand(1, 17), [1, 17]), ("b", rand(3, 1), ["N", 1])], ["y"])
case("constant_of_shape_runtime",
     [node("Shape", ["x"], ["s"]), node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", F, [1], [2.5])),
      node("Add", ["x", "c"], ["y"])],
     [("x", rand(3, 17), ["N", 17])], ["y"])
case("range_from_runtime_length",
     [node("Shape", ["x"], ["s"]), node("Gather", ["s", "i0"], ["n"], axis=0), node("Range", ["st", "n", "d"], ["r"]),
      to_float("r", "y")],
     [("x", rand(17, 2), ["N", 2])], ["y"],
     [("i0", np.array(0, np.int64)), ("st", np.array(-3, np.int64)), ("d", np.array(2, np.int64))])
case("nonzero_transpose_gathernd",
     [node("Greater", ["x", "zero"], ["m"]), node("NonZero", ["m"], ["nz"]), node("Transpose", ["nz"], ["t"], perm=[1, 0]),
      node("GatherND", ["x", "t"], ["y"]), to_float("nz", "z")],
     [("x", rand(3, 17), ["N", 17])], ["y", "z"], [("zero", np.array(0.0, np.float32))])
case("nonzero_empty",
     [node("Greater", ["x", "big"], ["m"]), node("NonZero", ["m"], ["nz"]), to_float("nz", "y")],
     [("x", rand(3, 1, 17), [3, 1, 17])], ["y"], [("big", np.array(100.0, np.float32))])
case("pad_constant_value", [node("Pad", ["x", "p", "v"], ["y"])],
     [("x", rand(2, 3, 17), ["N", 3, 17])], ["y"], [("p", ints(0, 1, 2, 0, 0, 1)), ("v", np.array(0.5, np.float32))])
case("pad_runtime_amounts",
     [node("Shape", ["x"], ["s"]), node("Gather", ["s", "i0"], ["n"], axis=0), node("Sub", ["n", "one"], ["m"]),
      node("Concat", ["z2", "m", "z2", "m"], ["p"], axis=0), node("Pad", ["x", "p"], ["y"])],
     [("x", rand(3, 5, 4), ["N", 5, 4])], ["y"],
     [("i0", ints(0)), ("one", ints(1)), ("z2", ints(0, 0))])
case("slice_negative_steps", [node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
     [("x", rand(3, 17, 5), ["N", 17, 5])], ["y"],
     [("st", ints(-1, 4)), ("en", ints(-(2 ** 63), 0)), ("ax", ints(1, -1)), ("sp", ints(-3, -2))])
case("slice_runtime_ends",
     [node("Shape", ["x"], ["s"]), node("Gather", ["s", "i0"], ["n"], axis=0), node("Mul", ["n", "two"], ["e"]),
      node("Sub", ["e", "one"], ["e1"]), node("Slice", ["x", "st", "e1", "ax"], ["y"])],
     [("x", rand(4, 17), ["N", 17])], ["y"],
     [("i0", ints(0)), ("two", ints(2)), ("one", ints(1)), ("st", ints(1)), ("ax", ints(1))])
case("int_arith_reshape",
     [node("Shape", ["x"], ["s"]), node("Gather", ["s", "i0"], ["a"], axis=0), node("Gather", ["s", "i1"], ["b"], axis=0),
      node("Mul", ["a", "b"], ["ab"]), node("Div", ["ab", "three"], ["q"]), node("Concat", ["q", "three", "two"], ["shape"], axis=0),
      node("Reshape", ["x", "shape"], ["y"])],
     [("x", rand(3, 4, 2), ["N", "M", 2])], ["y"],
     [("i0", ints(0)), ("i1", ints(1)), ("three", ints(3)), ("two", ints(2))])
case("conv_transpose_1d", [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[3], pads=[1, 2], output_padding=[1])],
     [("x", rand(2, 4, 7), ["N", 4, 7])], ["y"], [("w", rand(4, 3, 5)), ("b", rand(3))])
case("conv_transpose_2d_groups_dilated", [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1], pads=[0, 1, 1, 0], dilations=[1, 2], group=2)],
     [("x", rand(1, 4, 3, 5), [1, 4, 3, 5])], ["y"], [("w", rand(4, 3, 2, 3))])
case("random_normal_like_times_zero",
     [node("RandomNormalLike", ["x"], ["r"], seed=3.0), node("Mul", ["r", "zero"], ["m"]), node("Add", ["x", "m"], ["y"])],
     [("x", rand(3, 17), ["N", 17])], ["y"], [("zero", np.array(0.0, np.float32))])
for op in ("Softplus", "Ceil"):
    case(f"unary_{op.lower()}", [node(op, ["x"], ["y"])], [("x", rand(3, 17) * 3, ["N", 17])], ["y"])
case("pad_negative_crops", [node("Pad", ["x", "p"], ["y"])],
     [("x", rand(3, 5, 4), ["N", 5, 4])], ["y"], [("p", ints(0, -1, 1, 0, 2, -2))])
for mode in ("reflect", "edge", "wrap"):
    case(f"pad_{mode}", [node("Pad", ["x", "p"], ["y"], mode=mode)],
         [("x", rand(3, 5, 4), ["N", 5, 4])], ["y"], [("p", ints(0, 4, 1, 0, 2, 3))])
# LSTM (gates iofc, default activations): defaults on a symbolic sequence; both directions with
# biases and initial state; reverse with clip, peepholes and sequence lengths; input_forget;
# only Y_h asked for (onnxruntime has no batch-first layout 1, so the importer refuses it).
H = 5
case("lstm_forward_defaults", [node("LSTM", ["x", "w", "r"], ["y", "yh", "yc"], hidden_size=H)],
     [("x", rand(6, 3, 4), ["S", 3, 4])], ["y", "yh", "yc"], [("w", rand(1, 4 * H, 4)), ("r", rand(1, 4 * H, H))])
case("lstm_bidirectional_state", [node("LSTM", ["x", "w", "r", "b", "", "h", "c"], ["y", "yh", "yc"], hidden_size=H, direction="bidirectional")],
     [("x", rand(4, 2, 3), ["S", 2, 3]), ("h", rand(2, 2, H), [2, 2, H]), ("c", rand(2, 2, H), [2, 2, H])], ["y", "yh", "yc"],
     [("w", rand(2, 4 * H, 3)), ("r", rand(2, 4 * H, H)), ("b", rand(2, 8 * H))])
case("lstm_reverse_clip_peephole_lengths",
     [node("LSTM", ["x", "w", "r", "b", "lens", "", "", "p"], ["y", "yh", "yc"], hidden_size=H, direction="reverse", clip=0.7)],
     [("x", rand(5, 3, 4) * 2, [5, 3, 4])], ["y", "yh", "yc"],
     [("w", rand(1, 4 * H, 4)), ("r", rand(1, 4 * H, H)), ("b", rand(1, 8 * H)), ("lens", np.array([3, 5, 1], np.int32)), ("p", rand(1, 3 * H))])
case("lstm_input_forget", [node("LSTM", ["x", "w", "r", "b"], ["y", "yh", "yc"], hidden_size=H, input_forget=1)],
     [("x", rand(4, 1, 3), ["S", 1, 3])], ["y", "yh", "yc"], [("w", rand(1, 4 * H, 3)), ("r", rand(1, 4 * H, H)), ("b", rand(1, 8 * H))])
case("lstm_yh_only", [node("LSTM", ["x", "w", "r", "", "", "h", "c"], ["", "yh"], hidden_size=H)],
     [("x", rand(7, 2, 3), ["S", 2, 3]), ("h", rand(1, 2, H), [1, 2, H]), ("c", rand(1, 2, H), [1, 2, H])], ["yh"],
     [("w", rand(1, 4 * H, 3)), ("r", rand(1, 4 * H, H))])
print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "cases", len(os.listdir(OUT)))
