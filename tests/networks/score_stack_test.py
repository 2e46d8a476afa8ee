"""Tests for `score_stack.chain_blocks`, the one layer-to-layer score loop.

The stacks built on it are tested in their own modules; here fake blocks
record what each one was handed, so the threading itself is checked.
"""

from realformer_tf.networks import score_stack


class _Block:
  """Returns `(hidden + 1, *per path: scores + [index], *probs)`."""

  def __init__(self, index, paths=("scores",), none_paths=()):
    self.index, self.paths, self.none_paths = index, paths, none_paths
    self.calls = []

  def __call__(self, hidden, **kwargs):
    self.calls.append(dict(kwargs, hidden=hidden))
    scores = [None if name in self.none_paths else
              (kwargs[name] or []) + [self.index] for name in self.paths]
    probs = [None if s is None else f"p{self.index}" for s in scores]
    return (hidden + 1, *scores, *probs)


def test_threads_hidden_and_scores_through_the_blocks():
  blocks = [_Block(i) for i in range(3)]
  hiddens, (scores,), (probs,) = score_stack.chain_blocks(
      blocks, 10, ("scores",), {2: dict(output_range=1)}, training=True)
  assert hiddens == [11, 12, 13]
  assert scores == [[0], [0, 1], [0, 1, 2]]   # each block's running sum
  assert probs == ["p0", "p1", "p2"]
  assert [c["hidden"] for c in blocks[1].calls + blocks[2].calls] == [11, 12]
  assert blocks[0].calls[0]["scores"] is None  # the first block: no scores
  assert blocks[2].calls[0]["scores"] == [0, 1]
  assert all(b.calls[0]["training"] and b.calls[0]["return_attention_probs"]
             for b in blocks)
  assert [b.calls[0].get("output_range") for b in blocks] == [None, None, 1]


def test_two_paths_never_mixed_and_absent_path_is_empty():
  paths = ("self_scores", "cross_scores")
  blocks = [_Block(i, paths) for i in range(2)]
  _, (self_scores, cross_scores), probs = score_stack.chain_blocks(
      blocks, 0, paths)
  assert self_scores == cross_scores == [[0], [0, 1]]
  assert blocks[1].calls[0]["cross_scores"] == [0]
  assert len(probs) == 2
  blocks = [_Block(i, paths, none_paths=("cross_scores",)) for i in range(2)]
  _, (self_scores, cross_scores), (_, cross_probs) = (
      score_stack.chain_blocks(blocks, 0, paths))
  assert self_scores == [[0], [0, 1]]
  assert cross_scores == cross_probs == []
