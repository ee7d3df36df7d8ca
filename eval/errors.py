"""Errors of the evaluator: input problems (every one found, one line each) and run failures,
each with an exit code (2: a bad argument, 1: bad data or a failing service)."""
from __future__ import annotations

import errno

USAGE = 2  # a bad argument: unknown model, setting, --model-arg (argparse uses 2 as well)
DATA = 1  # bad input data: benchmark, output folder, reference runs


class EvalInputError(ValueError):
    """The run cannot start; nothing has been written to the output folder.

    ``problems`` are complete one-line messages ("ERROR file:sample:field: message" for a
    benchmark problem); ``exit_code`` is 2 when any problem is a bad argument, else 1.
    """

    def __init__(self, problems: list[str], exit_code: int = DATA):
        self.problems = list(problems)
        self.exit_code = exit_code
        super().__init__("\n".join(self.problems))


class RunError(RuntimeError):
    """A run stopped for a reason outside the code: the endpoint, a file, a checkpoint.

    The message is one complete line naming the URL or file and what to do; the CLI prints
    it without a traceback and exits with ``exit_code`` (1: bad data or a failing service).
    Answers written before the failure are kept, so rerunning the same command continues.
    """

    exit_code = DATA


def describe_failure(err: BaseException) -> str:
    """One line for a failure that is not a bug in this code: what failed, where, what to do."""
    if isinstance(err, OSError) and err.filename:
        hint = {errno.ENOSPC: "free some space and rerun the same command (finished work is kept)",
                errno.EDQUOT: "free some space and rerun the same command (finished work is kept)",
                errno.EACCES: "check the permissions", errno.EROFS: "write to another folder",
                errno.ENOENT: "check the path"}.get(err.errno, "check the file and rerun the same command")
        line = f"ERROR {err.filename}: {err.strerror or err}; {hint}"
    elif isinstance(err, RunError):
        line = f"ERROR {err}"
    else:
        line = f"ERROR {type(err).__name__}: {err} (rerun with --debug for the traceback)"
    return " ".join(line.split())
