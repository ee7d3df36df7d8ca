"""Typed configuration of the cross-view model: one dataclass per component.

`ModelConfig` aggregates them and carries the ablation switches. YAML becomes these typed
configs in one place, common.config.from_dict (via training/config.py), where an unknown key
or a wrongly typed value is an error.

The defaults ARE the shipped model, the one `python train.py` trains (configs/default.yaml
adds only where the demo's data go and that it runs on the CPU). Each default that was
chosen by measurement says why in a comment; the figures are in docs/experiments.md.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Optional

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
# open_clip SimpleTokenizer ids of the words "1".."15" (it splits numbers into digits);
# checked against the tokenizer in tests/test_model_text.py.
CLIP_LABEL_TOKEN_IDS = [[272 + i] for i in range(9)] + [[272, 271 + i] for i in range(6)]


# open_clip SimpleTokenizer ids of the words naming each class of the mark facts, the facts one
# after another (inputs/mark_facts.py FACTS: shirt, trousers, hat, posture, arm_l, arm_r,
# contact_kind); checked against the tokenizer in tests/test_mark_facts.py.
_ARM_IDS = [[9510, 585, 5592, 1136], [24423, 585, 620, 531, 518, 1145], [18044, 518, 2463, 525, 518, 6584],
            [6883, 585, 4348, 518, 1375], [11358, 620, 531, 550, 14115], [26545]]
_COLOUR_IDS = [[736], [1746], [1901], [4481], [4287], [5496], [1579], [3360], [1449], [5046], [2866], [1470, 550]]
MARK_FACT_TOKEN_IDS = (_COLOUR_IDS + _COLOUR_IDS
                       + [[871, 3801], [736, 3801], [4481, 3801], [1449, 3801], [1579, 3801], [1746, 3801]]
                       + [[2862], [3941], [11476], [31206, 1439], [4919], [11358], [4738, 705]]
                       + _ARM_IDS + _ARM_IDS
                       + [[2586], [2063], [1069], [8170], [4269], [3724]])
MARK_FACT_SIZES = [12, 12, 6, 7, 6, 6, 6]  # classes per fact (inputs/mark_facts.py fact_sizes)

MAX_VIEW_COUNT = 7  # people-count classes 0..7 of model.view_counter (more people share class 7)

@dataclass
class BackboneConfig:
    """Frozen open_clip image tower; applied by the feature cache, not by CrossViewModel.

    Default: the in-domain CLIP tower shipped in checkpoints/backbone/synthclip-cnn16, a
    convolutional image tower (timm's cs3darknet_focus_s through open_clip's timm path,
    trained from scratch) read at its stride-16 stage (patch_layer 3: 256 channels, a 10x10
    grid at 160 px, one cell = 22 px of a 224-px render; its MODEL_CARD.md,
    configs/backbone/synthclip-cnn16.yaml). The ViT tower it replaced (synthclip-s16, still
    shipped) is configs/ablations/vit_backbone.yaml; the un-pretrained ViT-S-32 at 320 px before
    that is configs/ablations/random_backbone.yaml; the probes of all three: docs/experiments.md.
    """

    RANGES: ClassVar[dict] = {"embed_dim": ">= 0", "image_size": ">= 1", "pixel_cells": ">= 0", "pool_grid": ">= 1",
                              "std": "> 0"}


    arch: str = "synthclip-cnn16"  # open_clip model name (a label when vision_cfg or a local folder is given)
    vision_cfg: Optional[dict[str, Any]] = None  # custom open_clip CLIPVisionCfg dict (tests), random init
    embed_dim: int = 0  # pooled width for a custom vision_cfg (0: vision width)
    pretrained: Optional[str] = "checkpoints/backbone/synthclip-cnn16"  # local open_clip folder
    #   (relative: to the working directory, then the repository root), open_clip tag, local
    #   checkpoint path, or None (random weights, warns)
    image_size: int = 160  # square input side; images are resized (no crop) to it; must be the
    #   input size of a pretrained folder
    patch_layer: int = 3  # level whose tokens are returned (model.backbone.tower_levels: a ViT's
    #   block, a CNN's stage); the shipped tower's stride-16 stage, the tokens its auxiliary heads
    #   were trained on (a pretrained ViT: -1, its last block; a random tower: an early block)
    normalize_patches: bool = True  # apply the tower's final LayerNorm to the patch tokens
    pooled_source: Literal["clip", "patch_mean"] = "clip"  # "clip": the tower's projected
    #   image-text embedding (full forward; the shipped tower's knows the caption: people,
    #   colours, postures); "patch_mean": stop after patch_layer and average its tokens (much
    #   cheaper for early layers)
    pixel_cells: int = 0  # k > 0: append each grid cell's pixels, averaged to k x k sub-cells
    #   (3 k^2 values), to its patch tokens; patch_dim grows by 3 k^2. For random towers, which
    #   keep colour poorly; no gain measured (docs/experiments.md)
    pool_grid: Optional[int] = None  # adaptive-average-pool the patch grid to g x g (smaller cache)
    readout: Optional[str] = None  # folder of a frozen semantic readout (model/readout.py,
    #   readout_config.json + readout.safetensors; relative: to the working directory, then the
    #   repository root) whose per-cell probabilities are appended to the patch tokens
    readout_only: bool = False  # the patch tokens are the readout's probabilities alone (the
    #   ceiling's input format, predicted instead of true); needs a readout
    init_seed: int = 0  # seed for random init, so un-pretrained features are reproducible
    mean: tuple[float, float, float] = OPENAI_CLIP_MEAN  # per-channel normalisation of the tower
    std: tuple[float, float, float] = OPENAI_CLIP_STD  # per-channel normalisation of the tower


@dataclass
class CameraConfig:
    """Camera-aware embedding of patches, views and entities (Pluecker rays + floor points)."""

    RANGES: ClassVar[dict] = {"world_scale": "> 0", "floor_clip": "> 0", "hidden": ">= 1"}


    enabled: bool = True  # off: no ray embedding, no geometric entity bias (ablation)
    world_scale: float = 1.0  # metres per canonical unit; floor points are divided by it
    floor_clip: float = 8.0  # clamp floor (x, y) to +-this (canonical units): grazing rays
    hidden: int = 128  # hidden width of the ray MLP


@dataclass
class EntityConfig:
    """Entity tokens from mark boxes and the cross-view entity attention over them."""

    RANGES: ClassVar[dict] = {"roi_size": ">= 1", "max_label": ">= 1", "layers": ">= 0", "num_slots": ">= 1",
                              "slot_layers": ">= 0", "identity_dim": ">= 1"}


    attention: bool = True  # off: no geometric entity transformer, no scene slots (ablation)
    roi_size: int = 2  # RoIAlign output side; 2x2 separates shirt (top) from trousers (bottom)
    max_label: int = 15  # largest mark label drawn on images
    label_token_ids: Optional[list[list[int]]] = field(
        default_factory=lambda: [list(ids) for ids in CLIP_LABEL_TOKEN_IDS])
    # ^ LM token ids of each label word "1".."max_label": the label embedding starts as the
    #   mean embedding of the very tokens the question uses ("the person marked 3"), so
    #   matching question to mark needs no learning at first. None: a free embedding. Must
    #   follow the tokenizer (PromptTokenizer.label_token_ids); reset to None for lm_path.
    mark_roles: bool = True  # add an embedding of how the text names each mark (batch
    #   "mark_role": 1 = its label is a word of the question, 2 = it is an option, 3 = both)
    project: bool = False  # also project each mark into every other calibrated view (a token
    #   for the marked person as seen there; model/entities.py). Needs camera.enabled.
    layers: int = 2  # entity transformer blocks
    num_slots: int = 8  # learned scene-entity queries (>= people in a scene)
    slot_layers: int = 1  # cross-attention layers of the scene slots
    identity_dim: int = 64  # width of the L2-normalised identity embedding output
    fact_head: bool = False  # score every mark token after fusion against the words of each class of
    #   what its view shows of the person (model/fact_head.py; shirt, trousers, hat, posture, arms,
    #   touched object), trained by loss.mark_facts on the generator's per-mark records
    fact_sizes: list[int] = field(default_factory=lambda: list(MARK_FACT_SIZES))  # classes per fact
    fact_token_ids: Optional[list[list[int]]] = field(
        default_factory=lambda: [list(ids) for ids in MARK_FACT_TOKEN_IDS])
    # ^ LM token ids of each fact class's words (the facts one after another); None: a free
    #   vector per class. Must follow the tokenizer, like label_token_ids; reset to None for lm_path.


@dataclass
class FusionConfig:
    """Fusion transformer over question tokens, entity slots/tokens and view tokens."""

    RANGES: ClassVar[dict] = {"layers": ">= 0", "max_question_len": ">= 1", "prefix_tokens": ">= 1",
                              "prefix_layers": ">= 0", "frame_readers": ">= 0",
                              "track_layers": ">= 0", "track_states": ">= 1"}
    RETIRED_KEYS: ClassVar[dict[str, tuple[Any, str]]] = {
        # Prefix slots that also read every patch token drowned the entity tokens: val MVN(+0)
        # stayed at chance (docs/experiments.md). Older run configs carry it as false.
        "prefix_reads_patches": (False, "it measured no gain, see docs/experiments.md"),
    }
    # Options added later whose old behaviour a stored config without them must keep.
    ADDED_KEYS: ClassVar[dict[str, tuple[Any, str]]] = {
        "summary_last": (False, "before it, the summary tokens came first"),
        "track_last": ("all", "before it, the track token closed every question's prefix"),
        "track_word_norm": (False, "before it, the track read the projected words unnormalised"),
    }

    enabled: bool = True  # off: prefix = masked mean of frame tokens ("bag of frames" ablation)
    layers: int = 2  # timm ViT blocks
    max_question_len: int = 256  # size of the question position table
    prefix_tokens: int = 8  # learned set-invariant prefix slots handed to the LM
    prefix_layers: int = 2  # cross-attention layers of the prefix slots
    frame_readers: int = 0  # k > 0: k question-conditioned tokens per frame read its patch
    #   tokens (model/readers.py): the only per-person tokens when a question has no marks
    option_reader: bool = False  # add a direct score per option: its words, conditioned on the
    #   question, read the fused set (model/readers.py); zero-initialised
    summary_tokens: bool = True  # also hand the LM the bag-of-frames tokens (gated mean of the
    #   frame tokens and of the entity tokens before fusion): the ablation's shallow path;
    #   val SVS(+0) +5.6 points over three seeds, MVN unchanged (docs/experiments.md)
    summary_entities: Literal["attended", "raw"] = "attended"  # which entity tokens the summary
    #   pools: after the entity transformer, or the mark tokens as the tokenizer built them,
    #   what bag-of-frames pools. With the identity loss on (0.1 then) "raw" gave overall +1.4
    #   and +1.1 on two seeds, within noise; the loss was the larger cause of the single-view
    #   loss and is off since (docs/experiments.md, 2026-12-05, e027a99)
    summary_last: bool = True  # the summary tokens close the prefix, after the slots: the last
    #   context token, which predicts the option's first word, is then the bag of entities, a
    #   shallow path. First, the full model's answer loss sat at ln 4 for four epochs; last, it
    #   falls from epoch 1 (docs/experiments.md, "The prefix order")
    question_norm: bool = False  # LayerNorm the projected question words before fusion: raw LM
    #   embeddings (std 0.02) are ~1/20 of the type and position embeddings they are added to
    track: bool = False  # a per-person track (model/track.py): the question-named person's state
    #   on every (view, frame), merged over views, ordered over frames; T tokens join the fusion
    #   set and one pooled token the prefix. Its state head is trained by loss.track
    track_layers: int = 1  # transformer blocks over the track's frames
    track_states: int = 149  # size of the state vocabulary: len(inputs.track.TRACK_STATES)
    track_last: Literal["all", "unmarked"] = "unmarked"  # which prefixes the track token closes:
    #   "unmarked" = questions without marks (the temporal ones); a marked question's prefix keeps
    #   the summary tokens last, the pointer's shallow path (docs/experiments.md, 2026-12-03, 5e95b2b)
    track_word_norm: bool = True  # the track LayerNorms the question words it reads: the words of
    #   the random-init embedding table are ~1/4 of the projection's bias, so "red" and "blue"
    #   look alike and the locator took 16-20 stage epochs to find the named person instead of
    #   2-4 (docs/experiments.md, 2026-12-04, 16019d0). Unlike fusion.question_norm it leaves the words
    #   the rest of the model reads as they were
    track_motion: bool = False  # the state head also reads where the locator looked on each
    #   frame (centre and spread of its attention, and how much of it found the person) and how
    #   that moved since the view's previous frame and until its next: a jump is a bounce of
    #   the person's cells, a walk a drift (model/track.py, PersonTrack.motion)
    track_box_read: bool = False  # the state head also reads a 2x2 RoIAlign of the person's box on
    #   each frame, the box predicted from where the locator looked (loss.track_box trains it on
    #   the generator's boxes; in training the recorded box is read where there is one). The
    #   locator's attention sits on the upper half of the person; a probe given the box reads
    #   jumps at 92 % (docs/experiments.md, 2026-12-05, a7874a6)
    track_box_teacher: bool = True  # with track_box_read: in training the recorded box is read
    #   where there is one; false: always the predicted box, as in evaluation
    track_box_detach: bool = False  # with track_box_read: the box head reads the locator's output
    #   and attention detached, so loss.track_box trains the head alone and cannot pull the
    #   locator's attention off the person. Seed 0's stage: located 66 % against 59 without it,
    #   but 50.2 % of the frames read right against 53.9 (docs/experiments.md, 2026-12-05, c38dc33)
    track_oracle: bool = False  # DIAGNOSTIC: the recorded per-frame states (batch "track_target",
    #   read from the generator's metadata, test split included) replace the predicted ones


@dataclass
class EvidenceConfig:
    """Relevance per (view, frame) and per entity token."""

    gating: bool = True  # relevance gates (attention bias) what the prefix slots read


@dataclass
class LanguageHeadConfig:
    """Causal LM scoring each option's text after [prefix | prompt]."""

    RANGES: ClassVar[dict] = {"vocab_size": ">= 1", "pad_id": ">= 0", "layers": ">= 0", "heads": ">= 1",
                              "width": ">= 0", "max_positions": ">= 1", "clip_prior_gate": "> 0"}


    vocab_size: int = 49408  # open_clip SimpleTokenizer vocabulary (inputs/text.py)
    lm_path: Optional[str] = None  # local pretrained causal LM folder (own HF tokenizer); None: GPT-2
    gguf_file: Optional[str] = None  # GGUF file name inside lm_path, if the LM is stored as GGUF
    score_option: str = "text"  # continuation scored: "text" (option words) or "letter" (A-E)
    softmax: Literal["vocab", "options"] = "vocab"  # what each option token's log-prob is
    #   normalised over: the whole vocabulary, or only the distinct tokens of the sample's own
    #   options (no 49k-way projection; the step costs less, the scores stay per-sample)
    pad_id: int = 0  # id used for padding (never scored)
    layers: int = 2  # GPT-2 blocks (random init; ignored when a pretrained LM is passed in)
    heads: int = 4  # GPT-2 attention heads
    width: int = 0  # GPT-2 width; 0 = d_model (shares the width, no projection loss)
    max_positions: int = 512  # GPT-2 position table: prefix + prompt + option
    prefix_after_prompt: bool = True  # [prompt | prefix | option]: the last prefix slot
    #   predicts the first option token, a zero-hop visual path (before: [prefix | prompt | ...])
    length_norm: bool = True  # score = mean (not sum) token log-prob of the option text
    freeze_lm: bool = False  # freeze a pretrained LM passed to build_model
    option_match: bool = True  # add a bilinear option-embedding x prefix score (a shallow path)
    clip_prior: bool = False  # add the backbone's CLIP zero-shot logit of each option (its caption
    #   against the views' pooled image embeddings; inputs/clip_text.py), weighted per question
    #   by a learned gate that starts at clip_prior_gate. Needs a CLIP folder with a text tower
    clip_prior_gate: float = 1.0  # the gate's value at initialisation (1: the zero-shot logits as
    #   they are; at 1 the answer loss started at 1.67 against ln 4 = 1.39, docs/experiments.md)


@dataclass
class ModelConfig:
    """The whole cross-view model. Feature widths must match the cached backbone features."""

    RANGES: ClassVar[dict] = {"d_model": ">= 1", "heads": ">= 1", "mlp_ratio": "> 0", "dropout": "[0, 1)",
                              "patch_dim": ">= 1", "pooled_dim": ">= 1", "time_scale": "> 0",
                              "embed_std": "> 0", "view_counter": ">= 0"}


    d_model: int = 128  # width of every internal token
    heads: int = 4  # attention heads of internal blocks
    mlp_ratio: float = 2.0  # MLP hidden / d_model in internal blocks
    dropout: float = 0.0  # dropout in projections and blocks (0 in eval); none: the model
    #   underfits the ~2k training questions (train accuracy ends near 37 %)
    patch_dim: int = 256  # width C of cached patch tokens (the shipped tower: 256; synthclip-s16: 192; ViT-S: 384)
    pooled_dim: int = 128  # width of the cached pooled embedding (the shipped tower: 128; ViT-S: 384)
    time_scale: float = 10.0  # longest period (s) of the sinusoidal time features
    embed_std: Optional[float] = None  # init std of the additive learned embeddings (token type,
    # question position, mark label and role); None: PyTorch's N(0, 1), whose norm (~11 at d 128)
    # swamps what they are added to (docs/experiments.md, "Embedding scale")
    view_counter: int = 0  # > 0: a per-frame DeepSets people counter of this hidden width reads
    #   every frame's patches and adds to its frame token (model/view_encoder.py ViewCounter;
    #   supervised by loss.view_count); 0: none
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    camera: CameraConfig = field(default_factory=CameraConfig)
    entity: EntityConfig = field(default_factory=EntityConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    lm: LanguageHeadConfig = field(default_factory=LanguageHeadConfig)

    @property
    def lm_width(self) -> int:
        return self.lm.width or self.d_model


def tiny_backbone_config() -> BackboneConfig:
    """A 2-block, 16-wide random ViT on 32-px images (4x4 grid of 8-px patches) for tests."""
    return BackboneConfig(
        arch="tiny-vit", pretrained=None, image_size=32, embed_dim=16, patch_layer=-2,
        vision_cfg=dict(image_size=32, patch_size=8, width=16, layers=2, head_width=8),
    )


def tiny_model_config(**overrides: Any) -> ModelConfig:
    """A model small enough for unit tests (seconds on CPU); `overrides` are top-level fields."""
    cfg = ModelConfig(
        d_model=32, heads=2, dropout=0.0, patch_dim=16, pooled_dim=16,
        backbone=tiny_backbone_config(),
        camera=CameraConfig(hidden=32),
        entity=EntityConfig(layers=1, num_slots=4, identity_dim=16,
                            label_token_ids=[[1 + i % 9] for i in range(15)]),
        fusion=FusionConfig(layers=1, prefix_tokens=4, prefix_layers=1, max_question_len=64),
        lm=LanguageHeadConfig(vocab_size=64, layers=1, heads=2, max_positions=128),
    )
    return dataclasses.replace(cfg, **overrides)
