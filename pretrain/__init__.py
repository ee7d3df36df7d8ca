"""The frozen front end's own training, apart from the cross-view run.

The in-domain CLIP tower: its corpus of single rendered views (``pretrain.corpus``), the image-text
and auxiliary losses with their heads (``pretrain.tower``, ``pretrain.heads``), the export to an
open_clip folder with its model card (``pretrain.export``), and the semantic readout fitted on a
frozen tower (``pretrain.fit_readout``). The perception on that tower: its corpus of images and
entity records (``pretrain.perception_corpus``), its fit (``pretrain.perception_corpus_fit``; the
plain heads on a benchmark's train split: ``pretrain.perception_fit``) and its shipping with figures
and a model card (``pretrain.perception``).

    python -m pretrain.tower --config configs/backbone/synthclip-cnn16.yaml --out checkpoints/backbone/synthclip-cnn16
    python -m pretrain.fit_readout --config configs/backbone/synthclip-s16-readout.yaml --out DIR backbone=TOWER
    python -m pretrain.perception_corpus --out data/perception-corpus --images 32000
    python -m pretrain.perception --corpus data/perception-corpus --out DIR
"""
