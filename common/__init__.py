"""The plumbing every package shares: typed config loading (``common.config``), atomic file
writes (``common.atomic``) and where a result came from (``common.provenance``).

It sits below every other package of the project and imports none of them, so bench, model,
inputs, training and eval may all use it.
"""
