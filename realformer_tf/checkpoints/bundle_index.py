"""Where each shard's tensors of a TensorFlow checkpoint end, read from its
`.index` (TensorFlow's readers give shapes, and strings have no fixed size).
"""

import struct
from typing import Dict, Iterator, List, Tuple

from tensorflow.core.protobuf import tensor_bundle_pb2


def _varints(data: bytes, i: int, count: int) -> Tuple[List[int], int]:
  """`count` varints of `data` from `i`, and where they end."""
  values = []
  for _ in range(count):
    value = shift = 0
    while data[i] & 0x80:
      value, shift, i = value | (data[i] & 0x7F) << shift, shift + 7, i + 1
    values.append(value | data[i] << shift)
    i += 1
  return values, i


def _block(table: bytes, handle: bytes) -> Iterator[bytes]:
  """The values of a LevelDB table's block `handle` (offset, size) names."""
  (offset, size), _ = _varints(handle, 0, 2)
  block = table[offset:offset + size]
  end, i = size - 4 - 4 * struct.unpack("<I", block[-4:])[0], 0
  while i < end:
    (_, unshared, length), i = _varints(block, i, 3)  # Keys unneeded.
    yield block[i + unshared:i + unshared + length]
    i += unshared + length


def data_ends(index: bytes) -> Dict[int, int]:
  """{shard: where its last tensor ends}: `BundleWriter`'s uncompressed
  LevelDB table of `BundleEntryProto`s (shard, offset, size) in `index`."""
  _, i = _varints(index, len(index) - 48, 2)  # Footer: meta index, index.
  ends = {}
  for handle in _block(index, index[i:]):
    for value in _block(index, handle):
      entry = tensor_bundle_pb2.BundleEntryProto.FromString(value)
      ends[entry.shard_id] = max(ends.get(entry.shard_id, 0),
                                 entry.offset + entry.size)
  return ends
