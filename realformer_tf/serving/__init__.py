"""SavedModel export and serving of trained RealFormer runs.

`python -m realformer_tf.serving.export` writes a SavedModel for a run's head.
Submodules are not imported here.
"""
