"""The Post-LN / Pre-LN body of a Transformer block, written once.

Every block of both faces is a chain of sub-layers, each wrapped the same way:

    Post-LN (BERT, RealFormer):  hidden = norm(hidden + sublayer(hidden))
    Pre-LN:                      hidden = hidden + sublayer(norm(hidden))
"""


def residual_add(ops, source, output):
  """`source + output`, in float32 if either is (as Model Garden adds)."""
  source_dtype, output_dtype = ops.dtype(source), ops.dtype(output)
  if source_dtype != output_dtype:
    dtype = "float32" if "float32" in (source_dtype, output_dtype) else (
        output_dtype)
    source, output = ops.cast(source, dtype), ops.cast(output, dtype)
  return ops.add(source, output)


def chain(*layers):
  """`inputs -> layers[-1](...layers[0](inputs))`: a feed-forward sub-layer."""
  def sublayer(inputs):
    for layer in layers:
      inputs = layer(inputs)
    return inputs
  return sublayer


def _dropout(layer, training):
  return lambda inputs: layer(inputs, training=training)


# Both faces' blocks keep Model Garden's sub-layer attribute names, so one
# wiring serves them: the encoder block's, then the decoder block's.
def encoder_sublayers(block, attention, training):
  """`(norm, sublayer)` pairs of an encoder block; `attention(inputs)`."""
  # pylint: disable=protected-access
  return ((block._attention_layer_norm,
           chain(attention, _dropout(block._attention_dropout, training))),
          (block._output_layer_norm,
           chain(block._intermediate_dense,
                 block._intermediate_activation_layer, block._output_dense,
                 _dropout(block._output_dropout, training))))


def decoder_sublayers(block, self_attention, cross_attention, training):
  """`(norm, sublayer)` pairs of a decoder block; `cross_attention` or None."""
  # pylint: disable=protected-access
  pairs = [(block.self_attention_layer_norm,
            chain(self_attention,
                  _dropout(block.self_attention_dropout, training)))]
  if cross_attention is not None:
    pairs.append((block.encdec_attention_layer_norm,
                  chain(cross_attention,
                        _dropout(block.encdec_attention_dropout, training))))
  # The Keras 3 block's intermediate Dense applies the activation itself.
  activation = getattr(block, "intermediate_activation_layer", None)
  pairs.append((block.output_layer_norm, chain(*(
      layer for layer in (block.intermediate_dense, activation,
                          _dropout(block._intermediate_dropout_layer, training),
                          block.output_dense,
                          _dropout(block.output_dropout, training))
      if layer is not None))))
  return pairs


def residual_sublayers(ops, hidden, sublayers, norm_first: bool, crop=None):
  """`hidden` through `(norm, sublayer)` pairs, Post-LN or Pre-LN.

  `sublayers`: (LayerNorm, `inputs -> output` with its dropout) pairs;
  `crop`: applied to the first residual source when the first sub-layer
  returns fewer rows (the encoder's `output_range`).
  """
  for i, (norm, sublayer) in enumerate(sublayers):
    output = sublayer(norm(hidden) if norm_first else hidden)
    source = crop(hidden) if crop is not None and i == 0 else hidden
    hidden = residual_add(ops, source, output)
    if not norm_first:
      hidden = norm(hidden)
  return hidden
