"""The core's commands (each module an `add_parser(subparsers)`), and COMMANDS, the table of this
distribution's commands that keeps the command line's start-up short.

COMMANDS holds, for each of this distribution's `rerank.commands` entry points (pyproject.toml), its
entry-point value and the one-line help its parser shows in `rerank --help`. With it the command
line (rerank.cli) imports only the module of the command that runs, builds only its parser and
scans no entry points, and lists every command without importing their modules. Plug-ins of other
distributions are still found through their entry points (rerank.plugins), when a command is not in
the table or the commands are listed. tests/test_cli_startup.py checks the table against
pyproject.toml and against the help each module gives its own parser.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "add-feature": ("rerank.commands.add_feature:add_parser", "add a feature column from a file of scores"),
    "apply": ("rerank.commands.apply:add_parser", "rerank an n-best list with weights; write the 1-best"),
    "convert": ("rerank.commands.convert:add_parser", "convert an n-best list between formats"),
    "demo": ("rerank.recipes.demo_command:add_parser",
             "rerank the shipped Multi30k n-best lists end to end (a few minutes on a CPU)"),
    "embed": ("rerank.embeddings.command:add_parser",
              "train, evaluate and apply multilingual multi-modal sentence embeddings"),
    "eval": ("rerank.commands.eval:add_parser", "score systems with BLEU/METEOR/TER/chrF and significance tests"),
    "features": ("rerank.commands.features:add_parser",
                 "add feature columns from the installed feature plug-ins (s_s, s_i, mbr, channel, lm, ...)"),
    "generate": ("rerank.commands.generate:add_parser",
                 "write n candidates per source line by beam search or sampling from an NMT, CTranslate2 or "
                 "transformers model"),
    "info": ("rerank.commands.info:add_parser", "print counts and problems of an n-best list"),
    "lm": ("rerank.nmt.lm_command:add_parser",
           "train a GRU language model of the target language (the lm feature); score text"),
    "nmt": ("rerank.nmt.command:add_parser", "train an attention NMT model and generate n-best lists"),
    "oracle": ("rerank.commands.oracle:add_parser",
               "write the per-sentence oracle hypotheses and print their score (BLEU, chrF, TER, METEOR or a column)"),
    "recipe": ("rerank.recipes.recipe_command:add_parser",
               "end-to-end reproductions (multi30k: Calixto & Liu 2017, Tables 3/4)"),
    "report": ("rerank.commands.report:add_parser",
               "write an HTML report: significance, buckets, changed sentences, oracle curve"),
    "tune": ("rerank.commands.tune:add_parser", "tune feature weights with an installed tuner plug-in (mira, mert, pro, ...)"),
}
