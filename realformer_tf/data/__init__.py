"""Input pipelines for RealFormer: converters that write records plus meta
data as one set (`output_sets`).

`tokenization` (WordPiece vocabularies, tokenizer, packer), `pretraining_data`
and its `create_pretraining_data` CLI (MLM/NSP records in Google BERT's
format), `quickstart_corpus` (a small cached set from the stdlib docstrings),
`glue`, `squad` (features; `squad_json` reads and checks the JSON),
`translation`, and `schedule` (fine-tuning step arithmetic).

Submodules are not imported here, so `import realformer_tf` stays free of
tensorflow-text.
"""
