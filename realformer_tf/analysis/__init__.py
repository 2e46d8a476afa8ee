"""Attention analysis of trained RealFormer encoders (paper Figures 3-4).

`python -m realformer_tf.analysis --model_dir=DIR --output_dir=OUT` writes
per-head violin plots of attention entropy (`entropy.png`) and of the
Jensen-Shannon divergence between vertically adjacent heads (`jsd.png`), plus
`summary.json`. See `runner.py` for the pipeline and `metrics.py` for the
exact definitions.
"""
