r"""The paper's comparison in one command: Post-LN vs Pre-LN vs RealFormer.

  python -m realformer_tf.reproduce --output_dir=OUT [--scale=tiny|small|...]

Data, pre-training per seed and architecture, the GLUE grid, the attention
analysis and `results.md` (paper Tables 2-3), each step skipped when its
output is there; `--dry_run` prints the plan. Modules: `plan`, `run`, `report`.
"""
