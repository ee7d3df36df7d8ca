"""The entity reasoner's layers and tensor helpers (model/entity_layers.py)."""
from __future__ import annotations

import pytest
import torch

from model.entity_layers import pointed_set


def test_the_distinct_count_counts_each_pointed_person_once():
    # three persons: A seen in 3 images, B in 2, C in 1; the pointer holds A in one image only
    ids = torch.tensor([[0, 0, 0, 1, 1, 2]])
    a = (ids.unsqueeze(-1) == ids.unsqueeze(-2)).float()
    mask, person = torch.ones(1, 6, dtype=torch.bool), torch.ones(1, 6, dtype=torch.bool)
    p = torch.tensor([[1.0, 0, 0, 0, 0, 0]])
    p_set, n = pointed_set(p, a, mask, person)
    assert p_set.tolist() == [[1.0, 1.0, 1.0, 0, 0, 0]] and float(n) == pytest.approx(1.0)
    p = torch.tensor([[1.0, 0, 0, 0.01, 0.01, 0.01]])  # a weak pointer on B and C barely counts
    assert float(pointed_set(p, a, mask, person)[1]) == pytest.approx(1.02, abs=1e-4)
    p = torch.tensor([[0.0, 1.0, 0, 1.0, 0, 1.0]])
    assert float(pointed_set(p, a, mask, person)[1]) == pytest.approx(3.0)
    a_unsure = a * 0.9 + (1 - a) * 0.3 + torch.eye(6) * 0.1  # "same" below 0.5 spreads nothing
    assert float(pointed_set(p, a_unsure, mask, person)[1]) == pytest.approx(3.0, abs=0.3)
