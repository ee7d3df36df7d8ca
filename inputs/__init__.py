"""The model's input pipeline, shared by training and evaluation (neither imports the other
for it): the feature cache (``features``), prompt tokenisation (``text``), view sets built
into items and collated into batches (``items``), and checkpoints loaded without Lightning
(``checkpoint``). It imports bench and model only; never training, eval or Lightning."""
