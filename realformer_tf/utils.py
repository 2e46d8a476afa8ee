"""The package's small helpers: atomic writes (`GFILE_OPS`), checkpoint
restoring, dummy inputs, the width/heads check and reproducible gzip bytes.
"""

import inspect
import json
import os
import struct
import zlib
from typing import Any, Callable, Dict, Optional

from absl import app
from absl import flags
import tensorflow as tf

from realformer_tf.core import writes


def _read_text(path: str) -> Optional[str]:
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      return f.read()
  except (tf.errors.OpError, UnicodeDecodeError):
    return None


def _write_text(path: str, text: str) -> None:
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(text)


def remove(path: str) -> None:
  """Deletes a file or a folder tree; nothing if `path` does not exist."""
  try:
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
      tf.io.gfile.remove(path)
  except tf.errors.NotFoundError:  # ram:// calls a name's prefix a folder.
    pass


# The tf_keras face's files for `core.writes`: the only renames besides it.
GFILE_OPS = writes.FileOps(
    read=_read_text, write=_write_text, exists=tf.io.gfile.exists,
    remove=remove,
    rename=lambda source, target: tf.io.gfile.rename(source, target,
                                                     overwrite=True),
    isdir=tf.io.gfile.isdir, listdir=tf.io.gfile.listdir,
    makedirs=tf.io.gfile.makedirs)


def link_or_copy(source: str, target: str) -> None:
  """Makes `target` a hard link to `source` (a copy where links are not
  possible); a folder is recreated with its contents linked the same way."""
  if tf.io.gfile.isdir(source):
    tf.io.gfile.makedirs(target)
    for entry in tf.io.gfile.listdir(source):
      entry = entry.rstrip("/")
      link_or_copy(os.path.join(source, entry), os.path.join(target, entry))
    return
  try:
    os.link(source, target)
  except OSError:
    tf.io.gfile.copy(source, target, overwrite=True)


def existing_ancestor(path: str) -> Optional[str]:
  """`path` or its nearest existing ancestor ("." for a relative path); None
  on an object store where none of it exists yet."""
  path = path.rstrip("/") or "/"
  while not tf.io.gfile.exists(path):
    parent = os.path.dirname(path)
    if not parent:
      return "."
    if parent == path or parent.endswith(":/"):
      return None
    path = parent
  return path


def check_directory_path(path: str, what: str, instead: str) -> None:
  """Raises a ValueError naming `what` (e.g. "--model_dir") when `path` is a
  file or under one; `instead` ends the message."""
  path = path.rstrip("/") or "/"
  try:
    found = existing_ancestor(path)
  except tf.errors.OpError as e:  # An unreachable gs:// (no credentials).
    raise ValueError(f"{what}={path!r} cannot be reached: "
                     f"{e.message.splitlines()[0]}") from None
  if found is None or tf.io.gfile.isdir(found):
    return
  where = ("is a file" if found == path else
           f"is under {found!r}, which is a file")
  raise ValueError(f"{what}={path!r} {where}, not a directory: {instead}.")


# The gzip header (RFC 1952) with mtime 0 and OS 3 (Python 3.13 writes 255):
# the same bytes on every Python.
_GZIP_HEADER = bytes([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3])


def gzip_bytes(data: bytes) -> bytes:
  """`data` gzipped at level 9 with `_GZIP_HEADER`."""
  deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
  body = deflate.compress(data) + deflate.flush()
  return (_GZIP_HEADER + body +
          struct.pack("<LL", zlib.crc32(data), len(data) & 0xffffffff))


def dummy_inputs(masked_positions: int = 0) -> Dict[str, tf.Tensor]:
  """A one-example BERT input batch (ids 1) that creates a model's variables."""
  ids = tf.ones([1, 2], tf.int32)
  inputs = dict(input_word_ids=ids, input_mask=ids,
                input_type_ids=tf.zeros_like(ids))
  if masked_positions:
    inputs["masked_lm_positions"] = tf.zeros([1, masked_positions], tf.int32)
  return inputs


def check_heads_divide(width: int, num_heads: int, what: str) -> None:
  """Raises ValueError, naming `what`, unless `num_heads` divides `width`."""
  if num_heads < 1 or width % num_heads:
    raise ValueError(f"{what}: width {width} is not divisible by "
                     f"num_attention_heads={num_heads}.")


def flags_main(fn: Callable[..., Any],
               to_json: Callable[[Any], Any] = lambda result: result):
  """An absl `main` for our CLIs: `fn(**flags of its parameters' names)`,
  its result printed as JSON."""
  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    result = fn(**{name: flags.FLAGS[name].value
                   for name in inspect.signature(fn).parameters})
    print(json.dumps(to_json(result), indent=2))
  return main
