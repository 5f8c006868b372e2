"""The numpy encoder in the core install (no torch): the shipped model's s_s and mlmme MBR utility
run without importing torch, and the weights reader refuses what is not a state_dict of tensors
(a pickle that names any other global runs nothing). Not marked `neural`, so `make test-core` runs
these: the numpy encoder's modules need no torch, but tests/conftest.py and tests/test_markers.py
count every import of rerank.embeddings as one that needs it, so they are imported by name here
(`embedding`) and the commands run in a subprocess that refuses torch."""

import importlib
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

from rerank.formats import read_nbest
from tests.test_light_core import ROOT, without_neural

def embedding(module: str):
    """The module rerank.embeddings.`module` (one that needs no torch: numpy_encoder, weights_reader)."""
    return importlib.import_module(f"rerank.embeddings.{module}")


MODELS = ROOT / "rerank" / "data" / "models"
SHIPPED = MODELS / "mlmme-bpe.pt"   # SentencePiece vocabularies: sentencepiece is a core dependency
NO_TORCH = "import sys\nsys.meta_path.insert(0, type('B', (), {'find_spec': staticmethod(lambda n, p=None, t=None: " \
           "(_ for _ in ()).throw(ModuleNotFoundError(n, name=n)) if n.split('.')[0] in ('torch', 'sklearn') " \
           "else None)})())\n"


def run_without_torch(code: str, *args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", NO_TORCH + code, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONSAFEPATH": "1"})


@pytest.mark.parametrize("model", [SHIPPED, MODELS / "mlmme-small.pt"], ids=["shipped", "word-vocabulary"])
def test_s_s_and_the_mbr_utility_run_without_torch(tmp_path, model):
    nbest = read_nbest(str(ROOT / "rerank" / "data" / "multi30k" / "optimised.test_2016.20best.gz")).select_sentences(
        range(5))
    from rerank.formats import write_nbest
    from rerank.io import read_lines

    write_nbest(nbest, str(tmp_path / "in.nbest"))
    sources = read_lines(str(ROOT / "rerank" / "data" / "multi30k" / "test_2016_flickr.en.gz"))[:5]
    (tmp_path / "src.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
    code = ("from rerank.cli import main\n"
            "assert main(['features', sys.argv[1], '--src', sys.argv[2], '-m', sys.argv[3], '--which', 's_s,mbr', "
            "'--mbr-utility', 'mlmme', '--mbr-model', sys.argv[3], '--quiet', '-o', sys.argv[4]]) == 0\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))")
    result = run_without_torch(code, tmp_path / "in.nbest", tmp_path / "src.en", model, tmp_path / "out.nbest")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    out = read_nbest(str(tmp_path / "out.nbest"))
    enc = embedding("numpy_encoder").NumpyEncoder.load(str(model))
    hyps, src = enc.encode(list(nbest.hyps), "de", empty="zero"), enc.encode(sources, "en")
    want = (hyps.astype(np.float64) * src[nbest.sentence_of_hyp].astype(np.float64)).sum(1)
    np.testing.assert_allclose(out.column("s_s"), want, rtol=0, atol=1e-6)
    assert np.all(np.isfinite(out.column("mbr")))


def _torch_like_zip(path, pickled: bytes, storages=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            z.writestr(f"archive/data/{key}", data)


def _pickle_calling(module: str, name: str, *args) -> bytes:
    """A protocol-2 pickle of {"w": module.name(*args)}, written by hand (no such object needed here)."""
    buf = io.BytesIO()
    buf.write(b"\x80\x02}q\x00X\x01\x00\x00\x00w")
    buf.write(b"c" + module.encode() + b"\n" + name.encode() + b"\n")
    buf.write(pickle.dumps(args, protocol=2)[2:-1])   # the args tuple, without PROTO and STOP
    buf.write(b"Rs.")
    return buf.getvalue()


@pytest.mark.parametrize("module,name", [("os", "system"), ("builtins", "eval"), ("torch", "load"),
                                         ("torch._utils", "_rebuild_parameter"), ("numpy", "frombuffer")])
def test_a_pickle_naming_any_other_global_is_refused_before_it_is_looked_up(tmp_path, module, name):
    reader = embedding("weights_reader")
    WeightsError, read_state_dict = reader.WeightsError, reader.read_state_dict
    marker = tmp_path / "ran"
    _torch_like_zip(tmp_path / "evil.pt", _pickle_calling(module, name, f"touch {marker}"))
    with pytest.raises(WeightsError, match=f"evil.pt: cannot read the model weights: it holds a {module}.{name} "
                                           "object, which weights_only loading refuses"):
        read_state_dict(str(tmp_path / "evil.pt"))
    assert not marker.exists()


def _text(value: str) -> bytes:
    return b"X" + struct.pack("<I", len(value.encode())) + value.encode()


def _ints(*values: int) -> bytes:
    return b"(" + b"".join(b"J" + struct.pack("<i", v) for v in values) + b"t"


def _tensor_pickle(numel: int, offset: int, size: tuple, stride: tuple) -> bytes:
    """{"w": _rebuild_tensor_v2(storage "0" of `numel` floats, offset, size, stride, False, OrderedDict())},
    the pickle torch.save writes, by hand."""
    storage = b"((" + _text("storage") + b"ctorch\nFloatStorage\n" + _text("0") + _text("cpu") + \
        b"J" + struct.pack("<i", numel) + b"tQ"
    return (b"\x80\x02}" + _text("w") + b"ctorch._utils\n_rebuild_tensor_v2\n" + storage + b"J" +
            struct.pack("<i", offset) + _ints(*size) + _ints(*stride) + b"\x89ccollections\nOrderedDict\n)RtRs.")


def test_storages_that_do_not_fit_are_refused(tmp_path):
    reader = embedding("weights_reader")
    WeightsError, read_state_dict = reader.WeightsError, reader.read_state_dict
    path = tmp_path / "ok.pt"
    _torch_like_zip(path, _tensor_pickle(12, 0, (3, 4), (4, 1)), {"0": np.arange(12, dtype="<f4").tobytes()})
    np.testing.assert_array_equal(read_state_dict(str(path))["w"], np.arange(12).reshape(3, 4))   # the hand-made file
    cases = {"short": (12, 0, (3, 4), (4, 1), 8 * 4, "holds 32 bytes where the pickle says 12 x 4"),
             "beyond": (12, 2, (3, 4), (4, 1), 12 * 4, "reaches element 13 of a storage of 12"),
             "negative": (12, 11, (3, 4), (-4, 1), 12 * 4, "malformed shape")}
    for label, (numel, offset, size, stride, nbytes, words) in cases.items():
        path = tmp_path / f"{label}.pt"
        _torch_like_zip(path, _tensor_pickle(numel, offset, size, stride), {"0": b"\0" * nbytes})
        with pytest.raises(WeightsError, match=words):
            read_state_dict(str(path))


def test_the_shipped_model_loads_without_torch():
    result = run_without_torch("from rerank.embeddings.numpy_encoder import NumpyEncoder\n"
                               "e = NumpyEncoder.load(sys.argv[1])\n"
                               "v = e.encode(['ein hund rennt .', 'zwei hunde'], 'de')\n"
                               "print(e.languages, v.shape, round(float((v * v).sum()), 4))\n"
                               "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))", SHIPPED)
    assert result.returncode == 0, result.stderr
    import json

    languages = json.loads(SHIPPED.with_suffix(".json").read_text(encoding="utf-8"))["model"]["languages"]
    assert result.stdout.split("\n")[:2] == [f"{languages} (2, 256) 2.0", "[]"]
    assert without_neural("import rerank.embeddings.features").returncode == 0
