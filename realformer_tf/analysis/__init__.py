"""Attention analysis of trained RealFormer encoders (paper Figures 3-4).

`python -m realformer_tf.analysis` writes per-head violin plots of attention
entropy and adjacent-head JSD plus `summary.json`; `metrics.py` defines them.
"""
