"""A frozen readout that turns a tower's patch tokens into a predicted semantic grid.

The ceiling experiment (docs/results.md, ``scripts/probe_ceiling.py``) showed that the cross-view model
reaches its spatial targets when every cell of a view says what it shows (one-hot blocks: the
person owning the cell with shirt, trousers, hat, posture, arm states, touched object, visible
fraction; the object owning it; the view's person count). The tower's tokens carry much of
that, but the cross-view model would have to learn to decode it from ~2k multiple-choice
answers. The readout is that decoder, trained once with direct per-view labels
(``pretrain.fit_readout``) and frozen; its probabilities are appended to each patch token.
"""
from __future__ import annotations

from typing import Sequence

import torch
from timm.models.vision_transformer import Block
from torch import nn


class SemanticReadout(nn.Module):
    """Transformer blocks over a view's patch grid, then one classifier per semantic block.

    Args:
        dim: patch token width C.
        layout: (name, width) of each block of the grid, in order. A block of width 1 is a flag
            (one logit); a wider one a one-hot class, with one extra "not shown" class.
        depth: transformer blocks before the classifiers (they see the whole grid, which the
            per-view count needs).
        heads: attention heads.
        grid_cells: P, the number of patch tokens (a learned position per cell).
        width: the blocks' width (the tokens are projected to it).
    """

    def __init__(self, dim: int, layout: Sequence[tuple[str, int]], depth: int = 2, heads: int = 4,
                 grid_cells: int = 100, width: int = 128):
        super().__init__()
        self.dim = dim
        self.layout = [(str(n), int(w)) for n, w in layout]
        self.norm_in = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, width)
        self.pos = nn.Parameter(torch.zeros(1, grid_cells, width))
        self.blocks = nn.Sequential(*[Block(width, heads, mlp_ratio=2.0) for _ in range(depth)])
        self.norm_out = nn.LayerNorm(width)
        self.classes = [w if w == 1 else w + 1 for _, w in self.layout]
        self.head = nn.Linear(width, sum(self.classes))

    @property
    def out_dim(self) -> int:
        """Width of the probabilities ``forward`` returns (the sum of the block widths)."""
        return sum(w for _, w in self.layout)

    def logits(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Per block (B, P, n) logits, n = 1 for a flag, width + 1 (last: "not shown") otherwise.

        Args:
            tokens: (B, P, C) patch tokens, row-major grid.
        """
        x = self.blocks(self.proj(self.norm_in(tokens)) + self.pos)
        return list(self.head(self.norm_out(x)).split(self.classes, dim=-1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, P, out_dim) probabilities in the layout's order: a flag's sigmoid, a class block's
        softmax without its "not shown" column (so a block sums to the chance it is shown)."""
        parts = []
        for logit, (_, width) in zip(self.logits(tokens), self.layout):
            parts.append(logit.sigmoid() if width == 1 else logit.softmax(-1)[..., :width])
        return torch.cat(parts, dim=-1)
