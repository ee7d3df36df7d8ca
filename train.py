"""Train the entity model and score it under the full protocol.

    python train.py                                   # the embedded demo (configs/default.yaml)
    python train.py --config configs/ceiling.yaml     # the entity CEILING: the generator's entities
    python train.py --config configs/full.yaml trainer.devices=8 trainer.strategy=ddp
    python train.py --resume                          # continue the newest run of this config
    python train.py --resume checkpoints/<run>        # continue that run
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml", help="YAML run config")
    parser.add_argument("--resume", nargs="?", const="latest", default=None,
                        help="continue from a run folder's last.ckpt (no value: the newest run of this config)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. trainer.max_epochs=3 seed=1")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    from common.config import ConfigError
    from training.checkpoint import CheckpointError
    from training.config import load_train_config
    from training.run import latest_run, train
    try:
        cfg = load_train_config(args.config, args.overrides)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    name = Path(args.config).stem
    resume = args.resume
    if resume == "latest":
        resume = latest_run(cfg.out_dir, name)
        if resume is None:
            print(f"--resume: no run of {name!r} with a last.ckpt under {cfg.out_dir}/", file=sys.stderr)
            return 2
    try:
        metrics = train(cfg, config_name=name, resume=resume)
    except KeyboardInterrupt:
        print("interrupted: last.ckpt holds the last finished epoch; continue with --resume", file=sys.stderr)
        return 130
    except ConfigError as err:  # a value that names nothing there: nothing written
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # one line naming the file and what to do; the traceback with --debug
        if args.debug:
            raise
        from eval.errors import describe_failure
        message = str(err) if isinstance(err, CheckpointError) else describe_failure(err).removeprefix("ERROR ")
        print("error: " + " ".join(message.split()), file=sys.stderr)
        return 1
    label = "entity CEILING (true entities)" if cfg.is_ceiling else "crossview"
    if metrics and "by_task" not in metrics:  # eval.enabled=false: trained, not scored
        print(f"\ntrained, not evaluated (eval.enabled=false); best val/acc {metrics.get('best_val_acc')}")
        print(f"run folder: {metrics.get('run_dir')}")
    elif metrics:
        from eval.report import render_ci_table, render_cvbench_table, render_ssmn_table
        print("\nSSMNBench-style (accuracy %, by view setting):\n" + render_ssmn_table([(label, metrics)]))
        print("\nCVBench-style (accuracy %, by axis x granularity):\n" + render_cvbench_table([(label, metrics)]))
        print("\n95 % cluster-bootstrap intervals:\n" + render_ci_table(metrics))
        print(f"\nrun folder: {metrics.get('run_dir')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
