"""tf2onnx handlers for the two TensorFlow ops of our layers that tf2onnx 1.17 does not convert.

``BlockLSTM`` (the fused LSTM kernel of :class:`~delft.sequenceLabelling.layers.bilstm.BiLSTM`)
becomes ONNX's own ``LSTM`` operator and ``UniqueV2`` (the de-duplication of token rows in
:class:`~delft.sequenceLabelling.layers.char_encoder.CharEncoder`) ONNX's ``Unique``. Both map one
op to one fused ONNX op: ONNX Runtime then runs a whole LSTM direction in one kernel, where a
formulation from standard ops would become an ONNX ``Loop`` over time steps, several kernel
calls per step (doc/export.md, "Converters"). The handlers are passed per conversion
(``custom_op_handlers``): importing this module registers nothing globally.
"""
import numpy as np

# BlockLSTM's gate blocks are (input, cell input, forget, output); ONNX LSTM's (input, output,
# forget, cell): ONNX block k is BlockLSTM block _ONNX_GATE_ORDER[k]
_ONNX_GATE_ORDER = (0, 3, 2, 1)
# ONNX LSTM's forget gate block, where BlockLSTM's ``forget_bias`` attribute is added to the bias
_ONNX_FORGET_BLOCK = 2


def _gate_permutation(units):
    """Column indices turning BlockLSTM's 4 gate blocks of ``units`` into ONNX's order."""
    return np.concatenate([np.arange(block * units, (block + 1) * units)
                           for block in _ONNX_GATE_ORDER]).astype(np.int64)


def convert_block_lstm(ctx, node, name, args):
    """tf2onnx handler: one ``BlockLSTM`` -> one forward ONNX ``LSTM`` (hidden states ``h`` only).

    ``BlockLSTM(seq_len_max, x [T, B, I], cs_prev [B, H], h_prev [B, H], w [I + H, 4H], wci, wcf,
    wco, b [4H])`` computes ``[i, ci, f, o] = [x, h] @ w + b``, ``f += forget_bias``, with sigmoid
    gates and tanh cell activations, which is ONNX's LSTM with the default activations once the
    gate blocks are reordered. Steps at or past ``seq_len_max`` are zeros in both (ONNX
    ``sequence_lens``). Only output 6 (``h``) may be used: the layer reads nothing else.

    Args:
        ctx: the tf2onnx graph being converted.
        node: the ``BlockLSTM`` node.
        name: the op type (unused; the tf2onnx handler signature).
        args: handler arguments (unused).

    Raises:
        ValueError: peepholes, cell clipping, a consumed gate output or an unknown weight shape.
    """
    from tf2onnx.graph_builder import GraphBuilder
    from onnx import TensorProto

    seq_len_max, x, cs_prev, h_prev, w, _wci, _wcf, _wco, b = node.input
    if node.get_attr_value("use_peephole", False):
        raise ValueError(f"{node.name}: BlockLSTM with peepholes has no ONNX LSTM equivalent here")
    if node.get_attr_value("cell_clip", -1.0) > 0:
        raise ValueError(f"{node.name}: BlockLSTM with cell clipping has no exact ONNX equivalent")
    for index, output in enumerate(node.output[:6]):
        if ctx.find_output_consumers(output):
            raise ValueError(f"{node.name}: output {index} of BlockLSTM is used; only h is "
                             "converted")
    w_shape = ctx.get_shape(w)
    if w_shape is None or len(w_shape) != 2 or min(w_shape) <= 0 or w_shape[1] % 4:
        raise ValueError(f"{node.name}: BlockLSTM weights of unknown shape {w_shape}")
    units = w_shape[1] // 4
    features = w_shape[0] - units
    forget_bias = float(node.get_attr_value("forget_bias", 1.0))
    builder = GraphBuilder(ctx)

    def const(label, value):
        return ctx.make_const(f"{node.name}/{label}", value).output[0]

    columns = const("gate_order", _gate_permutation(units))

    def onnx_weights(rows, label):
        # rows of w -> [1, 4H, rows] in ONNX gate order
        picked = ctx.make_node("Gather", [w, const(f"{label}_rows", rows)], attr={"axis": 0})
        ordered = ctx.make_node("Gather", [picked.output[0], columns], attr={"axis": 1})
        transposed = ctx.make_node("Transpose", [ordered.output[0]], attr={"perm": [1, 0]})
        return builder.make_unsqueeze({"data": transposed.output[0], "axes": [0]})

    input_weights = onnx_weights(np.arange(features, dtype=np.int64), "input")
    recurrent_weights = onnx_weights(np.arange(features, features + units, dtype=np.int64),
                                     "recurrent")
    offsets = np.zeros(8 * units, np.float32)
    offsets[_ONNX_FORGET_BLOCK * units:(_ONNX_FORGET_BLOCK + 1) * units] = forget_bias
    ordered_bias = ctx.make_node("Gather", [b, columns], attr={"axis": 0})
    # ONNX adds an input bias and a recurrent bias: ours goes in the first, zeros in the second
    recurrent_bias = const("recurrent_bias", np.zeros(4 * units, np.float32))
    padded_bias = ctx.make_node("Concat", [ordered_bias.output[0], recurrent_bias],
                                attr={"axis": 0})
    bias = ctx.make_node("Add", [padded_bias.output[0], const("forget_bias", offsets)])
    bias = builder.make_unsqueeze({"data": bias.output[0], "axes": [0]})
    batch = builder.make_slice({"data": ctx.make_node("Shape", [x]).output[0],
                                "starts": [1], "ends": [2], "axes": [0]})
    max_steps = ctx.make_node("Cast", [seq_len_max], attr={"to": TensorProto.INT32})
    batch_steps = ctx.make_node("Expand", [max_steps.output[0], batch])
    lstm = ctx.make_node(
        "LSTM", [x, input_weights, recurrent_weights, bias, batch_steps.output[0],
                 builder.make_unsqueeze({"data": h_prev, "axes": [0]}),
                 builder.make_unsqueeze({"data": cs_prev, "axes": [0]})],
        attr={"hidden_size": units, "direction": "forward"}, output_count=3,
        op_name_scope=node.name)
    # Y is [T, directions=1, B, H]: h as BlockLSTM gives it is [T, B, H]
    hidden = builder.make_squeeze({"data": lstm.output[0], "axes": [1]})
    ctx.replace_all_inputs(node.output[6], hidden)
    ctx.copy_dtype(node.output[6], hidden)
    ctx.copy_shape(node.output[6], hidden)


def convert_unique_v2(ctx, node, name, args):
    """tf2onnx handler: ``UniqueV2(x, axis)`` with a constant axis -> ONNX ``Unique(axis)``.

    TF keeps the distinct elements in order of first occurrence, as ONNX ``Unique`` with
    ``sorted=0`` does; ``idx`` is ONNX's ``inverse_indices``. Integer inputs go through int64,
    the type ONNX Runtime implements.

    Args:
        ctx: the tf2onnx graph being converted.
        node: the ``UniqueV2`` node.
        name: the op type (unused).
        args: handler arguments (unused).

    Raises:
        ValueError: a non-constant or multi-axis ``axis``.
    """
    from onnx import TensorProto

    x, axis = node.input
    axis_node = ctx.get_node_by_output(axis)
    if not axis_node.is_const() or axis_node.get_tensor_value(as_list=False).size != 1:
        raise ValueError(f"{node.name}: UniqueV2 needs one constant axis")
    axis_value = int(axis_node.get_tensor_value(as_list=False).reshape(-1)[0])
    dtype = ctx.get_dtype(x)
    values = ctx.make_node("Cast", [x], attr={"to": TensorProto.INT64}).output[0]
    unique = ctx.make_node("Unique", [values], attr={"axis": axis_value, "sorted": 0},
                           output_count=4, op_name_scope=node.name)
    distinct = ctx.make_node("Cast", [unique.output[0]], attr={"to": dtype}).output[0]
    index_type = node.get_attr_value("out_idx", TensorProto.INT32)
    position = ctx.make_node("Cast", [unique.output[2]], attr={"to": index_type}).output[0]
    for old, new in ((node.output[0], distinct), (node.output[1], position)):
        ctx.replace_all_inputs(old, new)
        ctx.copy_dtype(old, new)
        ctx.copy_shape(old, new)


CUSTOM_OP_HANDLERS = {"BlockLSTM": (convert_block_lstm, []),
                      "UniqueV2": (convert_unique_v2, [])}
