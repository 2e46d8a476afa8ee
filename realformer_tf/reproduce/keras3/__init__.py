r"""The paper's comparison on the Keras 3 face, on JAX, without TensorFlow.

  KERAS_BACKEND=jax python -m realformer_tf.reproduce.keras3 --output_dir=OUT

Post-LN vs Pre-LN vs RealFormer, BERT-Small sized for one GPU (`--size=tiny`
for a CPU), masked LM only (keras-hub's `MaskedLM` has no NSP head); each
step is skipped when its output is there (`plan`, `data`, `train`, `run`).
"""
