"""The in-domain CLIP tower's own training, apart from the cross-view run: its corpus of single
rendered views (``pretrain.corpus``), the image-text and auxiliary losses with their heads
(``pretrain.tower``, ``pretrain.heads``), the export to an open_clip folder with its model card
(``pretrain.export``), and the semantic readout fitted on a frozen tower (``pretrain.fit_readout``).

    python -m pretrain.tower --config configs/backbone/synthclip-cnn16.yaml --out checkpoints/backbone/synthclip-cnn16
    python -m pretrain.fit_readout --config configs/backbone/synthclip-s16-readout.yaml --out DIR backbone=TOWER
"""
