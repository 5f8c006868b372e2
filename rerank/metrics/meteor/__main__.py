"""`python -m rerank.metrics.meteor [RESOURCES]`: index Meteor's paraphrase tables ahead of the
first METEOR run (`make install` runs it; rerank.metrics.meteor.paraphrase)."""

from __future__ import annotations

from rerank.metrics.meteor import paraphrase


def main(argv: list[str] | None = None) -> int:
    """`python -m rerank.metrics.meteor [RESOURCES]`: build the index of every paraphrase
    table of a Meteor distribution into the cache now, so that no METEOR run has to (`make install`
    does this). Without a table (or without pycocoevalcap's jar, the default) there is nothing to do."""
    import argparse
    import time

    from rerank.metrics.meteor.resources import PARA_NAMES, MeteorResourceError, load_resources

    ap = argparse.ArgumentParser(prog="python -m rerank.metrics.meteor", description=main.__doc__)
    ap.add_argument("resources", nargs="?", help="meteor-1.5.jar or a folder of Meteor 1.5 resources "
                                                 "(default: the jar of the pycocoevalcap package)")
    args = ap.parse_args(argv)
    try:
        resources = load_resources(args.resources)
    except MeteorResourceError as err:
        if args.resources:
            ap.error(str(err))
        print(f"METEOR paraphrase index: nothing to build ({err})")
        return 0
    tables = {}
    for lang in PARA_NAMES:
        try:
            tables[lang] = resources.paraphrase_path(lang)
        except MeteorResourceError:
            pass
    if not tables:
        print(f"METEOR paraphrase index: nothing to build (no paraphrase-XX.gz in {resources.base_dir}/data)")
        return 0
    for lang, path in tables.items():
        file = paraphrase.index_file(path)
        if paraphrase.load_index(file, paraphrase.fingerprint(path)) is not None:
            print(f"METEOR paraphrase index ({lang}): {file} is up to date (table {path})")
            continue
        start = time.perf_counter()
        index = paraphrase.open_index(path)
        where = file if index._buffer is not None else "memory only (the cache folder cannot be written)"
        print(f"METEOR paraphrase index ({lang}): built into {where} in {time.perf_counter() - start:.1f} s "
              f"(table {path})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
