"""What each head's signatures need besides the Keras model: one dataclass per
head, checked on construction; `from_task` reads the run's task config and the
head's own export flags."""

import dataclasses
from typing import Any, Dict, Optional, Tuple

from official.core import config_definitions as cfg
from realformer_tf.data import glue_tasks
from realformer_tf.data import squad_spans

# `return_attention` choice -> the encoder output it returns.
ATTENTION_KEYS = {"scores": "residual_scores", "probs": "attention_scores"}
ATTENTION_CHOICES = ("none", *ATTENTION_KEYS)


@dataclasses.dataclass
class ServingOptions:
  """Every head's: the encoder's sizes, the text signatures' length and the
  attention to return ("none", "scores" or "probs")."""
  max_seq_length: int
  max_position_embeddings: int
  vocab_size: int
  type_vocab_size: int
  return_attention: str = "none"

  def __post_init__(self):
    if self.return_attention not in ATTENTION_CHOICES:
      raise ValueError(f"return_attention={self.return_attention!r}; expected "
                       f"one of {ATTENTION_CHOICES}.")
    if not 3 <= self.max_seq_length <= self.max_position_embeddings:
      raise ValueError(
          f"max_seq_length={self.max_seq_length} must be in [3, "
          f"max_position_embeddings={self.max_position_embeddings}].")

  @classmethod
  def from_task(cls, task: cfg.TaskConfig, common: Dict[str, Any],
                **own_flags) -> "ServingOptions":
    """`common`: `ServingOptions`' fields; `own_flags`: the subclass's."""
    del task  # What it adds (below) is head-specific.
    return cls(**common, **own_flags)


@dataclasses.dataclass
class MaskedLMOptions(ServingOptions):
  """`top_k`: predictions per [MASK] of the text signatures."""
  top_k: int = 5

  def __post_init__(self):
    super().__post_init__()
    if self.top_k < 1:
      raise ValueError(f"top_k={self.top_k} must be >= 1.")


@dataclasses.dataclass
class SentencePredictionOptions(ServingOptions):
  """`labels`: class names in class-id order (None: regression);
  `text_pair`: whether the task takes two texts."""
  labels: Optional[Tuple[str, ...]] = None
  text_pair: bool = False

  @classmethod
  def from_task(cls, task: cfg.TaskConfig, common: Dict[str, Any]
                ) -> "SentencePredictionOptions":
    if not getattr(task, "glue_task", ""):
      raise ValueError("The run's config has no task.glue_task, so whether it "
                       "takes one text or a pair is unknown.")
    spec = glue_tasks.get_task(task.glue_task)
    if task.model.num_classes != spec.num_classes:
      raise ValueError(f"task.model.num_classes={task.model.num_classes}, but "
                       f"{spec.name} has {spec.num_classes}.")
    return cls(**common, labels=spec.labels, text_pair=spec.text_b is not None)


@dataclasses.dataclass
class QuestionAnsweringOptions(ServingOptions):
  """squad_lib's settings; v2.0 answers "" iff null score - best span score >
  `null_score_diff_threshold`."""
  max_query_length: int = 64
  doc_stride: int = 128
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0

  def __post_init__(self):
    super().__post_init__()
    squad_spans.validate_lengths(self.max_seq_length, self.doc_stride,
                                 self.max_query_length)

  @classmethod
  def from_task(cls, task: cfg.TaskConfig, common: Dict[str, Any],
                null_score_diff_threshold: Optional[float] = None
                ) -> "QuestionAnsweringOptions":
    """`null_score_diff_threshold` None: the run's."""
    data = task.validation_data
    if null_score_diff_threshold is None:
      null_score_diff_threshold = task.null_score_diff_threshold
    return cls(**common, max_query_length=int(data.query_length),
               doc_stride=int(data.doc_stride),
               n_best_size=int(task.n_best_size),
               max_answer_length=int(task.max_answer_length),
               version_2_with_negative=bool(data.version_2_with_negative),
               null_score_diff_threshold=float(null_score_diff_threshold))
