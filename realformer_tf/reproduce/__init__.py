r"""The paper's comparison in one command: Post-LN vs Pre-LN vs RealFormer.

  python -m realformer_tf.reproduce --output_dir=OUT \
    [--scale=tiny|small|base|large] \
    [--corpus=FILES | --train_data=GLOB --validation_data=GLOB --vocab_file=V] \
    [--archs=post_ln,pre_ln,realformer] [--seeds=3] \
    [--glue_tasks=mrpc,stsb,cola] [--glue_dir=DIR] [--train_steps=N] \
    [--config_file=runtime.yaml ...] [--dry_run]

What it runs, in order (each step skipped when its output is already there,
so a killed or repeated command carries on where it stopped):

1. Data, once for all runs (`run.prepare`): `OUT/data` (WordPiece vocabulary
   and MLM/NSP records, built by the quickstart's `prepare_quickstart_data`
   from `--corpus`, else WikiText-2 from `REALFORMER_DATA_DIR`/`../shared/data`
   when present (`data/wikitext.py`), else the quickstart's stdlib corpus), or
   the records given by `--train_data`/`--validation_data`; then the GLUE
   tasks present in `--glue_dir`, converted with that vocabulary
   (`OUT/glue_data`).
2. Pre-training, `OUT/pretrain/<arch>/seed<S>`: `realformer/pretraining` with
   the scale's sizes and the architecture's `official_configs/models/arch_*`
   file. For one seed every architecture gets the same data order
   (`task.train_data.seed = S`), the same initialisation seed, steps and
   optimizer: only the architecture differs.
3. Fine-tuning, `OUT/finetune/<arch>/seed<S>/<task>/...`: the sweep's GLUE
   protocol (`training/sweep.py`: grid of epochs x learning rates, best grid
   point by the median of the task's main metric over the pre-training
   seeds), each run initialised from its pre-training run.
4. Attention analysis of seed 0 of each architecture, `OUT/analysis/<arch>`.
5. `OUT/results.md` (the paper's Table 2 and Table 3 shapes: median +- std
   over seeds; "1 seed" where there is one), `OUT/results.json`,
   `OUT/curves.png` (train and eval MLM accuracy of every run, one point per
   step) and `OUT/attention.png` (per-head entropy and JSD medians and
   quartiles of the architectures side by side, from each analysis'
   `summary.json`).

Every run trains in this process, one after the other, through the run
executor `training/runs.py` (Model Garden's `train_lib`). `--dry_run` lists
the plan (`plan.make_plan`) and its estimated time, and touches nothing.
Modules: `plan` (scales, options, runs), `run` (data, execution), `report`
(results and figures), `__main__` (flags).
"""
