r"""The paper's comparison in one command: Post-LN vs Pre-LN vs RealFormer.

  python -m realformer_tf.reproduce --output_dir=OUT [--scale=tiny|small|...] \
    [--corpus=FILES | --train_data=GLOB --validation_data=GLOB --vocab_file=V] \
    [--archs=post_ln,pre_ln,realformer] [--seeds=3] [--glue_tasks=mrpc,cola] \
    [--glue_dir=DIR] [--train_steps=N] [--config_file=YAML ...] [--dry_run]

In order, each step skipped when its output is there (a killed or repeated
command carries on): the data, once (`OUT/data`: vocabulary and MLM/NSP
records from `--corpus`, else WikiText-2 from the data dir, else the
quickstart's stdlib corpus; or the records given), and the GLUE tasks present
in `--glue_dir` converted with it (`OUT/glue_data`); per seed and
architecture, pre-training (`OUT/pretrain/<arch>/seed<S>`: same data order,
initialisation seed, steps and optimizer, only the architecture differs) and
the sweep's GLUE grid from it (`OUT/finetune/<arch>/seed<S>/<task>/...`); the
attention analysis of seed 0 (`OUT/analysis/<arch>`); then `results.md`
(paper Tables 2 and 3: median ± std over seeds), `results.json`,
`curves.png` and `attention.png`. Every run trains in this process through
the run executor (`training/runs.py`). `--dry_run` prints the plan and its
estimated time and touches nothing.

Modules: `plan` (scales, options, every run), `run` (data, execution),
`report` (results and figures), `__main__` (flags).
"""
