"""Read a torch state_dict file (`torch.save`'s zip format) into numpy arrays, without torch.

The `.pt` of an embedding model (embeddings.encoder.save_model) is a zip archive: `NAME/data.pkl`
(a pickle of the state_dict), one `NAME/data/KEY` entry per storage (the raw bytes of a typed
storage), and `NAME/byteorder` ("little" or "big"). The pickle's only calls are
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`
and `collections.OrderedDict()`, and its storages are persistent ids
`("storage", torch.XStorage, key, location, numel)`.

`read_state_dict` unpickles with exactly that allow-list, as `torch.load(weights_only=True)`
does (torch's own allow-list is wider: it also takes plain containers and numbers): any other
global (a class, a function, `os.system`) is refused before it is looked up, so the file runs no
code. Every tensor is checked against its storage (dtype known, offset and strides inside the
bytes the archive holds, no negative strides) and copied out as a contiguous numpy array; a
storage's bytes are read once, when a tensor first uses it. tests/test_embeddings_numpy.py checks
the arrays against torch.load on every dtype, on views that share a storage, on the big-endian
byte order, and the refusals on hostile and broken files.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from rerank.errors import InputError

__all__ = ["read_state_dict", "WeightsError", "LegacyFormat"]

# torch's typed storages -> numpy dtypes (little-endian; bfloat16 has no numpy dtype: its 16 bits
# are the high half of a float32, widened exactly)
STORAGE_DTYPES: dict[str, np.dtype] = {
    "FloatStorage": np.dtype("<f4"), "DoubleStorage": np.dtype("<f8"), "HalfStorage": np.dtype("<f2"),
    "BFloat16Storage": np.dtype("<u2"), "LongStorage": np.dtype("<i8"), "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"), "CharStorage": np.dtype("i1"), "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}


class WeightsError(InputError):
    """A weights file this reader refuses: not torch's zip format, or holding more than tensors."""


class LegacyFormat(WeightsError):
    """A torch file of the format before the zip archive: torch.load reads it, this reader does not."""


class _StorageType:
    """What the pickle's `torch.XStorage` global stands for here: a dtype, nothing callable."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str):
        self.name, self.dtype = name, STORAGE_DTYPES[name]


class _Storage:
    """A storage of the archive: its dtype, element count and entry name; bytes read on first use."""

    __slots__ = ("kind", "numel", "entry", "_array")

    def __init__(self, kind: _StorageType, numel: int, entry: str):
        self.kind, self.numel, self.entry = kind, numel, entry
        self._array: np.ndarray | None = None


class _Tensor:
    """A `_rebuild_tensor_v2` call, checked and turned into an array after unpickling."""

    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    """Stands in for torch._utils._rebuild_tensor_v2: records its arguments (checked later)."""
    if backward_hooks not in (None, OrderedDict(), {}) or not isinstance(requires_grad, bool):
        raise pickle.UnpicklingError("a tensor with backward hooks or an odd requires_grad")
    if metadata not in (None, OrderedDict(), {}):
        raise pickle.UnpicklingError("a tensor with metadata (a subclass or a quantised tensor)")
    return _Tensor(storage, storage_offset, size, stride)


class _Refused(pickle.UnpicklingError):
    """A global outside the allow-list."""


class _Unpickler(pickle.Unpickler):
    """The allow-list: _rebuild_tensor_v2, OrderedDict, the typed storages; persistent ids are
    the archive's storages. Every other global raises before it is imported."""

    def __init__(self, data: bytes, prefix: str, entries: set[str]):
        super().__init__(io.BytesIO(data))
        self.prefix, self.entries = prefix, entries
        self.storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor_v2
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise _Refused(f"it holds a {module}.{name} object, which weights_only loading refuses (tensors only: "
                       "unpickling it could run code)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"a persistent id that is not a storage: {str(pid)[:80]}")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not isinstance(numel, int) or numel < 0:
            raise pickle.UnpicklingError(f"a malformed storage record: {str(pid)[:80]}")
        entry = f"{self.prefix}data/{key}"
        if entry not in self.entries:
            raise pickle.UnpicklingError(f"storage {key!r} has no entry {entry} in the archive")
        storage = self.storages.get(key)
        if storage is None:
            storage = self.storages[key] = _Storage(kind, numel, entry)
        elif storage.kind.name != kind.name or storage.numel != numel:
            raise pickle.UnpicklingError(f"storage {key!r} is read as two types")
        return storage


def _prefix(names: list[str], path: str) -> str:
    """The archive's folder (`NAME/`) holding data.pkl."""
    found = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(found) != 1:
        raise WeightsError("not a PyTorch file: a zip archive without NAME/data.pkl", path)
    return found[0][: -len("data.pkl")]


def _storage_bytes(archive: zipfile.ZipFile, storage: _Storage, big_endian: bool, path: str) -> np.ndarray:
    if storage._array is None:
        dtype = storage.kind.dtype.newbyteorder(">") if big_endian and storage.kind.dtype.itemsize > 1 \
            else storage.kind.dtype
        size = archive.getinfo(storage.entry).file_size
        if size != storage.numel * dtype.itemsize:
            raise WeightsError(f"storage {storage.entry} holds {size} bytes where the pickle says "
                               f"{storage.numel} x {dtype.itemsize}: the file is cut or damaged", path)
        array = np.frombuffer(archive.read(storage.entry), dtype=dtype)
        if big_endian and dtype.itemsize > 1:
            array = array.astype(dtype.newbyteorder("<"))
        storage._array = array
    return storage._array


def _to_array(tensor: _Tensor, archive: zipfile.ZipFile, big_endian: bool, key: str, path: str) -> np.ndarray:
    """The tensor's values: a contiguous copy of its view of the storage, after bounds checks."""
    size, stride, offset = tensor.size, tensor.stride, tensor.offset
    ints = (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
            and isinstance(offset, int) and all(isinstance(x, int) for x in (*size, *stride)))
    if not ints or offset < 0 or any(x < 0 for x in (*size, *stride)):
        raise WeightsError(f"tensor {key!r} has a malformed shape {size!r}, strides {stride!r} or offset {offset!r}",
                           path)
    storage = tensor.storage
    if not isinstance(storage, _Storage):
        raise WeightsError(f"tensor {key!r} is not built on a storage of the archive", path)
    if 0 in size:
        return np.zeros(size, dtype=_widened(storage.kind.dtype))
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.numel:
        raise WeightsError(f"tensor {key!r} reaches element {last} of a storage of {storage.numel}", path)
    flat = _storage_bytes(archive, storage, big_endian, path)
    item = flat.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(flat[offset:], shape=size, strides=tuple(s * item for s in stride),
                                           writeable=False)
    array = view.copy(order="C")   # its own writeable memory (the storage bytes are released)
    if storage.kind.name == "BFloat16Storage":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    return array


def _widened(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.dtype("<u2") else dtype


def _not_zip(head: bytes, what: str, path: str) -> InputError:
    """The error for a file that is no zip archive, in torch's loader's words (rerank.device)."""
    if head == b"PK\x03\x04":
        return WeightsError(f"cannot read the {what}: a damaged or truncated PyTorch file", path)
    if head[:1] == b"\x80":   # a pickle: torch's legacy format (before 1.6, or _use_new_zipfile_serialization=False)
        return LegacyFormat(f"cannot read the {what} without torch: a PyTorch file of the legacy format (saved by "
                            "torch before 1.6 or with _use_new_zipfile_serialization=False)", path)
    return WeightsError(f"cannot read the {what}: " + (f"not a PyTorch file (it starts with {head!r})" if head
                                                       else "an empty file, not a PyTorch file"), path)


def read_state_dict(path: str, what: str = "model weights") -> dict[str, np.ndarray]:
    """name -> array of the state_dict saved by torch.save at `path` (its dtypes kept: float16
    stays float16, bfloat16 becomes float32). WeightsError (an InputError naming the file) for a
    file that is not torch's zip format, is cut, or holds anything but a dict of named tensors."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise InputError(f"{what} not found", path) from None
    except IsADirectoryError:
        raise InputError(f"{what} is a directory", path) from None
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", path) from None
    except zipfile.BadZipFile:
        raise _not_zip(head, what, path) from None
    with archive:
        names = archive.namelist()
        prefix = _prefix(names, path)
        order = archive.read(prefix + "byteorder").decode("ascii", "replace").strip() \
            if prefix + "byteorder" in names else "little"
        if order not in ("little", "big"):
            raise WeightsError(f"unknown byte order {order!r} in {prefix}byteorder", path)
        unpickler = _Unpickler(archive.read(prefix + "data.pkl"), prefix, set(names))
        try:
            state = unpickler.load()
        except _Refused as exc:
            raise WeightsError(f"cannot read the {what}: {exc}", path) from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError,
                RecursionError, MemoryError, zipfile.BadZipFile, OSError) as exc:
            raise WeightsError(f"cannot read the {what}: a damaged or truncated PyTorch file ({exc})", path) from None
        if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, _Tensor)
                                                  for k, v in state.items()):
            if isinstance(state, _Tensor):
                found = f"a bare tensor of shape {tuple(state.size) if isinstance(state.size, tuple) else state.size}"
            else:
                found = f"a {type(state).__name__}" if not isinstance(state, dict) else "a dict of other values than tensors"
            raise WeightsError(f"expected a state_dict (names -> tensors), found {found}", path)
        try:
            return {key: _to_array(tensor, archive, order == "big", key, path) for key, tensor in state.items()}
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise WeightsError(f"cannot read the {what}: a damaged or truncated PyTorch file ({exc})", path) from None
