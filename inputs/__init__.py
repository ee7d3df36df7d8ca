"""The model's input pipeline, shared by training and evaluation (neither imports the other
for it): the backbone and tokenizer built from a ModelConfig, with the one resolution of
``model.backbone.pretrained`` (``backbone.build_components``), the feature cache
(``features``), prompt tokenisation (``text``), view sets built into items and collated into
batches (``items``), and checkpoints loaded without Lightning (``checkpoint``). It imports
common, bench and model only; never training, eval or Lightning."""
