"""tf_keras workarounds; tests/compat/tf_keras_test.py fails once each goes."""


def set_untracked(layer, name: str, value) -> None:
  """`layer.<name> = value`, untracked: `Model.save()` fails on a layer that
  tracks a dict of Inputs, as `BertEncoderV2` does (tensorflow#63548)."""
  object.__setattr__(layer, name, value)
