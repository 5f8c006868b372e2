"""One exception type for bad user input: the CLI turns it into a message and exit status 2."""

from collections.abc import Iterable
from types import TracebackType
from typing import Literal


class InputError(Exception):
    """Bad input. The message names the file, the line (when there is one) and the problem; a
    problem with one option starts with the option's Python name and sets `option`, which the
    command line replaces by its flag (`bootstrap must be ...` is said `--bootstrap must be ...`);
    `mentions` are the other options the message names (as words of their own), which the command
    line says as their flags wherever they stand (`... needs comet_model PATH` reads `... needs
    --comet-model PATH`). A word that is no option, a feature or a file named like one, is left alone."""

    def __init__(self, problem: str, path: str | None = None, line: int | None = None, *, option: str | None = None,
                 mentions: tuple[str, ...] = ()):
        self.problem = problem
        self.path = path
        self.line = line
        self.option = option   # the keyword (field) the problem is about: the command line names its flag
        self.mentions = tuple(mentions)
        self.dests: dict[str, str] = {}   # field -> the command line's destination, for a plug-in's prefixed flags
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + problem)

    def of_options(self, dests: dict[str, str]) -> "InputError":
        """Say that the options this error names (`option`, `mentions`) are those of one plug-in
        whose flags carry a prefix (`--mbr-centroids` for MBROptions.centroids): `dests` maps
        its fields to their command-line destinations. The innermost plug-in's mapping stays."""
        if not self.dests:
            self.dests = dict(dests)
        return self


class NeedsOption(InputError):
    """Input that a reading option settles: `options` names the keywords (such as `format`,
    `nbest_size`) that would; the command line adds their flags to the message."""

    def __init__(self, problem: str, path: str | None = None, line: int | None = None, options: tuple[str, ...] = ()):
        self.options = options
        super().__init__(problem, path, line)


# Modules of the optional extras (pyproject.toml), by extra: the core imports none of them.
NEURAL_MODULES = frozenset({"torch", "torchvision", "sklearn", "sentencepiece", "sacremoses", "PIL"})
EXTRA_OF_MODULE = {**{module: "neural" for module in NEURAL_MODULES}, "transformers": "hf", "tokenizers": "hf",
                   "safetensors": "hf", "ctranslate2": "ct2", "sentence_transformers": "st", "comet": "comet",
                   "bert_score": "neural", "protobuf": "hf"}


def install_line(module: str) -> str:
    """The pip command that installs the extra holding `module`."""
    return f"pip install 'mlmme-rerank[{EXTRA_OF_MODULE.get(module, 'neural')}]'"


class MissingDependency(InputError, ImportError):
    """A module of the `neural` extra (torch, scikit-learn, ...) is needed and not installed.

    An InputError, so the command line prints it in one line with exit status 2, and an
    ImportError, so a script can catch it as one."""

    def __init__(self, module: str, what: str | None = None):
        self.module = module
        self.what = what
        super().__init__(f"{what or 'this'} needs {module}, which is not installed: {install_line(module)}")


def missing_neural(exc: BaseException) -> str | None:
    """The top-level module of an extra whose absence `exc` reports (a ModuleNotFoundError), else None."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        root = exc.name.split(".")[0]
        if root in EXTRA_OF_MODULE:
            return root
    return None


def require(modules: Iterable[str], what: str) -> None:
    """MissingDependency unless every module of `modules` (top-level names, e.g. ("torch",)) is
    installed; checked without importing them, so a command can refuse before any work."""
    import importlib.util

    for module in modules:
        with needs_neural(what):
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(f"No module named {module!r}", name=module)


class needs_neural:
    """`with needs_neural("the s_s feature"):` turns a missing torch/scikit-learn/transformers/...
    import inside into MissingDependency naming what needs it and the extra's install line."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self) -> "needs_neural":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        module = missing_neural(exc) if exc is not None else None
        if module is not None:
            raise MissingDependency(module, self.what) from None
        return False
