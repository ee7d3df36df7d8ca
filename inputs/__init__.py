"""The model's input pipeline, shared by training and evaluation (neither imports the other for
it): the frozen tower from its folder (``backbone``), the feature cache (``features``), the
perception heads' records (``perception``, ``entity_records``: predicted once and cached, or the
truth for the ceiling), entity batches (``entity_batch``) and the checkpoint read without
Lightning (``checkpoint``). It imports common, bench and model only; never training, eval or
Lightning."""
