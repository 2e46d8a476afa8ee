#!/usr/bin/env bash
# Prepares what benchmarks/gpu_suite.py needs on a GPU machine that has no TensorFlow and no Keras.
#
# Run here, from the repository root, in the project's environment (`pip install -e ".[test]"`:
# TF 2.20, tf_keras, Model Garden, jax 0.10.2 for the HLO -> StableHLO conversion); $PYTHON, if
# set, names another interpreter:
#   bash benchmarks/gpu_prepare.sh [wheels|data|hlo|all]
# Writes (both ignored by git, both carried to the GPU machine):
#   .whl/      the wheels of benchmarks/gpu_wheels.txt (Python 3.12, manylinux x86-64), ~5 MB
#   .gpu_data/ GLUE's TSVs and WikiText-2 from $REALFORMER_DATA_DIR (~7 MB), for the reproduction
#   .gpu_hlo/  the TF-XLA training steps of BertEncoderV2 and RealFormerEncoder at the suite's
#              shape (BERT-Base, seq 512, batch 32, mixed_bfloat16) as StableHLO text, ~2 MB each
# One process per model: a BERT-Base dump takes about a minute of CPU and a few GB.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
WHAT=${1:-all}

if [[ $WHAT == wheels || $WHAT == all ]]; then
  mkdir -p .whl
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl $(grep -v '^#' benchmarks/gpu_wheels.txt)
  du -sh .whl
fi

if [[ $WHAT == data || $WHAT == all ]]; then
  DATA=${REALFORMER_DATA_DIR:-../shared/data}
  rm -rf .gpu_data && mkdir -p .gpu_data/corpus
  cp -r "$DATA/glue" .gpu_data/ && cp -r "$DATA/corpus/wikitext-2" .gpu_data/corpus/
  du -sh .gpu_data
fi

if [[ $WHAT == hlo || $WHAT == all ]]; then
  mkdir -p .gpu_hlo/hlo
  # model:score_dtype:dropout[:softmax]; "default" is whatever RealFormerEncoder defaults to
  # when this runs; "library" dropout is tf_keras' (BertEncoderV2's) instead of HashedDropout;
  # "kept": the attention probabilities kept for the backward pass (encoder_step.py --softmax).
  for spec in bert:float32:hashed realformer:default:hashed realformer:float32:hashed \
      realformer:default:library realformer:default:hashed:kept; do
    IFS=: read -r model score_dtype dropout softmax <<< "$spec"
    start=$(date +%s)
    TF_CPP_MIN_LOG_LEVEL=2 "$PYTHON" benchmarks/encoder_step.py --dump_hlo=.gpu_hlo/hlo \
      --dump_models="$model" --score_dtype="$score_dtype" --dropout="$dropout" \
      --softmax="${softmax:-tf}" --sizes=base \
      --seq_lengths=512 --dtypes=mixed_bfloat16 --tokens_per_batch=16384
    echo "$spec: $(( $(date +%s) - start )) s"
  done
  # The GPU machine's jaxlib compiles StableHLO text; the conversion needs jax 0.10.2 here.
  "$PYTHON" benchmarks/gpu_suite.py --to_stablehlo .gpu_hlo/hlo .gpu_hlo
  rm -rf .gpu_hlo/hlo
  du -sh .gpu_hlo; ls -l .gpu_hlo
fi
