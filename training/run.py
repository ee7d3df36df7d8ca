"""``train(cfg) -> metrics``: the whole ``python train.py`` job as a function tests can call.

benchmark (generated if missing) -> entity records (the shipped perception, predicted once and
cached; the generator's truth for the ceiling) -> Lightning fit of the entity reasoner -> held-out
protocol run through the evaluator (adapter ``crossview``) -> checkpoints/<run>/ with the report.

Under DDP every process runs this function (Lightning's launcher starts the others by
re-running the command; torchrun / SLURM start them all). Generating the benchmark and
predicting the records happen once, in the DataModule's ``prepare_data``; only global rank 0
writes the run folder, and it hands the folder's name to the processes it launches.
"""
from __future__ import annotations

import itertools
import os
import shutil
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from common.atomic import atomic_write_bytes, atomic_write_json
from common.config import save_config, to_dict
from inputs.entity_batch import WordVocab
from inputs.entity_records import locate_perception
from training.checkpoint import CheckpointError, architecture_differences, checkpoint_config, read_checkpoint
from training.config import TrainConfig
from training.datamodule import SPLITS, EntityDataModule, ensure_benchmark  # noqa: F401  (ensure_benchmark: public API)
from training.module import EntityModule
from training.provenance import finish_provenance, start_provenance


class StepSeed(Callback):
    """Reseed torch before every training step from (seed, step), so dropout after a resume
    matches an unbroken run whatever consumed random numbers in between (a data loader's
    iterator draws its base seed when it is created, at a moment that differs on resume)."""

    def __init__(self, seed: int):
        self.seed = seed

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        torch.manual_seed(self.seed * 1_000_003 + trainer.global_step)


RUN_DIR_ENV = "CROSSVIEW_RUN_DIR"  # rank 0's run folder, inherited by the processes Lightning launches


def run_dir_for(cfg: TrainConfig, config_name: str) -> Path:
    """checkpoints/<run_name>, or <config>-<time>; a process launched by rank 0 uses rank 0's."""
    if os.environ.get(RUN_DIR_ENV):
        return Path(os.environ[RUN_DIR_ENV])
    name = cfg.run_name or f"{config_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(cfg.out_dir) / name


def claim_run_dir(run_dir: Path, cfg: TrainConfig, resumed: bool = False) -> Path:
    """Make the run folder. An automatic name (<config>-<time>) is claimed atomically: a second
    run started in the same second gets <name>-2 (then -3, ...) instead of sharing the folder;
    a resumed run's folder, one named by ``run_name`` or one handed down by rank 0 is used as it is."""
    if resumed or cfg.run_name or os.environ.get(RUN_DIR_ENV):
        run_dir.mkdir(parents=True, exist_ok=True)
        return run_dir
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        candidate = run_dir if n == 1 else run_dir.with_name(f"{run_dir.name}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate


def global_rank() -> int:
    """This process's global rank as the launcher set it (0 when not launched distributed)."""
    from lightning.pytorch.utilities import rank_zero_only
    return int(getattr(rank_zero_only, "rank", 0) or 0)


def build_strategy(name: str):
    """Lightning's strategy for ``trainer.strategy``. "ddp" tells DDP that some parameters get
    no gradient in some batches: which ones depends on the batch (the unknown-camera embedding
    only sees uncalibrated views, the clip-time path only clips, optional components only
    their inputs), and plain DDP stops at the first such step."""
    if name == "ddp":
        from lightning.pytorch.strategies import DDPStrategy
        return DDPStrategy(find_unused_parameters=True)
    return name


def user_callbacks(names: list[str]) -> list[Callback]:
    """``trainer.callbacks`` entries ("package.module:Class", no arguments) as instances."""
    import importlib
    out = []
    for name in names:
        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as err:
            raise ValueError(f"trainer.callbacks: cannot import {name!r} ({err}); expected 'module:Class'") from None
        out.append(cls())
    return out


def latest_run(out_dir: str | Path, config_name: str) -> Path | None:
    """The newest run folder of this config that has a last.ckpt (for ``--resume``)."""
    runs = [p for p in Path(out_dir).glob(f"{config_name}-*") if (p / "last.ckpt").is_file()]
    return max(runs, key=lambda p: (p / "last.ckpt").stat().st_mtime) if runs else None


def evaluate_module(module: EntityModule, cfg: TrainConfig, out_dir: Path) -> dict:
    """The full protocol on the held-out split through the evaluator's ``crossview`` adapter.

    The one place training imports eval (tests/test_layering.py holds it to that)."""
    from eval.adapters.crossview import CrossViewAdapter
    from eval.runner import evaluate
    # The in-memory adapter cannot name its weights in the run header, so an old eval folder
    # (a resumed run) would "resume" into stale predictions: always start it fresh.
    if out_dir.exists():
        shutil.rmtree(out_dir)
    adapter = CrossViewAdapter.from_loaded(module.model, WordVocab(module.hparams["vocab"]), to_dict(cfg),
                                           module.hparams["perception_sha256"], cache_dir=cfg.data.cache_dir,
                                           device=str(module.device))
    bench = Path(cfg.data.bench_dir) / cfg.eval.split
    return evaluate(bench, adapter, out_dir, settings=list(cfg.eval.settings), seed=cfg.eval.seed,
                    batch_size=cfg.data.eval_batch_size)


def check_inputs(cfg: TrainConfig) -> None:
    """What can be refused before a run folder exists: the ceiling on a benchmark without labels
    (a benchmark still to be generated gets them), a perception folder that holds no heads."""
    root = Path(cfg.data.bench_dir)
    if cfg.is_ceiling:
        present = [s for s in SPLITS if (root / s).is_dir()]
        missing = [s for s in present if not (root / "labels" / f"{s}.jsonl.gz").is_file()]
        if missing:
            raise FileNotFoundError(f"perception.entities=truth (the entity ceiling): {root}/labels has no entity "
                                    f"labels of {', '.join(missing)}; only a benchmark made by python -m bench "
                                    "generate has them")
    else:
        locate_perception(cfg.perception.folder)
        if cfg.perception.train_entities == "truth" and (root / "train").is_dir() \
                and not (root / "labels" / "train.jsonl.gz").is_file():
            raise FileNotFoundError(f"perception.train_entities=truth: {root}/labels has no entity labels of train; "
                                    "only a benchmark made by python -m bench generate has them")


def train(cfg: TrainConfig, config_name: str = "default", resume: str | Path | None = None,
          callbacks: list[Callback] | None = None) -> dict:
    """Train, evaluate, write the run folder; returns the evaluator's summary (metrics.json).

    Args:
        cfg: the resolved run config.
        config_name: names the run folder (``<config_name>-<time>`` unless cfg.run_name is set).
        resume: a run folder (or its last.ckpt) to continue; its architecture must match cfg.
        callbacks: extra Lightning callbacks (tests, custom logging).
    """
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    ckpt_path = None
    if resume is not None:
        resume = Path(resume)
        ckpt_path = resume if resume.is_file() else resume / "last.ckpt"
        diffs = architecture_differences(checkpoint_config(read_checkpoint(ckpt_path), ckpt_path), cfg)
        if diffs:
            raise CheckpointError(f"refusing to resume {ckpt_path}: the architecture changed ({'; '.join(diffs)}); "
                                  "resume with the run's own config.yaml")
        run_dir = ckpt_path.parent
    else:
        run_dir = run_dir_for(cfg, config_name)
    check_inputs(cfg)
    extra_callbacks = [*user_callbacks(cfg.trainer.callbacks), *(callbacks or [])]
    datamodule = EntityDataModule(cfg)  # data is made and read inside fit (prepare_data)
    module = EntityModule(to_dict(cfg))
    # The run folder is made only once every input has been accepted: a refused run leaves none.
    started = time.time()
    if global_rank() == 0:
        run_dir = claim_run_dir(run_dir, cfg, resumed=ckpt_path is not None)
        save_config(cfg, run_dir / "config.yaml")
        started = start_provenance(run_dir, cfg, resumed=ckpt_path is not None)
        os.environ[RUN_DIR_ENV] = str(run_dir)  # the processes Lightning starts write to the same folder
    t = cfg.trainer
    checkpoint = ModelCheckpoint(dirpath=run_dir, filename="best", monitor="val/acc", mode="max",
                                 save_top_k=1, enable_version_counter=False)
    # A second callback for last.ckpt: ModelCheckpoint's save_last only fires when a top-k
    # checkpoint is written, so an epoch without a better val/acc would not refresh it.
    last = ModelCheckpoint(dirpath=run_dir, filename="last", monitor=None, save_top_k=1,
                           enable_version_counter=False)
    logger = CSVLogger(run_dir, name="logs",
                       version="" if ckpt_path is None else f"resumed-{time.strftime('%Y%m%d-%H%M%S')}")
    trainer = L.Trainer(
        max_epochs=t.max_epochs, accelerator=t.accelerator, devices=t.devices, num_nodes=t.num_nodes,
        strategy=build_strategy(t.strategy), precision=t.precision, gradient_clip_val=t.gradient_clip_val,
        log_every_n_steps=t.log_every_n_steps, check_val_every_n_epoch=t.check_val_every_n_epoch,
        limit_train_batches=t.limit_train_batches, enable_progress_bar=t.enable_progress_bar,
        callbacks=[checkpoint, last, StepSeed(cfg.seed), *extra_callbacks], logger=logger,
        # Our samplers split the data over ranks (Lightning cannot wrap a bucketed batch sampler).
        use_distributed_sampler=False,
        default_root_dir=run_dir, deterministic="warn" if t.deterministic else False, enable_model_summary=False,
    )
    fit_started = time.time()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(ckpt_path) if ckpt_path else None)
    finally:
        if global_rank() == 0:
            os.environ.pop(RUN_DIR_ENV, None)  # the next train() in this process names its own folder
    fit_seconds = time.time() - fit_started
    if not trainer.is_global_zero:
        return {}
    metrics: dict = {"fit_seconds": round(fit_seconds, 1), "run_dir": str(run_dir),
                     "best_val_acc": _float(checkpoint.best_model_score), "ceiling": cfg.is_ceiling}
    if cfg.eval.enabled:
        best = run_dir / "best.ckpt"
        if best.is_file():
            module.load_state_dict(read_checkpoint(best)["state_dict"])
        summary = evaluate_module(module.eval(), cfg, run_dir / "eval")
        metrics = {**summary, **metrics}
        _copy_reports(run_dir / "eval", run_dir)
    atomic_write_json(run_dir / "metrics.json", metrics, indent=2)
    finish_provenance(run_dir, cfg, trainer, started, _perception_identity(cfg))
    return metrics


def _perception_identity(cfg: TrainConfig) -> str:
    """What made the entity records: the perception's hash, or the truth (the ceiling)."""
    if cfg.is_ceiling:
        return "truth (entity ceiling)"
    from inputs.entity_records import perception_hash
    made = f"perception sha256 {perception_hash(cfg.perception.folder)}"
    return made + " (val, test); truth (train)" if cfg.perception.train_entities == "truth" else made


def _float(value) -> float | None:
    return None if value is None else round(float(value), 4)


def _copy_reports(eval_dir: Path, run_dir: Path) -> None:
    """report.md and the plots sit at the top of the run folder too."""
    for path in eval_dir.iterdir():
        if path.suffix in (".md", ".png"):
            atomic_write_bytes(run_dir / path.name, path.read_bytes())
