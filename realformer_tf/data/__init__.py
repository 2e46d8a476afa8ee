"""Input pipelines for RealFormer: converters that write records and their
meta data as one set (`output_sets`).

Submodules are not imported here, so `import realformer_tf` stays free of
tensorflow-text.
"""
