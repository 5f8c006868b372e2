"""A model path that is not a model's is said as given (issue 46 item 8): an existing file of
another kind is not suffixed with .pt, a missing path is named as the user wrote it."""

import pytest

from rerank.embeddings.encoder import Encoder
from rerank.errors import InputError

pytestmark = pytest.mark.neural


def test_an_existing_file_of_another_kind_is_named_as_given(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\0\1")
    with pytest.raises(InputError) as caught:
        Encoder.load(str(junk))
    assert caught.value.path == str(junk) and "not a model" in str(caught.value)


def test_a_missing_path_is_named_as_given(tmp_path):
    for name in ("nothere.bin", "nothere", "nothere.pt"):
        with pytest.raises(InputError, match="model file not found") as caught:
            Encoder.load(str(tmp_path / name))
        assert caught.value.path == str(tmp_path / name)
