r"""The paper's comparison on the Keras 3 face, on JAX: Post-LN vs Pre-LN vs
RealFormer, sized for one GPU, with no TensorFlow anywhere.

  KERAS_BACKEND=jax python -m realformer_tf.reproduce.keras3 \
    --output_dir=OUT [--size=small|tiny] [--corpus=FILES] \
    [--archs=post_ln,pre_ln,realformer] [--seeds=1] [--train_steps=N] \
    [--dry_run]

`--size=small` (the default): BERT-Small (4 layers x 512, 8 heads, FFN
2048), seq 128, batch 128, 2,000 steps per architecture, mixed bfloat16 on
a GPU (sized for the three in under 5 minutes on one H100/H200, issue 36's
target); `--size=tiny`: 2 x 32, for a CPU (the CI smoke test). In order, each step skipped when its output is
there, so a killed command run again carries on: the data, once (`OUT/data`:
the quickstart's shipped stdlib corpus or `--corpus`, split as the
quickstart splits it, a WordPiece vocabulary learned as the quickstart
learns it, the token ids packed into `[CLS] ... [SEP]` sequences; pure
Python and NumPy, `data`); per seed and architecture, pre-training
(`OUT/<arch>/seed<S>`: the same batches, masks and initial weights for every
architecture, a checkpoint every `--checkpoint_steps` that a rerun resumes
from, `train`); then `results.md` (paper Table 2: held-out masked LM accuracy
and loss, with the ordering), `results.json` and `curves.png` (`report`,
with the tf_keras reproduction's `tables`). `--dry_run` prints the plan and
touches nothing.

Masked LM only: keras-hub's `MaskedLM` task has no next-sentence head (the
tf_keras reproduction trains MLM + NSP), so the sequences are packed
document text, with BERT's masking (15% of the tokens, at most
`max_predictions`; 80% [MASK], 10% random, 10% kept) drawn per step from a
seeded NumPy generator, fresh masks every step.

Modules: `plan` (sizes, options, the dry run), `data`, `train`, `report`,
`run` (one writer per output dir, the order above), `__main__` (flags).
"""
