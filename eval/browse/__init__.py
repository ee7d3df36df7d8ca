"""The run browser: ``python -m eval browse RUN [RUN ...] --out DIR`` (see pages.py)."""
from eval.browse.pages import build_browser

__all__ = ["build_browser"]
