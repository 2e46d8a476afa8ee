"""Input pipelines for RealFormer. Submodules are not imported here, so
`import realformer_tf` stays free of tensorflow-text.
"""
