"""The persistent compilation cache of ``tdf.compile`` (CPU target).

A compiled CPU program is stored on disk as the object code
:func:`tdf.objects.compile_module` produced plus what the :class:`tdf.compiler.Program` exposes (entry
signatures, :meth:`~tdf.compiler.Program.report`, ``llvm_ir``,
``buffer_ir``, the run-time check sites); a later ``tdf.compile`` of the same
program, in any process, links that object (:func:`tdf.objects.link`, as a
fresh compile does) instead of running the pipeline and LLVM.
JAX's compilation cache and Triton's cache are the models.

**Where.** On by default in the user's cache directory
(``$XDG_CACHE_HOME/tdf``, else ``~/.cache/tdf``); ``TDF_CACHE_DIR=path``
relocates it and an empty ``TDF_CACHE_DIR`` turns it off (read at every
compile). Entries live in ``<dir>/v1/<key>.tdfc``.

**Key.** A SHA-256 hash of: the input program (the exact text, or an
``ir.Module`` printed with its locations), the file name and every option
that changes the code (the pass pipelines the options select, ``opt_level``,
the shared libraries, ``count_allocations``, ``flush_denormals``, the
parallel runtime), the toolchain (tdf's version and sources, the native
extension's contents, the MLIR/LLVM wheel versions and libraries) and the
host (LLVM's process triple, CPU name and CPU features). Any change is a
miss. A frontend may name the program by a key of its own instead of its
text (:class:`Source`): ``tdf.jax.jit`` keys by the jaxpr, so that a hit
does not translate it to MLIR either.

**Safety.** Entries are written to a temporary file and renamed into place
(atomic: concurrent processes see a whole entry or none, and two writers of
one key write the same program). Each entry carries its length and a
SHA-256 digest of its contents: a truncated or corrupt entry is detected
before anything of it is used, deleted and recompiled, never loaded. The
object is checked again before the linker sees it (a relocatable ELF object
of the host's architecture, sections and relocations in bounds); when it
still cannot be linked (a shared library lost a symbol) the program is
compiled as if there were no entry.

**Size.** At most ``TDF_CACHE_MAX_BYTES`` bytes (``K``/``M``/``G``
suffixes; default 1 GiB): after each store the least recently used entries
(a hit refreshes an entry's modification time) are deleted until the rest
fit.

``tdf.compile(...).report().from_cache`` says whether a program came from
the cache (and ``print(report)`` says so on its last line). The cache never
makes a compile fail: an unwritable directory only means nothing is stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import pickle
import sys
import tempfile
import threading
import time
import zlib

__all__ = ["cache_dir", "max_bytes", "clear", "info", "Source", "toolchain_fingerprint",
           "host_fingerprint", "CACHE_DIR_ENV", "MAX_BYTES_ENV", "DEFAULT_MAX_BYTES"]

CACHE_DIR_ENV = "TDF_CACHE_DIR"
MAX_BYTES_ENV = "TDF_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30

_LAYOUT = "v1"  # the entry format's directory; a new format gets a new one
_SUFFIX = ".tdfc"
_MAGIC = b"TDFCACHE1\n"
_DIGEST_BYTES = 32
_HEADER = len(_MAGIC) + 8 + _DIGEST_BYTES
# Temporary files older than this are left by a writer that died: removed.
_STALE_TMP_SECONDS = 3600.0


# ------------------------------------------------------------ configuration


def cache_dir() -> str | None:
    """The directory compiled programs are cached in, or None when the cache
    is off (``TDF_CACHE_DIR`` set and empty, or no home directory)."""
    value = os.environ.get(CACHE_DIR_ENV)
    if value is not None:
        return os.path.abspath(os.path.expanduser(value)) if value else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    return os.path.join(base, "tdf")


def max_bytes() -> int:
    """The size bound: ``TDF_CACHE_MAX_BYTES`` (bytes, optionally with a
    ``K``/``M``/``G`` suffix), else :data:`DEFAULT_MAX_BYTES`;
    ``ValueError`` naming the variable for anything else."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit():
        raise ValueError(f"{MAX_BYTES_ENV} must be a byte count (optionally with a K, M or G "
                         f"suffix), got {text!r}")
    return int(digits) * scale


def _entries_dir(directory: str) -> str:
    return os.path.join(directory, _LAYOUT)


def _scan(folder: str) -> list[tuple[float, int, str]]:
    """(modification time, size, path) of every entry in ``folder``; stale
    temporary files are removed on the way."""
    found = []
    now = time.time()
    try:
        with os.scandir(folder) as it:
            for item in it:
                try:
                    st = item.stat()
                except OSError:
                    continue
                if item.name.endswith(_SUFFIX):
                    found.append((st.st_mtime, st.st_size, item.path))
                elif item.name.startswith(".tmp-") and now - st.st_mtime > _STALE_TMP_SECONDS:
                    _remove(item.path)
    except OSError:
        pass
    return found


def info() -> dict:
    """``dir`` (None when off), ``entries``, ``bytes`` and ``max_bytes`` of
    the cache."""
    directory = cache_dir()
    found = _scan(_entries_dir(directory)) if directory else []
    return {"dir": directory, "entries": len(found), "bytes": sum(s for _, s, _ in found),
            "max_bytes": max_bytes()}


def clear() -> int:
    """Deletes every cached program; returns how many there were."""
    directory = cache_dir()
    found = _scan(_entries_dir(directory)) if directory else []
    return sum(_remove(path) for _, _, path in found)


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def _evict(folder: str, bound: int) -> None:
    """Deletes the least recently used entries until the rest fit in
    ``bound`` bytes."""
    found = _scan(folder)
    total = sum(size for _, size, _ in found)
    for _, size, path in sorted(found):
        if total <= bound:
            break
        _remove(path)
        total -= size


# -------------------------------------------------------------------- key

_TOOLCHAIN_LOCK = threading.Lock()
_TOOLCHAIN: dict[str, str] = {}


def _files_under(root: str, suffixes: tuple) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(suffixes)]
    return found


def toolchain_fingerprint() -> str:
    """A digest of everything besides the input and the options that makes
    the compiled code: tdf's sources (path, size and modification time of
    each module, as Python's own bytecode cache trusts them), the contents of
    the native extension, the installed tdf/MLIR/LLVM wheels (their
    ``dist-info`` names carry the versions) and the MLIR/LLVM libraries
    (size and modification time). Computed once per process."""
    with _TOOLCHAIN_LOCK:
        digest = _TOOLCHAIN.get("digest")
        if digest is None:
            digest = _TOOLCHAIN["digest"] = _compute_toolchain()
        return digest


def _compute_toolchain() -> str:
    from mlir import __path__ as mlir_path

    from . import _tdf, jit_symbols

    h = hashlib.sha256()
    package = os.path.dirname(os.path.abspath(__file__))
    native = os.path.dirname(os.path.abspath(_tdf.__file__))
    sources = _files_under(package, (".py",))
    if native != package:
        sources += _files_under(native, (".py",))
    mlir_dir = os.path.abspath(list(mlir_path)[0])
    libraries = [os.path.join(mlir_dir, "_mlir_libs", "libMLIRPythonCAPI.so"),
                 os.path.join(os.path.dirname(mlir_dir), "llvm", "lib", "libLLVM.so"),
                 jit_symbols.mlir_lib("libmlir_c_runner_utils.so") or ""]
    for path in sources + libraries:
        try:
            st = os.stat(path)
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{path}\0missing\n".encode())
    with open(_tdf.__file__, "rb") as f:
        h.update(hashlib.sha256(f.read()).digest())
    for site in sorted({os.path.dirname(mlir_dir), os.path.dirname(native)}):
        try:
            names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info") and
                           n.lower().startswith(("xtc_", "xtc-", "tdf-", "tdf_")))
        except OSError:
            names = []
        h.update(("\0".join(names) + "\n").encode())
    h.update(f"python {sys.version_info[:2]}\n".encode())
    return h.hexdigest()


_HOST: dict[str, str] = {}


def host_fingerprint() -> str:
    """LLVM's view of the host, which the code is generated for: the process
    triple, the CPU name and its sorted feature list."""
    host = _HOST.get("host")
    if host is None:
        from . import _tdf
        host = _HOST["host"] = _tdf.host_cpu()
    return host


def _key(kind: str, filename: str, program: str, options: dict) -> str:
    h = hashlib.sha256()
    parts = [_LAYOUT, toolchain_fingerprint(), host_fingerprint(),
             repr(sorted(options.items())), kind, filename, program]
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


# ---------------------------------------------------------- entry encoding


class _PlainUnpickler(pickle.Unpickler):
    """Loads plain data only (no classes, no functions): an entry is data."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"cache entries hold plain data only, not {module}.{name}")


_RECORD = "__tdf_record__"
# The modules whose dataclasses a Program's report and analyses are made of.
_RECORD_MODULES = ("tdf.report", "tdf.memory")


def _encode(value):
    """``value`` (a report: dataclasses of :mod:`tdf.report`, lists, dicts,
    tuples, numbers, strings) as plain data; ``TypeError`` for anything
    else, so that nothing is stored that would not come back the same."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if cls.__module__ not in _RECORD_MODULES:
            raise TypeError(f"cannot cache a {cls.__module__}.{cls.__name__}")
        return {_RECORD: f"{cls.__module__}.{cls.__name__}",
                "fields": {f.name: _encode(getattr(value, f.name))
                           for f in dataclasses.fields(value)}}
    if isinstance(value, (list, tuple)):
        return type(value)(_encode(v) for v in value)
    if isinstance(value, dict):
        if _RECORD in value:
            raise TypeError("a report dict uses the cache's record marker")
        return {_encode(k): _encode(v) for k, v in value.items()}
    if value is None or type(value) in (bool, int, float, str, bytes):
        return value
    raise TypeError(f"cannot cache a {type(value).__name__} in a report")


def _decode(value):
    if isinstance(value, dict):
        if _RECORD in value:
            import importlib
            module_name, _, name = value[_RECORD].rpartition(".")
            if module_name not in _RECORD_MODULES:
                raise TypeError(f"{value[_RECORD]} is not a report record")
            cls = getattr(importlib.import_module(module_name), name)
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{value[_RECORD]} is not a report record")
            return cls(**{k: _decode(v) for k, v in value["fields"].items()})
        return {_decode(k): _decode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_decode(v) for v in value)
    return value


def _spec_data(spec) -> tuple:
    from .runtime import TensorSpec
    from .vocabulary import element_type_name
    if isinstance(spec, TensorSpec):
        return ("tensor", spec.shape, element_type_name(spec.dtype), spec.type_text, spec.donated)
    return ("scalar", spec.type_text)


def _spec(data: tuple):
    from .runtime import ScalarSpec, TensorSpec
    from .vocabulary import DTYPES
    if data[0] == "tensor":
        _, shape, element, type_text, donated = data
        return TensorSpec(shape, DTYPES[element], type_text, donated)
    return ScalarSpec(data[1])


def _pack(record: dict) -> bytes:
    payload = pickle.dumps(record, protocol=5)
    digest = hashlib.sha256(payload).digest()
    return _MAGIC + len(payload).to_bytes(8, "little") + digest + payload


def _unpack(data: bytes, key: str) -> dict | None:
    """The record of an entry's bytes, or None when they are not a whole,
    intact entry of ``key``."""
    if len(data) < _HEADER or not data.startswith(_MAGIC):
        return None
    length = int.from_bytes(data[len(_MAGIC):len(_MAGIC) + 8], "little")
    digest = data[len(_MAGIC) + 8:_HEADER]
    payload = memoryview(data)[_HEADER:]
    if len(payload) != length or \
            hashlib.sha256(payload).digest() != digest:
        return None
    try:
        record = _PlainUnpickler(io.BytesIO(payload)).load()
    except Exception:  # noqa: BLE001 - a damaged entry, whatever the error
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    return record


# ------------------------------------------------------------------ requests


class Request:
    """One ``tdf.compile`` call's view of the cache: its key and entry path
    (:func:`request`), :meth:`load` before compiling and :meth:`store`
    after."""

    def __init__(self, directory: str, key: str, make_text, options: dict):
        self.directory = directory
        self.key = key
        self._make_text = make_text
        self.options = options
        self.folder = _entries_dir(directory)
        self.path = os.path.join(self.folder, key + _SUFFIX)
        self.status = ""

    @property
    def text(self) -> str:
        """The program's text (a :class:`Source`'s is made on first use)."""
        return self._make_text()

    # -- hit --------------------------------------------------------------

    def _read(self) -> dict | None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        record = _unpack(data, self.key)
        if record is None:
            self.status = "a damaged entry was deleted"
            _remove(self.path)
            return None
        return record

    def load(self, shared_libs: list):
        """The cached :class:`tdf.compiler.Program`, or None (no entry, a
        damaged one, or an object that cannot be linked here)."""
        record = self._read()
        if record is None:
            return None
        try:
            program = _program(record, self.options, shared_libs)
        except (RuntimeError, KeyError, TypeError, ValueError, IndexError, AttributeError,
                zlib.error, UnicodeDecodeError) as err:
            self.status = f"the entry could not be loaded: {err}"
            return None
        try:
            os.utime(self.path)  # least recently used: used now
        except OSError:
            pass
        self.status = program.report().cache = "hit: loaded, not compiled"
        return program

    # -- miss -------------------------------------------------------------

    def store(self, program, objects: list, sites: list) -> None:
        """Writes the entry of ``program`` (just compiled into ``objects``,
        with the run-time check ``sites``); :attr:`status` says whether it
        was stored, or why not."""
        record = None
        reason = "no object code"
        try:
            if objects:
                record = self._record(program, objects, sites)
        except OSError as err:
            reason = err.strerror or str(err)
        except (TypeError, ValueError) as err:
            reason = f"cannot serialize ({err})"
        if record is None:
            self._set_status(f"not stored: {reason}")
            return
        data = _pack(record)
        bound = max_bytes()
        if len(data) > bound:
            self._set_status("not stored: larger than the cache's size bound")
            return
        try:
            self._write(data)
        except OSError as err:
            self._set_status(f"not stored: {err.strerror or err}")
            return
        self._set_status("stored")
        _evict(self.folder, bound)

    def _set_status(self, status: str) -> None:
        self.status = f"miss: compiled, {status}" + (f" ({self.status})" if self.status else "")

    def _record(self, program, objects: list, sites: list) -> dict:
        functions = program.functions
        return {
            "key": self.key,
            "objects": [bytes(data) for data in objects],
            "entries": [(name, [_spec_data(s) for s in fn.params],
                         [_spec_data(s) for s in fn.results], list(map(int, fn.returned_args)))
                        for name, fn in functions.items()],
            "sites": [tuple(site) for site in sites],
            "report": _encode(program.report()),
            "memory": _encode(program._memory),
            "llvm_ir": zlib.compress(program.llvm_ir.encode(), 1),
            "buffer_ir": zlib.compress(program.buffer_ir.encode(), 1),
        }

    def _write(self, data: bytes) -> None:
        os.makedirs(self.folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except BaseException:
            _remove(tmp)
            raise


def _program(record: dict, options: dict, shared_libs: list):
    """A :class:`tdf.compiler.Program` from an entry: the object linked with
    the symbols the compiler registers (the runtime, this program's own
    allocation counter), the rest as
    the compiler builds it."""
    from . import jit_symbols
    from . import objects as _objects
    from .compiler import Program
    from .runtime import AllocationCounter, EntryFunction

    counter = AllocationCounter() if options["count_allocations"] else None
    entries = record["entries"]
    loaded, addresses = _objects.link(record["objects"], [e[0] for e in entries],
                                      jit_symbols.runtime_libs() + shared_libs, counter)
    report = _decode(record["report"])
    sites = [tuple(site) for site in record["sites"]]
    functions = {}
    for (name, params, results, returned), address in zip(entries, addresses):
        fn = EntryFunction(name, [_spec(p) for p in params], [_spec(r) for r in results],
                           returned, address, keepalive=(loaded, counter),
                           free=counter.free if counter is not None else None, sites=sites)
        fn.flush_denormals = options["flush_denormals"]
        functions[name] = fn
    return Program(functions, report, loaded, zlib.decompress(record["llvm_ir"]).decode(),
                   zlib.decompress(record["buffer_ir"]).decode(), None, counter,
                   _decode(record["memory"]))


class Source:
    """A program known by a key that determines its text, whose text is
    made only when the program must be compiled: what a frontend hands
    :func:`tdf.compile` instead of the text (``tdf.jax.jit`` keys a program
    by its jaxpr, :mod:`tdf.jax._cache_key`, and translates it only on a
    miss). The producer guarantees that equal keys make equal texts."""

    def __init__(self, key: str, make_text):
        self.key = key
        self._make_text = make_text
        self._text: str | None = None

    def text(self) -> str:
        if self._text is None:
            self._text = self._make_text()
        return self._text


def request(text_or_module, filename: str, options: dict) -> Request | None:
    """The cache request of one ``tdf.compile`` (``options``: everything
    besides the input that changes the code), or None when the cache is off
    or the input is neither text, an ``ir.Module`` nor a :class:`Source`
    (the compiler reports that)."""
    directory = cache_dir()
    if directory is None:
        return None
    max_bytes()  # a bad TDF_CACHE_MAX_BYTES is an error before, not after, compiling
    if isinstance(text_or_module, Source):
        source = text_or_module
        return Request(directory, _key("source", filename, source.key, options), source.text,
                       options)
    if isinstance(text_or_module, str):
        text = text_or_module
    else:
        from mlir import ir
        if not isinstance(text_or_module, ir.Module):
            return None
        text = text_or_module.operation.get_asm(enable_debug_info=True)
    return Request(directory, _key("text", filename, text, options), lambda: text, options)


def lookup(text_or_module, filename: str, options: dict, shared_libs: list, timer):
    """What ``tdf.compile`` does first: ``(request, program, input)`` with
    the cached program (None on a miss or when the cache is off) and the
    input to compile otherwise (a :class:`Source`'s text, made now)."""
    cached = request(text_or_module, filename, options)
    if cached is None:
        if isinstance(text_or_module, Source):
            text_or_module = text_or_module.text()
        return None, None, text_or_module
    with timer.stage("compilation cache lookup"):
        program = cached.load(shared_libs)
    return cached, program, None if program is not None else cached.text
