"""The Keras 3 training step's XLA program under mixed_bfloat16 (JAX only).

Lowers (does not compile) the step Keras' `fit` jit-compiles, `train_step`,
of a tiny model and counts its `dot_general`s by dtype
(`tests/helpers/stablehlo.py`): under a bfloat16 policy every GEMM should
take bfloat16 operands (the dot accumulates in float32 itself); a float32
GEMM is a GEMM at a fraction of the tensor cores' rate.
"""

import keras
import keras_hub
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_backbone
from realformer_tf.keras3 import masked_lm
from tests.helpers import stablehlo

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "jax",
    reason="lowers a jax.jit step (runs in the JAX re-run of tests/keras3)")

LAYERS, SEQ, BATCH, MASKED = 2, 16, 2, 4
# Per encoder layer: Q, K, V, scores, P V, output, FFN in, FFN out (8), each
# with two gradient GEMMs; plus the MLM head's dense (3) and the tied logits
# (3).
ENCODER_DOTS = LAYERS * 8 * 3


def _kwargs():
  return dict(vocabulary_size=64, num_layers=LAYERS, num_heads=2,
              hidden_dim=16, intermediate_dim=32, max_sequence_length=SEQ)


def _inputs():
  ids = np.arange(BATCH * SEQ, dtype="int32").reshape(BATCH, SEQ) % 60 + 1
  mask = np.ones_like(ids)
  mask[:, -SEQ // 8:] = 0
  return {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}


def _counts(model, x, y):
  model.compile(optimizer=keras.optimizers.AdamW(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True), jit_compile=True)
  model._symbolic_build(data_batch=(x, y))  # pylint: disable=protected-access
  state = model._get_jax_state(  # pylint: disable=protected-access
      trainable_variables=True, non_trainable_variables=True,
      optimizer_variables=True, metrics_variables=True)
  import jax  # pylint: disable=g-import-not-at-top
  text = jax.jit(model.train_step).lower(state, (x, y)).as_text()
  return stablehlo.count_ops(text)


def _dots(model, x, y):
  return _counts(model, x, y)["dot_general"]


def _tied_logits_model(backbone):
  """The benchmark's head (benchmarks/keras3_fit.py) on `backbone`."""
  every_8th = backbone.output["sequence_output"][:, ::8]
  logits = backbone.token_embedding(every_8th, reverse=True)
  return keras.Model(backbone.input, keras.layers.Activation(
      "linear", dtype="float32")(logits))


def _masked_lm_dots(task_cls, backbone):
  task = task_cls(backbone, preprocessor=None)
  x = dict(_inputs(), mask_positions=np.tile(
      np.arange(0, 2 * MASKED, 2, dtype="int32"), (BATCH, 1)))
  return _dots(task, x, np.zeros((BATCH, MASKED), "int32"))


@pytest.mark.parametrize("mode", ["sum", "none"])
def test_masked_lm_step_has_no_float32_gemm_but_the_segment_lookup(mode):
  keras.config.set_dtype_policy("mixed_bfloat16")
  backbone = backbone_lib.RealFormerBackbone(residual_attention=mode,
                                             **_kwargs())
  dots = _masked_lm_dots(masked_lm.RealFormerMaskedLM, backbone)
  # + the segment table's one-hot GEMM and its gradient (float32: the
  # table's dtype, `keras3/embeddings.py`).
  assert dots == {"bf16,bf16->bf16": ENCODER_DOTS + 3 + 3,
                  "f32,f32->f32": 2}, dots


def test_masked_lm_float32_policy_keeps_float32_gemms():
  backbone = backbone_lib.RealFormerBackbone(**_kwargs())
  dots = _masked_lm_dots(masked_lm.RealFormerMaskedLM, backbone)
  assert dots == {"f32,f32->f32": ENCODER_DOTS + 3 + 3 + 2}, dots


def test_keras_hub_bert_masked_lm_ties_logits_in_float32():
  # keras-hub 0.32's own head: `Embedding` does not autocast its table, so
  # the tied logits and their two gradient GEMMs run in float32 (the finding
  # README's table names as keras-hub's; RealFormerMaskedLM sets
  # `reverse_dtype`). If this fails, keras-hub changed: update the README.
  keras.config.set_dtype_policy("mixed_bfloat16")
  backbone = keras_hub.models.BertBackbone(**_kwargs())
  dots = _masked_lm_dots(keras_hub.models.BertMaskedLM, backbone)
  assert dots == {"bf16,bf16->bf16": ENCODER_DOTS + 3, "f32,f32->f32": 3}, dots


def test_backbone_tied_logits_step_has_no_float32_gemm_but_the_segment_lookup():
  # The benchmark's head (benchmarks/keras3_fit.py): the backbone's
  # `sequence_output` straight into `token_embedding(x, reverse=True)`, as a
  # user ties a head by hand. A float32 `sequence_output` under a bfloat16
  # policy (Model Garden's rule) promotes that GEMM and its gradients to
  # float32; keras-hub's dtype rules (compute-dtype hidden stream) do not.
  keras.config.set_dtype_policy("mixed_bfloat16")
  backbone = backbone_lib.RealFormerBackbone(**_kwargs())
  model = _tied_logits_model(backbone)
  dots = _dots(model, _inputs(), np.zeros((BATCH, SEQ // 8), "int32"))
  # + the segment table's one-hot GEMM and its gradient (float32: the
  # table's dtype, `keras3/embeddings.py`).
  assert dots == {"bf16,bf16->bf16": ENCODER_DOTS + 3,
                  "f32,f32->f32": 2}, dots


@pytest.mark.parametrize("decoder", [False, True])
def test_embedding_gradients_have_no_scatter(decoder):
  # Issue 36: keras-hub's BERT scatter-adds its token and segment gradients
  # in bfloat16 (55-68 ms of a 117 ms BERT-Base step on an H200); ours sort.
  keras.config.set_dtype_policy("mixed_bfloat16")
  if decoder:
    backbone = decoder_backbone.RealFormerDecoderBackbone(
        **{k: v for k, v in _kwargs().items()})
    x = {k: v for k, v in _inputs().items() if k != "segment_ids"}
    every_8th = backbone.output[:, ::8]
    model = keras.Model(backbone.input, keras.layers.Activation(
        "linear", dtype="float32")(
            backbone.token_embedding(every_8th, reverse=True)))
  else:
    model, x = _tied_logits_model(
        backbone_lib.RealFormerBackbone(**_kwargs())), _inputs()
  counts = _counts(model, x, np.zeros((BATCH, SEQ // 8), "int32"))
  assert counts["scatter"] == {}, counts["scatter"]


def test_keras_hub_bert_scatters_its_embedding_gradients_in_bfloat16():
  # keras-hub 0.32 / Keras 3.15.1 (keras/src/layers/layer.py:995-997): the
  # tables read in bfloat16 at the top level of a functional model, so both
  # lookups' gradients are bfloat16 scatter-adds. If this fails, Keras or
  # keras-hub changed: update docs/keras3.md.
  keras.config.set_dtype_policy("mixed_bfloat16")
  model = _tied_logits_model(keras_hub.models.BertBackbone(**_kwargs()))
  counts = _counts(model, _inputs(), np.zeros((BATCH, SEQ // 8), "int32"))
  assert counts["scatter"] == {"bf16": 2}, counts["scatter"]
