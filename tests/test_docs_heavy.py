"""The shell blocks of the docs that take longest to run (tests/test_docs.py's HEAVY_DOCS), in a
file of their own so that `make test` (pytest-xdist, --dist loadfile) runs them beside the rest
of tests/test_docs.py instead of after it on one worker. What is checked: test_docs.check_doc_blocks."""

from __future__ import annotations

import pytest

from tests.test_docs import HEAVY_DOCS, check_doc_blocks, doc_params, markdown_files, shipped  # noqa: F401 (fixture)


@pytest.mark.parametrize("name", doc_params(HEAVY_DOCS))
def test_doc_shell_blocks_run(name, shipped, tmp_path):  # noqa: F811 (the fixture imported above)
    check_doc_blocks(name, shipped, tmp_path)


def test_the_heavy_docs_are_docs():
    assert set(HEAVY_DOCS) <= set(markdown_files())
