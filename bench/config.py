"""Moved to ``common.config``; this module re-exports it for the files that still import it here."""
from common.config import *  # noqa: F401,F403
