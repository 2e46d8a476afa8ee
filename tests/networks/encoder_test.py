"""Tests for RealFormerEncoder."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import networks
from realformer_tf.networks import encoder as encoder_lib
from tests.helpers import layer_checks as layer_test_utils
from tests.helpers import numpy_reference

_KW = dict(vocab_size=50, hidden_size=32, num_layers=3, num_attention_heads=4,
           inner_dim=64, max_sequence_length=16, type_vocab_size=2)


def _inputs(batch=3, seq=8, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, _KW["vocab_size"], size=(batch, seq)).astype(np.int32)
  mask = np.ones((batch, seq), np.int32)
  mask[1, 5:] = 0  # padding
  mask[2, 3:] = 0
  ids = ids * mask
  types = np.zeros_like(ids)
  types[:, seq // 2:] = 1
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


class RealFormerEncoderTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("sum", "sum", False), ("mean", "mean", False), ("none", "none", False),
      ("pre_ln_sum", "sum", True), ("pre_ln_none", "none", True))
  def test_matches_numpy(self, mode, norm_first):
    encoder = encoder_lib.RealFormerEncoder(
        residual_attention=mode, norm_first=norm_first, return_attention_scores=True,
        **_KW)
    inputs = _inputs()
    out = encoder(inputs)
    seq, pooled, scores, probs = numpy_reference.encoder(
        encoder, inputs["input_word_ids"], inputs["input_mask"],
        inputs["input_type_ids"], mode, norm_first=norm_first,
        final_layer_norm=norm_first)
    self.assertAllClose(seq, out["sequence_output"], atol=1e-5)
    self.assertAllClose(pooled, out["pooled_output"], atol=1e-5)
    self.assertLen(out["encoder_outputs"], 3)
    for i in range(3):
      self.assertAllClose(scores[i], out["residual_scores"][i], atol=1e-5)
      self.assertAllClose(probs[i], out["attention_scores"][i], atol=1e-5)

  def test_running_sum_is_sum_of_layer_scores(self):
    encoder = encoder_lib.RealFormerEncoder(
        return_attention_scores=True, **_KW)
    out = encoder(_inputs())
    scores = [s.numpy() for s in out["residual_scores"]]
    # Scores grow as a running sum: layer l's own part is S_l - S_{l-1}.
    own = [scores[0]] + [b - a for a, b in zip(scores, scores[1:])]
    self.assertAllClose(sum(own), scores[-1], atol=1e-5)

  @parameterized.parameters(False, True)
  def test_none_matches_bert_encoder_v2_and_checkpoints_both_ways(
      self, norm_first):
    inputs = _inputs()
    bert = networks.BertEncoderV2(norm_first=norm_first, **_KW)
    rf = encoder_lib.RealFormerEncoder(
        residual_attention="none", norm_first=norm_first,
        final_layer_norm=False, **_KW)
    want = bert(inputs)
    rf(inputs)
    tmp = self.get_temp_dir()
    path = tf.train.Checkpoint(encoder=bert).write(os.path.join(tmp, "bert"))
    tf.train.Checkpoint(encoder=rf).read(path).assert_consumed()
    got = rf(inputs)
    for key in ("sequence_output", "pooled_output"):
      self.assertAllClose(want[key], got[key], atol=1e-5)
    for a, b in zip(want["encoder_outputs"], got["encoder_outputs"]):
      self.assertAllClose(a, b, atol=1e-5)

    # And back: a RealFormer checkpoint restores into BertEncoderV2.
    rf_trained = encoder_lib.RealFormerEncoder(
        residual_attention="sum", norm_first=norm_first,
        final_layer_norm=False, **_KW)
    rf_trained(inputs)
    path = tf.train.Checkpoint(encoder=rf_trained).write(
        os.path.join(tmp, "rf"))
    bert2 = networks.BertEncoderV2(norm_first=norm_first, **_KW)
    bert2(inputs)
    tf.train.Checkpoint(encoder=bert2).read(path).assert_consumed()
    for a, b in zip(rf_trained.weights, bert2.weights):
      self.assertAllEqual(a.numpy(), b.numpy())

  def test_attention_scores_are_bert_encoder_v2s_probabilities(self):
    inputs = _inputs()
    bert = networks.BertEncoderV2(return_attention_scores=True, **_KW)
    rf = encoder_lib.RealFormerEncoder(
        residual_attention="none", return_attention_scores=True, **_KW)
    want = bert(inputs)
    rf(inputs)
    path = tf.train.Checkpoint(encoder=bert).write(
        os.path.join(self.get_temp_dir(), "bert"))
    tf.train.Checkpoint(encoder=rf).read(path).assert_consumed()
    got = rf(inputs)
    self.assertEqual(set(want) | {"residual_scores"}, set(got))
    self.assertLen(got["attention_scores"], 3)
    for a, b in zip(want["attention_scores"], got["attention_scores"]):
      self.assertAllClose(a, b, atol=1e-5)

  def test_get_config_round_trips_every_argument(self):
    args = dict(
        vocab_size=40, hidden_size=16, num_layers=2, num_attention_heads=2,
        max_sequence_length=12, type_vocab_size=3, inner_dim=24,
        inner_activation="relu", output_dropout=0.2, attention_dropout=0.3,
        initializer=tf_keras.initializers.TruncatedNormal(stddev=0.05),
        output_range=1, embedding_width=8, embedding_layer=None,
        norm_first=True, with_dense_inputs=True, return_attention_scores=True,
        return_word_embeddings=True, residual_attention="mean",
        final_layer_norm=False, norm_epsilon=1e-6, score_dtype="compute",
        recompute=True)
    encoder = encoder_lib.RealFormerEncoder(**args)
    config = encoder.get_config()
    # Plus the base layer's config, as every Keras layer.
    self.assertEqual(set(args) | {"name", "trainable", "dtype"}, set(config))
    clone = encoder_lib.RealFormerEncoder.from_config(config)
    self.assertEqual(config, clone.get_config())
    for key in args:
      if key not in ("inner_activation", "initializer"):
        self.assertEqual(args[key], config[key], key)
    self.assertEqual(0.05, config["initializer"]["config"]["stddev"])

  def test_accepts_bert_encoder_v2_aliases(self):
    aliases = dict(intermediate_size=24, activation="relu", dropout_rate=0.2,
                   attention_dropout_rate=0.3)
    kw = {k: v for k, v in _KW.items() if k != "inner_dim"}
    bert = networks.BertEncoderV2(**kw, **aliases).get_config()
    config = encoder_lib.RealFormerEncoder(**kw, **aliases).get_config()
    for ours, theirs in (("inner_dim", 24), ("output_dropout", 0.2),
                         ("attention_dropout", 0.3)):
      self.assertEqual(theirs, config[ours], ours)
      self.assertEqual(bert[ours], config[ours], ours)
    self.assertEqual("relu", config["inner_activation"])
    self.assertNotIn("intermediate_size", config)
    with self.assertRaises(TypeError):  # Not an alias: still refused.
      encoder_lib.RealFormerEncoder(**_KW, hidden_dropout_prob=0.1)

  def test_default_activation_round_trips_as_tanh_gelu(self):
    encoder = encoder_lib.RealFormerEncoder(**_KW)
    clone = encoder_lib.RealFormerEncoder.from_config(
        encoder.get_config())
    inputs = _inputs()
    encoder(inputs)
    clone(inputs)
    clone.set_weights(encoder.get_weights())
    self.assertAllClose(encoder(inputs)["sequence_output"],
                        clone(inputs)["sequence_output"], atol=1e-6)

  def test_output_range_and_dense_inputs_and_embedding_projection(self):
    kw = dict(_KW, embedding_width=8)
    inputs = _inputs()
    full = encoder_lib.RealFormerEncoder(**kw)
    want = full(inputs)["sequence_output"]
    ranged = encoder_lib.RealFormerEncoder(output_range=1, **kw)
    ranged(inputs)
    ranged.set_weights(full.get_weights())
    got = ranged(inputs)["sequence_output"]
    self.assertEqual((3, 1, 32), tuple(got.shape))
    self.assertAllClose(want[:, :1], got, atol=1e-5)

    dense = encoder_lib.RealFormerEncoder(with_dense_inputs=True, **kw)
    dense_inputs = dict(
        inputs, dense_inputs=np.ones((3, 2, 8), np.float32),
        dense_mask=np.ones((3, 2), np.int32),
        dense_type_ids=np.zeros((3, 2), np.int32))
    self.assertEqual((3, 10, 32),
                     tuple(dense(dense_inputs)["sequence_output"].shape))

  def test_functional_model_saved_model_round_trip_in_fresh_process(self):
    encoder = encoder_lib.RealFormerEncoder(**_KW)
    model = tf_keras.Model(encoder.inputs, encoder(encoder.inputs))
    inputs = _inputs()
    want = model(inputs)
    tmp = self.get_temp_dir()
    export = os.path.join(tmp, "saved_model")
    model.save(export, include_optimizer=False)
    np.savez(os.path.join(tmp, "inputs.npz"), **inputs)
    layer_test_utils.run_in_fresh_process(f"""
        import numpy as np, tensorflow as tf, tf_keras
        import realformer_tf  # registers the serializable classes
        inputs = dict(np.load({tmp!r} + "/inputs.npz"))
        keras_model = tf_keras.models.load_model({export!r})
        out = keras_model(inputs)
        loaded = tf.saved_model.load({export!r})
        served = loaded({{k: tf.constant(v) for k, v in inputs.items()}})
        np.savez({tmp!r} + "/out.npz", seq=out["sequence_output"],
                 pooled=out["pooled_output"],
                 served_seq=served["sequence_output"])
    """)
    out = np.load(os.path.join(tmp, "out.npz"))
    self.assertAllClose(want["sequence_output"], out["seq"], atol=1e-6)
    self.assertAllClose(want["pooled_output"], out["pooled"], atol=1e-6)
    self.assertAllClose(want["sequence_output"], out["served_seq"], atol=1e-6)

  def test_training_step_under_xla_matches_eager(self):
    inputs = {k: tf.constant(v) for k, v in _inputs().items()}

    def make():
      tf_keras.utils.set_random_seed(3)
      encoder = encoder_lib.RealFormerEncoder(
          output_dropout=0.0, attention_dropout=0.0, **_KW)
      encoder(inputs)
      # SGD: Adam's m/sqrt(v) turns float noise in ~0 gradients into full steps.
      return encoder, tf_keras.optimizers.SGD(0.5)

    def step(encoder, optimizer):
      with tf.GradientTape() as tape:
        out = encoder(inputs, training=True)
        loss = tf.reduce_mean(out["sequence_output"] ** 2) + tf.reduce_mean(
            out["pooled_output"])
      grads = tape.gradient(loss, encoder.trainable_variables)
      optimizer.apply_gradients(zip(grads, encoder.trainable_variables))
      return loss

    eager_encoder, eager_opt = make()
    xla_encoder, xla_opt = make()
    xla_step = tf.function(step, jit_compile=True)
    for _ in range(3):
      eager_loss = step(eager_encoder, eager_opt)
      xla_loss = xla_step(xla_encoder, xla_opt)
      self.assertAllClose(eager_loss, xla_loss, atol=1e-5, rtol=1e-5)
    for a, b in zip(eager_encoder.weights, xla_encoder.weights):
      self.assertAllClose(a, b, atol=1e-4, rtol=1e-4)

  @parameterized.parameters(False, True)
  def test_xla_training_draws_only_seed_words(self, recompute):
    # Every dropout of the encoder (embeddings, attention probabilities,
    # hidden states) hashes under XLA: no random op of an activation's size.
    # Recomputed blocks use Model Garden's stateless RecomputingDropout.
    encoder = encoder_lib.RealFormerEncoder(
        recompute=recompute, **_KW)
    inputs = {k: tf.constant(v) for k, v in _inputs().items()}
    step = tf.function(lambda x: encoder(x, training=True)["sequence_output"],
                       jit_compile=True)
    shapes = layer_test_utils.random_op_shapes(step, inputs)
    # The embeddings' dropout (outside the recomputed blocks), then 3 layers
    # x (probabilities, 2 hidden states) unless the blocks recompute.
    self.assertEqual(["s32[2]"] * (1 if recompute else 10), shapes)

  @parameterized.parameters(("mixed_float16", tf.float32),
                            ("mixed_bfloat16", tf.bfloat16))
  def test_mixed_precision(self, policy, score_dtype):
    inputs = _inputs()
    inputs["input_mask"][0] = 0  # a row whose keys are all masked
    with layer_test_utils.mixed_precision_scope(policy):
      encoder = encoder_lib.RealFormerEncoder(
          return_attention_scores=True, **_KW)
      out = encoder(inputs)
    for scores in out["residual_scores"]:
      self.assertEqual(score_dtype, scores.dtype)  # score_dtype="auto"
    for t in tf.nest.flatten(out):
      self.assertTrue(np.all(np.isfinite(tf.cast(t, tf.float32).numpy())))

  def test_deep_float16_encoder_stays_finite(self):
    inputs = _inputs()
    with layer_test_utils.mixed_precision_scope("mixed_float16"):
      encoder = encoder_lib.RealFormerEncoder(
          return_attention_scores=True,
          **dict(_KW, num_layers=24, hidden_size=16, num_attention_heads=2,
                 inner_dim=32))
      out = encoder(inputs, training=True)
    for t in tf.nest.flatten(out):
      self.assertTrue(np.all(np.isfinite(tf.cast(t, tf.float32).numpy())))

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, "hidden_size: width 30 is not divisible "
                                "by num_attention_heads=4"):
      encoder_lib.RealFormerEncoder(**dict(_KW, hidden_size=30))
    with self.assertRaisesRegex(ValueError, "residual_attention.*'add'"):
      encoder_lib.RealFormerEncoder(residual_attention="add", **_KW)
    encoder = encoder_lib.RealFormerEncoder(**_KW)
    inputs = _inputs()
    with self.assertRaisesRegex(ValueError, "input_mask must have rank 2"):
      encoder(dict(inputs, input_mask=inputs["input_mask"][:, None]))
    with self.assertRaisesRegex(ValueError, r"missing inputs \['input_type_ids'\]"):
      encoder(dict(input_word_ids=inputs["input_word_ids"],
                   input_mask=inputs["input_mask"]))


  def test_recompute_same_outputs_and_gradients(self):
    kw = dict(_KW, output_dropout=0.0, attention_dropout=0.0)
    encoders = [encoder_lib.RealFormerEncoder(recompute=r, **kw)
                for r in (False, True)]
    inputs = _inputs()
    encoders[0](inputs)
    encoders[1](inputs)
    encoders[1].set_weights(encoders[0].get_weights())

    def run(encoder):
      with tf.GradientTape() as tape:
        out = encoder(inputs, training=True)
        loss = (tf.reduce_sum(out["sequence_output"] ** 2) +
                tf.reduce_sum(out["pooled_output"]))
      grads = tape.gradient(loss, encoder.trainable_variables)
      # Embedding gradients are IndexedSlices; compare them densely.
      return [out["sequence_output"]] + [tf.convert_to_tensor(g)
                                         for g in grads]

    want = run(encoders[0])
    got = tf.function(run)(encoders[1])
    self.assertLen(got, len(want))
    self.assertAllClose(want[0], got[0], atol=1e-5)
    # Gradients of a loss summed over the batch: float32 reassociation only.
    for a, b in zip(want[1:], got[1:]):
      self.assertAllClose(a, b, atol=1e-4, rtol=1e-4)

  def test_score_dtype_compute_under_bfloat16(self):
    inputs = _inputs()
    with layer_test_utils.mixed_precision_scope("mixed_bfloat16"):
      encoder = encoder_lib.RealFormerEncoder(
          return_attention_scores=True, score_dtype="compute", **_KW)
      out = encoder(inputs)
    for scores in out["residual_scores"]:
      self.assertEqual(tf.bfloat16, scores.dtype)
    for t in tf.nest.flatten(out):
      self.assertTrue(np.all(np.isfinite(tf.cast(t, tf.float32).numpy())))

if __name__ == "__main__":
  tf.test.main()
