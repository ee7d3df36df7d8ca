"""Input errors of the evaluator: every problem found, one line each, and an exit code."""
from __future__ import annotations

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
