r"""The paper's comparison in one command, on either face: Post-LN vs Pre-LN
vs RealFormer, pre-training then GLUE (and SQuAD v1.1) fine-tuning, then the
report.

  python -m realformer_tf.reproduce --output_dir=OUT [--face=tf_keras|keras3]
    [--size=tiny|mini|small|base|large] [--seeds=3] [--dry_run]

One plan (`plan`), one executor (`run`: lock, skip-if-done, resume), one
report (`report`); a face (`tf_keras_face`, `keras3_face`) supplies its data,
its pre-training and fine-tuning steps and its attention analysis.
"""
