"""Input pipelines for RealFormer.

BERT pre-training input: `tokenization` (tensorflow-text WordPiece
vocabularies and tokenizers), `pretraining_data` (MLM/NSP TFRecords in Google
BERT's format, read by Model Garden's `BertPretrainDataLoader`; see that
module for why), the `create_pretraining_data` CLI, and `quickstart_corpus`
(a small, cached pre-training set built from text every Python install has).

Submodules are not imported here, so `import realformer_tf` stays free of
tensorflow-text.
"""
