"""One exception type for bad user input: the CLI turns it into a message and exit status 2."""


class InputError(Exception):
    """Bad input. The message names the file, the line (when there is one) and the problem."""

    def __init__(self, problem: str, path: str | None = None, line: int | None = None):
        self.problem = problem
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + problem)
