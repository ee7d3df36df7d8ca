"""Typed configuration of the synthetic benchmark generator.

Loaded with ``common.config.load_config(SynthConfig, yaml, overrides)``; every field has a
comment saying what it controls. Sizes are in metres, angles in degrees, images in pixels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from common.config import ConfigError, check_ranges
from bench.synth.primitives import COLOURS

ALL_TASKS = [
    "dedup_count", "identity_match", "person_object_contact",
    "limb_contact", "limb_occlusion", "action_count",
    "attribute", "relation", "count_in_view",
]
SVS_TASKS = {"attribute", "relation", "count_in_view"}  # the single-view-sufficient ones (bench/synth/tasks.py)
# The ranges the generator is built and tested for (tests/test_generator_ranges.py builds
# scenes at their corners); a value outside them fails at load time naming the key.
PERSONS = "[1, 16]"           # people in a spatial scene (shirt colours may repeat)
TEMPORAL_PERSONS = (f"[1, {len(COLOURS)}]", f"each person of a temporal scene wears a shirt colour of their own "
                    f"and the palette has {len(COLOURS)}")
CAMERAS = "[2, 12]"           # cameras of a scene, spatial or temporal
RADIUS = "> 0"                # camera distance from the centre (and beyond the people: see __post_init__)
ELEVATION = "> 0"             # camera height above the floor
FOV = "(0, 180)"              # horizontal field of view, degrees
TEMPORAL_TASKS = [
    "trajectory", "repetition_count", "motion_recognition",
    "limb_repetition_count", "limb_action_order", "limb_contact_over_time",
]


@dataclass
class SceneConfig:
    RANGES: ClassVar[dict] = {"min_persons": PERSONS, "max_persons": PERSONS, "object_weights": ">= 0",
                              "min_cameras": CAMERAS, "max_cameras": CAMERAS, "scene_radius": "> 0",
                              "shared_shirt_prob": "[0, 1]", "hat_prob": "[0, 1]", "min_height": "> 0",
                              "max_height": "> 0", "cluster_prob": "[0, 1]"}

    min_persons: int = 2          # people per scene, inclusive range (1-16; shirts may repeat)
    max_persons: int = 8
    object_weights: list[float] = field(default_factory=lambda: [0.04, 0.06, 0.1, 0.2, 0.3, 0.3])
    # ^ probability of 0, 1, ..., 5 objects; skewed high because object tasks need several
    min_cameras: int = 4          # calibrated cameras on the ring, inclusive range (2-12)
    max_cameras: int = 6
    scene_radius: float = 2.0     # people and objects stand inside this disc
    shared_shirt_prob: float = 0.7  # chance that a scene has (at least) two people with one shirt colour
    hat_prob: float = 0.3         # chance that a person wears a hat
    min_height: float = 1.5       # body height range
    max_height: float = 1.95
    cluster_prob: float = 0.6     # chance a free person stands close behind another (occlusion)


@dataclass
class CameraConfig:
    RANGES: ClassVar[dict] = {"min_radius": RADIUS, "max_radius": RADIUS, "min_elevation": ELEVATION,
                              "max_elevation": ELEVATION, "min_fov": FOV, "max_fov": FOV,
                              "aim_jitter": ">= 0", "yaw_jitter": ">= 0"}

    min_radius: float = 3.2       # camera distance from the scene centre (beyond the people's disc)
    max_radius: float = 4.8
    min_elevation: float = 0.8    # camera height above the floor
    max_elevation: float = 2.6
    min_fov: float = 38.0         # horizontal field of view, degrees
    max_fov: float = 52.0
    aim_jitter: float = 1.5       # look-at point offset (m); larger gives more partial views
    yaw_jitter: float = 18.0      # deviation from evenly spaced ring positions


@dataclass
class RenderConfig:
    RANGES: ClassVar[dict] = {"width": ">= 1", "height": ">= 1", "ambient": "[0, 1]"}

    width: int = 224
    height: int = 224
    light_azimuth: float = 35.0   # directional light for Lambert shading
    light_elevation: float = 55.0
    ambient: float = 0.35


@dataclass
class ObserveConfig:
    RANGES: ClassVar[dict] = {"min_entity_frac": "[0, 1]", "min_entity_px": ">= 0", "min_part_px": ">= 0",
                              "min_part_visible": "[0, 1]", "gap_px": ">= 0", "confirm_angle": "[0, 180]",
                              "min_separated_frac": "[0, 1]"}

    min_entity_frac: float = 0.0006  # visible if its pixels >= this share of the image ...
    min_entity_px: int = 4           # ... and at least this many pixels
    min_part_px: int = 3             # a body part is visible with this many pixels ...
    min_part_visible: float = 0.3    # ... and this share of its unoccluded pixels
    gap_px: float = 1.5              # 2-D gap (at 224 px) below which masks count as touching
    confirm_angle: float = 30.0      # two overlapping views this far apart confirm a contact
    min_separated_frac: float = 0.5  # both entities this visible for a "separated" whole-body verdict


@dataclass
class OptionConfig:
    RANGES: ClassVar[dict] = {"none_share": "[0, 1]"}

    mode: str = "ssmn"            # "ssmn": 4 options A-D; "cvbench": A-D plus "None of the above" as E
    none_share: float = 0.2       # cvbench: share of questions whose answer is "None of the above"


@dataclass
class TaskConfig:
    RANGES: ClassVar[dict] = {"per_scene": ">= 1", "value_cap": "> 0", "major_value_share": "[0, 1]",
                              "max_task_share": "(0, 1]", "mvn_extra_views": ">= 0", "svs_extra_views": ">= 0"}

    enabled: list[str] = field(default_factory=lambda: list(ALL_TASKS))
    per_scene: int = 2            # verified questions kept per task and scene (before balancing)
    value_cap: float = 1.0        # an answer value may appear at most this times the rarest common value
    major_value_share: float = 0.08  # values with at least this share of a task count as common
    max_task_share: float = 0.2   # no task takes more than this share of a split
    mvn_extra_views: int = 2      # size of extra_views for MVN questions
    svs_extra_views: int = 3      # size of extra_views for SVS questions


@dataclass
class TemporalConfig:
    RANGES: ClassVar[dict] = {
        "n_scenes": ">= 0", "extra_train_scenes": ">= 0", "frame_dt": "> 0",
        "min_persons": TEMPORAL_PERSONS, "max_persons": TEMPORAL_PERSONS, "cameras": CAMERAS,
        "object_weights": ">= 0", "area_radius": "> 0", "panels": ">= 0", "cross_margin": ">= 0",
        "place_tries": ">= 1", "per_scene": ">= 1", "max_task_share": "(0, 1]",
        # a hand-action script holds two actions of 2-3 frames each and a resting frame first
        # (bench/synth/motion.py): with 6 frames or fewer the generator fails inside a worker
        "frames": (">= 7", "two hand actions of up to 3 frames each after a resting frame"),
    }

    n_scenes: int = 0             # temporal scenes over all splits (0: spatial only); T x cameras images each
    extra_train_scenes: int = 0   # temporal scenes added to the train split only (as the spatial key)
    frames: int = 8               # T synchronized frames per camera
    frame_dt: float = 0.5         # seconds between frames
    min_persons: int = 8          # people per temporal scene, inclusive range (1-12: shirts are unique);
    max_persons: int = 9          # ... many, so each clip holds several questions and people hide each other
    cameras: int = 4              # synchronized cameras (CVBench uses 4; 2-12)
    object_weights: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.3, 0.4, 0.3])
    # ^ probability of 0..5 objects: trajectories and touches need at least three
    area_radius: float = 3.2      # people stay inside this disc (keep it below camera.min_radius)
    panels: int = 2               # tall screens people walk behind (they hide part of a motion)
    camera: CameraConfig = field(default_factory=lambda: CameraConfig(
        min_radius=3.8, max_radius=4.8, min_fov=36.0, max_fov=46.0, aim_jitter=1.6))
    # ^ each camera aims to one side (aim_jitter = largest offset): people walk in and out of its view
    divide: bool = True           # cameras in pairs at both ends of a line, each seeing one side of it,
    # ^ and everybody crosses the line (else: ring cameras aimed to alternating sides)
    cross_margin: float = 0.3     # divide: a path must reach this far (m) to both sides of the line
    place_tries: int = 100        # draws per person before giving up on placing them
    enabled: list[str] = field(default_factory=lambda: list(TEMPORAL_TASKS))
    per_scene: int = 5            # verified questions kept per task and temporal scene (before balancing)
    max_task_share: float = 0.2   # no temporal task takes more than this share of a split's temporal questions


@dataclass
class SynthConfig:
    RANGES: ClassVar[dict] = {"seed": ">= 0", "n_scenes": ">= 0", "extra_train_scenes": ">= 0",
                              "split_fractions": "[0, 1]", "workers": ">= 0"}

    name: str = "synth-spatial"   # benchmark name written to benchmark.json
    seed: int = 0                 # the same seed and config give byte-identical output
    n_scenes: int = 300           # scenes over all splits
    split_fractions: list[float] = field(default_factory=lambda: [0.6, 0.1, 0.3])  # train, val, test
    # Spatial scenes added to the train split only, after the n_scenes that split_fractions cuts:
    # more training questions with val and test the same samples and images whatever its value
    # (their scenes, seeds and balancing streams do not depend on it).
    extra_train_scenes: int = 0
    workers: int = 0              # processes; 0 = one per CPU core
    # "balanced": every split is the balanced selection (answer values, options, oracle hits,
    # task shares; bench/synth/balance.py). "verified": the train split keeps every verified
    # question (+77 % on the default config, from the same images); val and test keep the same
    # samples either way (their benchmark.json records this key), so the evaluation does not change.
    train_selection: str = "balanced"
    # Which verified questions a train scene offers selection (train_selection). "sampled": at most
    # tasks.per_scene (temporal.per_scene) per task, from its first proposals, as val and test scenes.
    # "dense": every verified question the scene supports (every template for every person, object,
    # pair, view and count; each verified like any other), from the same images; val and test keep
    # the same samples and images either way (configs/bench/dense.yaml).
    train_questions: str = "sampled"
    # The wording of the questions (bench/synth/wording.py). "primary": the one every split of the
    # other configs uses. "paraphrase": a second template per task (other words, other order, the
    # same meaning and options), for test-only benchmarks (configs/bench/paraphrase.yaml): a config
    # with train or val scenes may not use it, so no model trains or selects on its wording.
    question_template: str = "primary"
    scene: SceneConfig = field(default_factory=SceneConfig)
    camera: CameraConfig = field(default_factory=CameraConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    observe: ObserveConfig = field(default_factory=ObserveConfig)
    options: OptionConfig = field(default_factory=OptionConfig)
    tasks: TaskConfig = field(default_factory=TaskConfig)
    temporal: TemporalConfig = field(default_factory=TemporalConfig)

    def __post_init__(self) -> None:
        """Ranges (RANGES of every section) and what ties fields together; ConfigError naming the key."""
        check_ranges(self)
        unknown = sorted(set(self.tasks.enabled) - set(ALL_TASKS))
        if unknown:
            raise ConfigError(f"tasks.enabled: unknown task(s) {unknown}; known: {ALL_TASKS}")
        unknown = sorted(set(self.temporal.enabled) - set(TEMPORAL_TASKS))
        if unknown:
            raise ConfigError(f"temporal.enabled: unknown temporal task(s) {unknown}; known: {TEMPORAL_TASKS}")
        if self.train_selection not in ("balanced", "verified"):
            raise ConfigError(f"train_selection must be 'balanced' or 'verified', got {self.train_selection!r}")
        if self.train_questions not in ("sampled", "dense"):
            raise ConfigError(f"train_questions must be 'sampled' or 'dense', got {self.train_questions!r}")
        if self.question_template not in ("primary", "paraphrase"):
            raise ConfigError(f"question_template must be 'primary' or 'paraphrase', got {self.question_template!r}")
        if self.question_template == "paraphrase" and (any(self.split_fractions[:2]) or self.extra_train_scenes
                                                       or self.temporal.extra_train_scenes):
            raise ConfigError("question_template: paraphrase is for test-only benchmarks: set split_fractions to "
                              "[0, 0, 1] and extra_train_scenes, temporal.extra_train_scenes to 0")
        if self.options.mode not in ("ssmn", "cvbench"):
            raise ConfigError(f"options.mode must be 'ssmn' or 'cvbench', got {self.options.mode!r}")
        if len(self.split_fractions) != 3 or abs(sum(self.split_fractions) - 1.0) > 1e-6:
            raise ConfigError("split_fractions must be three numbers (train, val, test) summing to 1")
        for section, low, high in (("scene", "min_persons", "max_persons"), ("scene", "min_cameras", "max_cameras"),
                                   ("scene", "min_height", "max_height"), ("camera", "min_radius", "max_radius"),
                                   ("camera", "min_elevation", "max_elevation"), ("camera", "min_fov", "max_fov"),
                                   ("temporal", "min_persons", "max_persons"),
                                   ("temporal.camera", "min_radius", "max_radius"),
                                   ("temporal.camera", "min_elevation", "max_elevation"),
                                   ("temporal.camera", "min_fov", "max_fov")):
            node = self
            for name in section.split("."):
                node = getattr(node, name)
            lo, hi = getattr(node, low), getattr(node, high)
            if lo > hi:
                raise ConfigError(f"{section}.{low} ({lo}) must not exceed {section}.{high} ({hi})")
        # a question shows its resolving views (MVN: at least 2, SVS: the golden one) plus the extra
        # views: with fewer cameras than that a scene can hold no question of the kind
        spatial = self.n_scenes + self.extra_train_scenes > 0
        temporal = self.temporal.n_scenes + self.temporal.extra_train_scenes > 0 and bool(self.temporal.enabled)
        kinds = {"SVS" if t in SVS_TASKS else "MVN" for t in self.tasks.enabled}
        tk = self.tasks
        for used, cams, what, resolving, extra in (
                (spatial and "MVN" in kinds, "scene.max_cameras", "an MVN question", 2, "tasks.mvn_extra_views"),
                (spatial and "SVS" in kinds, "scene.max_cameras", "an SVS question", 1, "tasks.svs_extra_views"),
                (temporal, "temporal.cameras", "a temporal question", 2, "tasks.mvn_extra_views")):
            n_cams = self.scene.max_cameras if cams == "scene.max_cameras" else self.temporal.cameras
            n_extra = tk.mvn_extra_views if extra == "tasks.mvn_extra_views" else tk.svs_extra_views
            if used and n_cams < resolving + n_extra:
                raise ConfigError(f"{cams} ({n_cams}) is too few for {what}: {resolving} resolving view(s) plus "
                                  f"{extra} ({n_extra}); lower {extra} or add cameras")
        # cameras stand outside the disc the people stand in (else a camera may stand inside someone)
        for cam, disc in (("camera", "scene.scene_radius"), ("temporal.camera", "temporal.area_radius")):
            node = self.camera if cam == "camera" else self.temporal.camera
            radius = self.scene.scene_radius if disc == "scene.scene_radius" else self.temporal.area_radius
            if node.min_radius <= radius:
                raise ConfigError(f"{cam}.min_radius ({node.min_radius}) must exceed {disc} ({radius}): "
                                  "cameras stand outside the disc the people stand in")
