"""Options shared by the commands that read n-best lists: the flags of an `rerank.NBestFile` (the
format, strict reading, the formats' reading options, the text's post-processing, the cache), the
NBestFile of the parsed flags, and the flags named in a reading error."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from rerank.errors import InputError, NeedsOption
from rerank.formats import POST_PROCESS, UNESCAPE, format_names, formats, reading_options

def installed_tuners() -> dict:
    """name -> class of every installed tuner (rerank.plugins): the tune command's flags and help."""
    from rerank import plugins

    return plugins.tuners()


def installed_features() -> dict:
    """name -> class of every installed feature plug-in (rerank.plugins): the features command's flags."""
    from rerank import plugins

    return plugins.features()


def format_help() -> str:
    """The formats' one-line layouts, from the format table (plug-ins included)."""
    layouts = "; ".join(f"{name} ({record.layout})" for name, record in formats().items())
    return (f"n-best formats: {layouts}. The format is detected from the first lines unless --format is given. "
            "Input may be gzip'd; - is stdin.")


# the reading options' command-line dest (`--src` of the features command is its own)
_DEST = "nbest_option_"


def add_nbest_input(parser: argparse.ArgumentParser, positional: bool = True, owned: dict[str, str] | None = None) -> None:
    """The n-best input options: --format and every format's reading options (from the format
    table), --strict, the text's post-processing and the cache. `owned`: reading options the
    command has an option for itself (reader keyword -> its dest), such as the features command's
    --src."""
    if positional:
        parser.add_argument("nbest", help="input n-best file")
    group = parser.add_argument_group("n-best input")
    group.add_argument("--format", dest="in_format", choices=format_names(), help="input format (default: detected)")
    group.add_argument("--strict", action="store_true", help="a feature missing on some line is an error (default: fill with 0 and report)")
    owned = dict(owned or {})
    add_reading_options(group, owned=owned)
    add_text_options(group)
    group.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                       help="keep the parsed list in a binary cache keyed by the file's SHA-256 and reuse it (single-file "
                       "formats; folder: nbest/ under $RERANK_CACHE_DIR, else ~/.cache/mlmme-rerank) (default: on "
                       "when RERANK_CACHE_DIR is set, else off)")
    parser.set_defaults(nbest_owned_options=owned)


def _flag(flag: str, prefix: str) -> str:
    """A reading option's flag under `prefix`: --plain-ids is --nbest-plain-ids (eval's --nbest lists);
    a flag that has the prefix already (--nbest-size) stays."""
    return flag if not prefix or flag.startswith("--" + prefix) else f"--{prefix}{flag[2:]}"


def add_reading_options(group, prefix: str = "", owned: dict[str, str] | None = None, help_prefix: str = "") -> None:
    """Every format's reading options (rerank.formats.reading_options) as flags of `group`, each named
    with `prefix` and stored under one dest (`read_options` collects them); not those in `owned`."""
    for option in reading_options():
        if option.key not in (owned or {}):
            group.add_argument(_flag(option.flag, prefix), dest=_DEST + option.key, metavar=option.metavar,
                               choices=option.choices, default=option.default, help=help_prefix + option.help,
                               type=option.type or str)


def add_text_options(group, where: str = "the hypotheses") -> None:
    """--post-process and --unescape (rerank.formats.text)."""
    group.add_argument("--post-process", choices=POST_PROCESS, default="none",
                       help=f"undo subword segmentation in {where}, as fairseq's --post-process: sentencepiece "
                       "(`\u2581` -> space), subword_nmt (join `@@ `) (default: %(default)s)")
    group.add_argument("--unescape", choices=UNESCAPE, default="none",
                       help=f"undo Moses/Marian escaping in {where}: html (&amp; &lt; &gt; &quot; &apos; &#124; "
                       "&#91; &#93;) (default: %(default)s)")


def read_options(args: argparse.Namespace) -> dict:
    """The formats' reading options given on the command line, by the reader's keyword."""
    owned = getattr(args, "nbest_owned_options", {})
    return {option.key: getattr(args, owned.get(option.key, _DEST + option.key), None) for option in reading_options()}


def with_flags(exc: NeedsOption, prefix: str = "") -> InputError:
    """The error with the flags that give the options it needs (`--format NAME`, `--nbest-size N`, ...)."""
    flags = {option.key: f"{_flag(option.flag, prefix)} {option.metavar or option.key.upper()}"
             for option in reading_options()}
    flags["format"] = f"--{prefix}format NAME"
    named = " or ".join(flags.get(key, key) for key in exc.options)
    return InputError(f"{exc.problem} ({named})", exc.path, exc.line)


def nbest_file(args: argparse.Namespace, path: str | None = None):
    """The `rerank.NBestFile` of `path` (default `args.nbest`) with the n-best input flags."""
    from rerank.nbestfile import NBestFile

    return NBestFile(path or args.nbest, format=args.in_format, strict=args.strict, cache=getattr(args, "cache", None),
                     post_process=getattr(args, "post_process", None), unescape=getattr(args, "unescape", None),
                     options=read_options(args))


@contextlib.contextmanager
def reading(prefix: str = "") -> Iterator[None]:
    """Inside, an error that a reading option settles (NeedsOption) names the flags that give it."""
    try:
        yield
    except NeedsOption as exc:
        raise with_flags(exc, prefix) from None


def add_output_format(parser: argparse.ArgumentParser, default: str = "moses") -> None:
    parser.add_argument("--to", dest="out_format", choices=format_names(writable=True), default=default,
                        help=f"output n-best format (default: {default}); plain writes OUT, OUT.ids and OUT.features.tsv")


def add_list_flags(group, prefix: str, format_help: str, strict_help: str) -> None:
    """The flags of the n-best lists a command reads besides its own input (eval's and report's
    --nbest lists), under `prefix`: --PREFIXformat, --PREFIXstrict and the formats' reading options,
    stored where `nbest_file` reads them."""
    group.add_argument(f"--{prefix}format", dest="in_format", choices=format_names(), help=format_help)
    group.add_argument(f"--{prefix}strict", dest="strict", action="store_true", help=strict_help)
    add_reading_options(group, prefix=prefix, help_prefix=f"--{prefix.rstrip('-')} lists: ")
