"""SavedModel export and serving of trained RealFormer runs.

`python -m realformer_tf.serving.export` writes a SavedModel for the head a run
trained (pre-training MLM/NSP, GLUE, SQuAD); `serving_modules` holds the
export modules (subclasses of Model Garden's) and `text_processing` the
in-graph tensorflow-text preprocessing. Submodules are not imported here.
"""
