"""The typed config of one training run (``python train.py``), loaded from YAML.

``load_train_config(path, overrides)`` is the only entry: unknown keys and wrongly typed
values fail with the dotted key named. The resolved config is saved with every run and
inside every checkpoint.

The defaults are the shipped run, the one ``python train.py`` trains (configs/default.yaml
adds only the demo's data paths, epochs and CPU); the figures behind the measured ones are in
docs/experiments.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from common.config import ConfigError, load_config
from model.config import ModelConfig


@dataclass
class DataConfig:
    RANGES: ClassVar[dict] = {"batch_size": ">= 1", "eval_batch_size": ">= 1", "num_workers": ">= 0",
                              "limit_train": ">= 0", "limit_val": ">= 0"}

    bench_dir: str = "data/synth-default"  # holds train/, val/, test/ benchmark folders
    generate_config: str | None = "configs/bench/default.yaml"  # generated into bench_dir if missing
    cache_dir: str = "data/cache"  # backbone feature cache (shared by every run)
    batch_size: int = 16  # samples per training batch; twice the updates of 32 at about the same
    #   epoch cost: the cross-view pointer clicks in about an epoch earlier (docs/experiments.md)
    eval_batch_size: int = 64  # samples per evaluation batch
    num_workers: int = 0  # DataLoader workers; 0 keeps the 2-core default simple and deterministic
    limit_train: int = 0  # use only the first N training samples (0: all); for quick runs
    limit_val: int = 0  # use only the first N validation samples (0: all)
    tasks: list[str] = field(default_factory=list)  # train and validate on these tasks only (empty:
    #   all); e.g. the person track's own stage (configs/track_stage.yaml). The test split is whole


@dataclass
class AugmentConfig:
    """Training-time view-set augmentation: how the model learns to ignore redundant views."""

    RANGES: ClassVar[dict] = {"p_extra": "[0, 1]", "max_extra": ">= 0", "p_drop": "[0, 1]"}

    p_extra: float = 0.5  # chance to add 1..max extra views from the sample's pool
    max_extra: int = 3  # most extra views added
    p_drop: float = 0.0  # chance to drop one necessary view of an MVN sample (answer loss masked)
    shuffle_views: bool = True  # present the views in a random order
    shuffle_options: bool = False  # present the options in a random order each epoch (a "none of
    #   the above" option stays last, as the evaluator's rotations keep it); the answer follows


@dataclass
class LossConfig:
    RANGES: ClassVar[dict] = {"answer": ">= 0", "evidence": ">= 0", "entity_evidence": ">= 0", "identity": ">= 0",
                              "track": ">= 0", "track_locate": ">= 0", "track_box": ">= 0", "view_count": ">= 0",
                              "mark_facts": ">= 0"}

    answer: float = 1.0  # weight of the option cross-entropy
    evidence: float = 0.2  # weight of the (view, frame) evidence BCE
    entity_evidence: float = 0.1  # weight of the per-mark evidence BCE
    identity: float = 0.0  # weight of the cross-view identity-consistency loss on entity embeddings.
    #   0.1 until commit e027a99 (2026-12-05): off, test SVS(+0) rose by 5.2-5.7 points on three of four seeds
    #   (−0.8 on the fourth; relation and person_object_contact; identity_match within noise),
    #   docs/experiments.md
    track: float = 0.5  # weight of the person track's per-(view, frame) state CE (only with
    #   model.fusion.track; targets from the generator's metadata, inputs/track.py)
    track_locate: float = 0.0  # weight of the track locator's box loss (only with model.fusion.track;
    #   the asked person's box per frame from the generator's metadata, inputs/track.py
    #   track_boxes): -log of the attention the locator puts on the cells the box covers, or
    #   on its null cell where the person shows no pixel
    track_box: float = 0.0  # weight of the track's box loss (only with model.fusion.track_box_read):
    #   smooth L1 between its predicted box of the person and the generator's, on the frames that
    #   show the person
    view_count: float = 0.5  # weight of the per-frame people-count CE (only with
    #   model.view_counter; targets from the generator's per-view record, inputs/view_counts.py)
    mark_facts: float = 0.5  # weight of the mark facts' CE (only with model.entity.fact_head;
    #   targets from the generator's per-mark record, inputs/mark_facts.py)

    @property
    def track_only(self) -> bool:
        """Only the person track's terms (its state CE, and its locator's box loss) have a
        weight (the track's own stage, configs/track_stage.yaml): training and validation run
        the model's track path alone (CrossViewModel.forward_track), and validation scores the
        track, not answers."""
        others = (self.answer, self.evidence, self.entity_evidence, self.identity, self.view_count)
        return self.track > 0 and all(w == 0 for w in others)


@dataclass
class OptimConfig:
    RANGES: ClassVar[dict] = {"lr": "> 0", "weight_decay": ">= 0", "betas": "[0, 1)", "warmup_frac": "[0, 1]",
                              "min_lr_frac": "[0, 1]"}

    lr: float = 5e-4  # peak AdamW learning rate; 1e-3 kept the answer loss at ln 4 until epoch 5,
    #   5e-4 broke out at epoch 3-4 and ended higher (docs/experiments.md)
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_frac: float = 0.05  # fraction of steps with linear warm-up, then cosine decay to 0
    min_lr_frac: float = 0.05  # cosine floor as a fraction of lr
    lr_scale: dict[str, float] = field(default_factory=dict)  # parameter-name prefix -> factor on
    #   lr for the parameters it names (the first matching prefix counts; the schedule is the
    #   same), e.g. {"track.": 0.2}: a slower track in a joint run that follows its own stage
    #   (measured: no gain over the track's full rate, docs/experiments.md, 2026-12-05, e027a99)


@dataclass
class TrainerConfig:
    """Passed to lightning.Trainer; DDP / multi-node runs set strategy, devices, num_nodes."""

    RANGES: ClassVar[dict] = {"max_epochs": ">= 1", "num_nodes": ">= 1", "gradient_clip_val": ">= 0",
                              "log_every_n_steps": ">= 1", "check_val_every_n_epoch": ">= 1",
                              "limit_train_batches": "> 0"}

    max_epochs: int = 8  # the answer loss sits at ln 4 for about 4 epochs, then the cross-view
    #   pointer clicks in; 8 leave 3-4 epochs after that (docs/experiments.md)
    accelerator: str = "auto"  # "cpu", "gpu", "auto"
    devices: int | str = 1  # e.g. 8 or "auto"
    num_nodes: int = 1  # multi-node: set with strategy "ddp" and the cluster's launcher
    strategy: str = "auto"  # "ddp", "ddp_find_unused_parameters_true", "fsdp", ...
    precision: str = "32-true"  # "bf16-mixed" on a GPU
    gradient_clip_val: float = 1.0
    # Deterministic kernels where PyTorch has them (torch.use_deterministic_algorithms, warn_only):
    # without them the CPU embedding backward sums in a thread-dependent order, two processes
    # with the same seed drift apart at 1e-9 from step 2, and the test figures moved by up to
    # 4.5 points between identical runs. false: the default kernels (no measurable speed gain on CPU).
    deterministic: bool = True
    log_every_n_steps: int = 10
    monitor: Literal["val/acc", "val/track_acc", "val/track_seen_acc"] = "val/acc"  # the validation
    #   figure best.ckpt keeps the highest of; the track's state accuracy (on every recorded frame,
    #   or on the frames that show the person) for its own stage
    check_val_every_n_epoch: int = 1
    limit_train_batches: float = 1.0  # a float fraction or an int count (tests)
    enable_progress_bar: bool = True
    callbacks: list[str] = field(default_factory=list)  # extra Lightning callbacks, "package.module:Class"


@dataclass
class EvalConfig:
    """The held-out protocol run at the end of training (python -m eval, adapter crossview)."""
    enabled: bool = True
    split: str = "test"
    settings: list[str] = field(default_factory=lambda: ["+0", "+1", "+2", "+3", "-1", "all"])
    seed: int = 0
    val_settings: list[str] = field(default_factory=lambda: ["+0", "+2", "-1"])  # per-epoch val


@dataclass
class TrainConfig:
    RANGES: ClassVar[dict] = {"seed": ">= 0"}

    seed: int = 0  # seeds data order, augmentation and initialisation
    run_name: str = ""  # checkpoints/<run_name>; empty: derived from the config name and time
    out_dir: str = "checkpoints"
    stage: Literal["pretrain", "finetune"] = "pretrain"  # "finetune" requires init_from
    init_from: str | None = None  # checkpoint to start from (fine-tuning); weights only
    freeze: list[str] = field(default_factory=list)  # parameter-name prefixes kept fixed
    data: DataConfig = field(default_factory=DataConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    model: ModelConfig = field(default_factory=ModelConfig)


def load_train_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """The run config: defaults, then the YAML file, then ``key=value`` overrides."""
    cfg = load_config(TrainConfig, path, overrides)
    if cfg.stage == "finetune" and not cfg.init_from:
        raise ConfigError(f"{path}: a fine-tuning config needs init_from=checkpoints/<run>/best.ckpt")
    if cfg.trainer.monitor.startswith("val/track") and not cfg.model.fusion.track:
        raise ConfigError(f"{path}: trainer.monitor={cfg.trainer.monitor} needs model.fusion.track=true "
                          "(only the person track logs it)")
    if cfg.loss.track_only and not cfg.model.fusion.track:
        raise ConfigError(f"{path}: loss.track is the only weighted loss term, but model.fusion.track is off "
                          "(nothing would be trained)")
    if cfg.loss.track_only and cfg.model.entity.fact_head and cfg.loss.mark_facts > 0:
        raise ConfigError(f"{path}: loss.track is the only answer-side term, so steps run the track path alone "
                          f"and loss.mark_facts={cfg.loss.mark_facts} would train nothing: set it to 0 or turn "
                          "model.entity.fact_head off")
    if cfg.loss.track_box > 0 and not (cfg.model.fusion.track and cfg.model.fusion.track_box_read):
        raise ConfigError(f"{path}: loss.track_box={cfg.loss.track_box} trains the track's box head: it needs "
                          "model.fusion.track=true and model.fusion.track_box_read=true")
    for prefix, scale in cfg.optim.lr_scale.items():
        if not prefix or not scale > 0:
            raise ConfigError(f"{path}: optim.lr_scale needs a non-empty parameter-name prefix and a factor > 0, "
                              f"got {prefix!r}: {scale}")
    if cfg.loss.track_only and not cfg.trainer.monitor.startswith("val/track"):
        raise ConfigError(f"{path}: loss.track is the only weighted loss term, so validation scores no answers; "
                          f"set trainer.monitor to val/track_acc or val/track_seen_acc, not {cfg.trainer.monitor}")
    return cfg
