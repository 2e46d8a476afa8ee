"""The package's shape: imports go down the layer order, modules stay small,
and the Keras 3 face stands without TensorFlow.

The layer order is `LAYER_ORDER`, bottom first. A module may import its own
package and any package below it, never one above; imports of our own modules
sit at module level (no function-level imports), so the order can be read off
the top of each file.
"""
import ast
import os
import sys
import textwrap

import pytest

from tests.helpers import no_tensorflow
from tests.helpers import watchdog

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_ROOT = os.path.join(REPO_ROOT, "realformer_tf")

# Bottom first. The package's own `__init__` is below everything, then
# `compat` (upstream defects' workarounds, one module per library). `core`
# (the math both faces call) and `keras3` (the portable face: keras, keras-hub
# and core only) sit below `utils`, which imports TensorFlow; `cli` (how
# every command ends; absl only) below every package with a command.
LAYER_ORDER = ("compat", "core", "keras3", "cli", "utils", "layers", "networks",
               "data", "tasks", "configs", "checkpoints", "training",
               "serving", "analysis", "reproduce")
# Layers that import no TensorFlow, tf_keras, Model Garden or a layer of
# ours outside this tuple.
PORTABLE_LAYERS = ("core", "keras3")
NON_PORTABLE_PACKAGES = ("tensorflow", "tf_keras", "official")
# The `compat` modules the portable layers may import (and that import no
# NON_PORTABLE_PACKAGES themselves).
PORTABLE_COMPAT = ("compat/keras.py", "compat/keras_hub.py")
# Private modules the portable face still imports, each because its library
# exposes no public name for what is used (keras-hub's public API is
# `keras_hub.models`, `.layers`, `.tokenizers`).
PRIVATE_IMPORTS = {
    ("keras3/backbone.py", "keras_hub.src.models.bert"):
        "bert_kernel_initializer (BertBackbone's initializer)",
    ("keras3/export_checks.py", "keras.src.utils.module_utils"):
        "tensorflow, Keras' lazy TensorFlow module (what its exporter uses)",
    ("keras3/encoder_block.py", "keras_hub.src.utils"):
        "keras_utils.gelu_approximate (BertBackbone's activation)",
    ("keras3/residual_attention.py", "keras.src.backend.common"):
        "masking.get_keras_mask/set_keras_mask (Keras' implicit masks)",
    ("keras3/tasks.py", "keras_hub.src.utils"):
        "preset_utils.list_subclasses/METADATA_FILE (the preset task names)",
}
MAX_MODULE_LINES = 450


def _modules():
  for root, _, files in os.walk(PACKAGE_ROOT):
    for name in sorted(files):
      if name.endswith(".py"):
        yield os.path.relpath(os.path.join(root, name), PACKAGE_ROOT)


def _layer(relative_module: str) -> str:
  """`layers/x.py` -> "layers"; `utils.py` -> "utils"."""
  return relative_module.split(os.sep)[0].split("/")[0].removesuffix(".py")


def _tree(module: str) -> ast.Module:
  path = os.path.join(PACKAGE_ROOT, module)
  with open(path, encoding="utf-8") as f:
    return ast.parse(f.read(), path)


def _imported_names(tree: ast.Module):
  """(node, dotted module name) of every import, `importlib.import_module`
  with a constant (or f-string) name included."""
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
      if node.module.split(".")[0] == "realformer_tf":  # from ... import X
        for alias in node.names:
          yield node, f"{node.module}.{alias.name}"
      else:
        yield node, node.module
    elif isinstance(node, ast.Import):
      for alias in node.names:
        yield node, alias.name
    elif (isinstance(node, ast.Call) and node.args and
          getattr(node.func, "attr", None) == "import_module"):
      arg = node.args[0]
      if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        yield node, arg.value
      elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(
          arg.values[0], ast.Constant):
        yield node, arg.values[0].value


def _own_layers(tree: ast.Module):
  """(node, imported layer) for each import of a realformer_tf module."""
  for node, name in _imported_names(tree):
    parts = name.split(".")
    if parts[0] == "realformer_tf" and len(parts) > 1 and parts[1]:
      yield node, parts[1]


def test_every_package_is_in_the_layer_order():
  found = {_layer(module) for module in _modules()} - {"__init__"}
  assert found <= set(LAYER_ORDER), sorted(found - set(LAYER_ORDER))


@pytest.mark.parametrize("module", sorted(_modules()))
def test_imports_go_down_the_layer_order(module):
  tree = _tree(module)
  own = _layer(module)
  top_level = set(map(id, tree.body))
  for node, imported in _own_layers(tree):
    assert isinstance(node, ast.Call) or id(node) in top_level, (
        f"{module}:{node.lineno} imports realformer_tf inside a function")
    if own not in LAYER_ORDER or imported not in LAYER_ORDER:
      continue
    assert LAYER_ORDER.index(imported) <= LAYER_ORDER.index(own), (
        f"{module}:{node.lineno} ({own}) imports {imported}, which is above "
        f"it in the layer order {LAYER_ORDER}")


@pytest.mark.parametrize("module", sorted(
    m for m in _modules() if _layer(m) in PORTABLE_LAYERS))
def test_the_portable_layers_import_no_tensorflow(module):
  tree = _tree(module)
  for node, name in _imported_names(tree):
    top = name.split(".")[0]
    assert top not in NON_PORTABLE_PACKAGES, (
        f"{module}:{node.lineno} imports {name}: {PORTABLE_LAYERS} run "
        "without TensorFlow, tf_keras and Model Garden")
    if top == "realformer_tf":
      assert name.split(".")[1] in PORTABLE_LAYERS or (
          "/".join(name.split(".")[1:3]) + ".py" in PORTABLE_COMPAT), (
              f"{module}:{node.lineno} imports {name}: {PORTABLE_LAYERS} "
              f"import only each other and {PORTABLE_COMPAT}")
    if (".src" in name and
        (module.replace(os.sep, "/"), name) not in PRIVATE_IMPORTS):
      raise AssertionError(
          f"{module}:{node.lineno} imports {name}, a private module: use "
          "keras' / keras_hub's public name, or list it in PRIVATE_IMPORTS "
          "with why there is none")


@pytest.mark.parametrize("module", sorted(
    m for m in _modules() if _layer(m) == "compat"))
def test_compat_imports_upstream_libraries_only(module):
  """Below every layer; the portable ones import no TensorFlow either, and
  the package's `__init__` imports nothing."""
  tree = _tree(module)
  rel = module.replace(os.sep, "/")
  for node, name in _imported_names(tree):
    top = name.split(".")[0]
    assert top != "realformer_tf", f"{module}:{node.lineno} imports {name}"
    assert rel not in PORTABLE_COMPAT or top not in NON_PORTABLE_PACKAGES, (
        f"{module}:{node.lineno} imports {name}: the Keras 3 face imports "
        f"{rel}, which runs without TensorFlow")
    assert rel != "compat/__init__.py", f"{module} imports {name}"


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_is_past_the_size_limit(module):
  with open(os.path.join(PACKAGE_ROOT, module), encoding="utf-8") as f:
    lines = sum(1 for _ in f)
  assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines"


# Every Keras 3 class, built and run on JAX with TensorFlow, tf_keras and
# Model Garden made unimportable (`tensorflow_text` too). keras-hub's
# WordPiece tokenizer works without TensorFlow (Python string ops), and so
# do the BERT and causal-LM preprocessors called on in-memory lists; a
# task's `fit`/`predict` (even on arrays) batch with keras-hub's data
# pipeline, which needs `grain` or TensorFlow, so here the models take the
# preprocessed arrays directly (`__call__`, `train_on_batch`, `generate`).
_WITHOUT_TENSORFLOW = textwrap.dedent("""
    import sys
    import keras
    import keras_hub
    import numpy as np
    import realformer_tf.keras3 as k3
    import realformer_tf.compat.keras
    import realformer_tf.compat.keras_hub
    from realformer_tf.checkpoints import keras3_weight_map
    assert keras.config.backend() == "jax", keras.config.backend()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    mask = np.ones((2, 5, 5), "int32")
    out = k3.ResidualMultiHeadAttention(num_heads=2, key_dim=8)(
        x, x, attention_mask=mask)
    assert out[0].shape == (2, 5, 16), out[0].shape
    hidden, scores = k3.RealFormerEncoderBlock(
        num_heads=2, intermediate_dim=24)(x, attention_mask=mask)
    assert scores.shape == (2, 2, 5, 5), scores.shape
    decoded = k3.RealFormerDecoderBlock(num_heads=2, intermediate_dim=24)(
        x, memory=x)
    assert decoded[0].shape == (2, 5, 16)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
             "sat", "dog", "ran", "a"]
    tokenizer = k3.RealFormerTokenizer(vocabulary=vocab)
    assert np.asarray(tokenizer(["the cat"])).tolist() == [[5, 6]]
    sizes = dict(vocabulary_size=len(vocab), num_layers=2, num_heads=2,
                 hidden_dim=16, intermediate_dim=24, max_sequence_length=12)
    backbone = k3.RealFormerBackbone(**sizes, num_segments=2)
    # The preprocessors run on in-memory lists; a task's fit/predict batch
    # through keras-hub's data pipeline, which needs `grain` or TensorFlow,
    # so the models get the preprocessed arrays (`train_on_batch` trains).
    classify = k3.RealFormerTextClassifierPreprocessor(tokenizer,
                                                       sequence_length=8)
    classifier = k3.RealFormerTextClassifier(backbone, num_classes=2)
    logits = classifier(classify(["the cat sat", "a dog ran"]))
    assert logits.shape == (2, 2), logits.shape
    x, y, w = keras.utils.unpack_x_y_sample_weight(
        k3.RealFormerMaskedLMPreprocessor(
            tokenizer, sequence_length=8, mask_selection_length=2)(
                ["the cat sat", "a dog ran"]))
    masked = k3.RealFormerMaskedLM(backbone)
    assert masked(x).shape == (2, 2, len(vocab))
    masked.compile(optimizer="adam", weighted_metrics=[])
    assert np.isfinite(masked.train_on_batch(x, y, sample_weight=w))
    decoder = k3.RealFormerDecoderBackbone(**sizes)
    lm = k3.RealFormerCausalLM(backbone=decoder)
    lm.compile(sampler="greedy")
    prompt, _, _ = keras.utils.unpack_x_y_sample_weight(
        k3.RealFormerCausalLMPreprocessor(tokenizer, sequence_length=8)(
            ["the cat"]))
    generated = lm.generate(prompt, stop_token_ids=None)
    assert generated["token_ids"].shape == (1, 8)
    bert = keras_hub.models.BertBackbone(**sizes, num_segments=2)
    copied = keras3_weight_map.load_bert_backbone(bert)  # Works without TF.
    ids = {"token_ids": np.array([[2, 5, 6, 3]]),
           "segment_ids": np.zeros((1, 4), "int32"),
           "padding_mask": np.ones((1, 4), "int32")}
    np.testing.assert_allclose(
        np.asarray(copied(ids)["sequence_output"]),
        np.asarray(bert(ids)["sequence_output"]), atol=1e-5)
    assert not [m for m in sys.modules if m.split(".")[0] in
                ("tensorflow", "tf_keras", "official") and sys.modules[m]]
    print("ok")
""")


def test_keras3_face_runs_on_jax_without_tensorflow():
  env = no_tensorflow.env(dict(os.environ, KERAS_BACKEND="jax",
                              JAX_PLATFORMS="cpu"))
  env["XLA_FLAGS"] = " ".join(
      [env.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()
  result = watchdog.run([sys.executable, "-c", _WITHOUT_TENSORFLOW],
                        cwd=REPO_ROOT, env=env)
  assert result.returncode == 0 and result.stdout.strip().endswith("ok"), (
      result.stdout + result.stderr)[-5000:]
