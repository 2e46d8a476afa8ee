"""SavedModel export and serving of trained RealFormer runs.

`python -m realformer_tf.serving.export` writes a SavedModel for the head a run
trained (pre-training MLM/NSP, GLUE, SQuAD): `heads` holds the export
modules (Model Garden's, subclassed), `options` their settings, `inputs` the
input guards, `squad_answers` the in-graph answer selection, `text_processing`
the tensorflow-text preprocessing. Submodules are not imported here.
"""
