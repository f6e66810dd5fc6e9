"""Import vLLM's V1 scheduler from its own extracted source files, without vLLM installed.

    import vllm_loader
    vllm_loader.load("../shared/third_party/vllm-v1-scheduler")   # the folder holding vllm/
    from vllm.v1.core.sched.scheduler import Scheduler             # vLLM's file, unmodified

Rule: a `vllm.*` module whose file is in the folder is vLLM's own code, executed as is. Every
other `vllm.*` module the scheduler imports (config, distributed, multimodal, model executor,
LoRA, tokenizers, ...) is a stand-in whose attributes are inert classes: usable in annotations
and isinstance(), but constructing one raises NotModelled, so a code path this recorder did not
plan for stops the recording instead of changing a decision. A few stand-ins answer the
questions the scheduler asks of a text-only model on one GPU with no KV connector, no KV
events and no structured outputs ("off"), listed in ANSWERS below.

Third-party packages: numpy, yaml, cbor2, xxhash, typing_extensions and prometheus_client are
the real ones (Debian packages). torch, msgspec, pydantic 2 and uvloop, which Debian cannot
supply at the versions vLLM needs, are replaced when absent: torch by dtype constants (the
scheduler never makes a tensor), msgspec.Struct by its construction rules (fields from
annotations, defaults, default factories, __post_init__; nothing is ever serialized),
pydantic.dataclasses.dataclass by the standard dataclass, uvloop by nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import types


class NotModelled(RuntimeError):
    """A stand-in object was constructed or called: the recording left the modelled path."""


def _inert(module: str, name: str) -> type:
    def refuse(self, *args, **kwargs):
        raise NotModelled(f"{module}.{name} is not part of the recorded scheduler path")

    return type(name, (), {"__module__": module, "__init__": refuse})


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _inert(self.__name__, name)
        setattr(self, name, value)
        return value


# --- third-party replacements ----------------------------------------------------------------

def _fake_torch() -> dict[str, types.ModuleType]:
    torch = _StandIn("torch")

    class dtype:  # noqa: N801 (torch's spelling)
        def __init__(self, name: str, itemsize: int):
            self.name, self.itemsize = name, itemsize

        def __repr__(self):
            return "torch." + self.name

    torch.dtype = dtype
    sizes = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
             "int32": 4, "int64": 8, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
    for name, size in sizes.items():
        setattr(torch, name, dtype(name, size))
    torch.half, torch.float = torch.float16, torch.float32
    torch.Size = tuple
    torch.__version__ = "0+not-torch"
    mods = {"torch": torch}
    for sub in ("nn", "cuda", "autograd", "autograd.profiler"):
        m = _StandIn("torch." + sub)
        mods["torch." + sub] = m
    mods["torch.cuda"].is_available = lambda: False
    mods["torch.autograd"].profiler = mods["torch.autograd.profiler"]
    torch.nn, torch.cuda, torch.autograd = (mods["torch.nn"], mods["torch.cuda"],
                                            mods["torch.autograd"])
    return mods


_MISSING = object()


class _Field:
    def __init__(self, default=_MISSING, default_factory=_MISSING, name=None):
        self.default, self.default_factory = default, default_factory


def _struct_fields(cls) -> dict:
    """Field name -> default (or _MISSING), base classes first, as msgspec orders them."""
    fields: dict = {}
    for klass in reversed(cls.__mro__):
        for name, ann in klass.__dict__.get("__annotations__", {}).items():
            text = ann if isinstance(ann, str) else repr(ann)
            if "ClassVar" in text:
                continue
            default = klass.__dict__.get(name, _MISSING)
            if name not in fields or default is not _MISSING:
                fields[name] = default
    return fields


class Struct:
    """msgspec.Struct as the scheduler uses it: keyword or positional construction."""

    def __init_subclass__(cls, **options):  # array_like, omit_defaults, gc, ...: serialization
        super().__init_subclass__()
        cls.__struct_defaults__ = _struct_fields(cls)
        cls.__struct_fields__ = tuple(cls.__struct_defaults__)
        for name, default in cls.__struct_defaults__.items():
            if isinstance(default, _Field) and name in cls.__dict__:
                delattr(cls, name)

    def __init__(self, *args, **kwargs):
        names = self.__struct_fields__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}: {len(args)} positional arguments")
        given = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in given:
                raise TypeError(f"{type(self).__name__}: bad keyword {key!r}")
            given[key] = value
        for name in names:
            if name in given:
                value = given[name]
            else:
                default = self.__struct_defaults__[name]
                if isinstance(default, _Field):
                    default = (default.default_factory() if default.default_factory
                               is not _MISSING else default.default)
                elif isinstance(default, (list, dict, set)):
                    default = copy.copy(default)
                if default is _MISSING:
                    raise TypeError(f"{type(self).__name__}: {name!r} is required")
                value = default
            object.__setattr__(self, name, value)
        if hasattr(self, "__post_init__"):
            self.__post_init__()

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__struct_fields__)

    __hash__ = object.__hash__


def _fake_msgspec() -> dict[str, types.ModuleType]:
    m = _StandIn("msgspec")
    m.Struct = Struct
    m.field = lambda default=_MISSING, default_factory=_MISSING, name=None: _Field(
        default, default_factory, name)
    structs = types.ModuleType("msgspec.structs")

    def replace(obj, **changes):
        new = copy.copy(obj)
        for k, v in changes.items():
            object.__setattr__(new, k, v)
        return new

    structs.replace = replace
    m.structs = structs
    return {"msgspec": m, "msgspec.structs": structs}


def _fake_pydantic() -> dict[str, types.ModuleType]:
    pyd = _StandIn("pydantic")
    dcs = types.ModuleType("pydantic.dataclasses")

    def dataclass(cls=None, *, config=None, **kwargs):
        wrap = lambda c: dataclasses.dataclass(c, **kwargs)  # noqa: E731
        return wrap if cls is None else wrap(cls)

    dcs.dataclass = dataclass
    pyd.dataclasses = dcs
    return {"pydantic": pyd, "pydantic.dataclasses": dcs}


# --- answers for a text-only model on one GPU, everything optional off ----------------------

class _Logger(logging.Logger):
    def info_once(self, msg, *args, **kwargs):
        self.info(msg, *args)

    def warning_once(self, msg, *args, **kwargs):
        self.warning(msg, *args)

    def debug_once(self, msg, *args, **kwargs):
        self.debug(msg, *args)


def _logger(m):
    def init_logger(name):
        log = logging.getLogger(name)
        log.__class__ = _Logger
        return log

    m.init_logger = init_logger


def _kv_events(m):
    class NoEvents:
        def publish(self, events):
            return None

        def shutdown(self):
            return None

    class EventPublisherFactory:
        @staticmethod
        def create(config, data_parallel_rank=0):
            if config is not None and getattr(config, "enable_kv_cache_events", False):
                raise NotModelled("KV cache events")
            return NoEvents()

    m.EventPublisherFactory = EventPublisherFactory


class StructuredOutputManager:
    """Requests here never ask for structured output: should_advance is False for them, as in
    vLLM's class."""

    def __init__(self, vllm_config=None):
        pass

    def should_advance(self, request) -> bool:
        if request.use_structured_output:
            raise NotModelled("structured output")
        return False

    def clear_backend(self):
        pass


def _structured_output(m):
    m.StructuredOutputManager = StructuredOutputManager


def _multimodal(m):
    class Registry:
        def supports_multimodal_inputs(self, model_config):
            return False

    m.MULTIMODAL_REGISTRY = Registry()


def _mamba_enum(m):
    # Only a dataclass default in kv_cache_interface (MambaSpec).
    m.MambaAttentionBackendEnum = enum.Enum("MambaAttentionBackendEnum",
                                            ["MAMBA1", "MAMBA2", "SHORT_CONV", "LINEAR",
                                             "GDN_ATTN", "CUSTOM"])


def _torch_utils(m):
    m.get_dtype_size = lambda dtype: dtype.itemsize


def _usage(m):
    m.UsageContext = enum.Enum("UsageContext", ["UNKNOWN_CONTEXT", "ENGINE_CONTEXT"])


def _serial(m):
    m.PydanticMsgspecMixin = type("PydanticMsgspecMixin", (), {})


ANSWERS = {
    "vllm.logger": _logger,
    "vllm.distributed.kv_events": _kv_events,
    "vllm.v1.structured_output": _structured_output,
    "vllm.multimodal": _multimodal,
    "vllm.v1.attention.backends.registry": _mamba_enum,
    "vllm.utils.torch_utils": _torch_utils,
    "vllm.usage.usage_lib": _usage,
    "vllm.v1.serial_utils": _serial,
}


# --- the import hook -------------------------------------------------------------------------

class _StandInLoader(importlib.abc.Loader):
    def __init__(self, answer):
        self.answer = answer

    def create_module(self, spec):
        return _StandIn(spec.name)

    def exec_module(self, module):
        if self.answer is not None:
            self.answer(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "vllm" and not fullname.startswith("vllm."):
            return None
        base = os.path.join(self.root, *fullname.split("."))
        for file, package in ((os.path.join(base, "__init__.py"), True), (base + ".py", False)):
            if os.path.isfile(file):  # vLLM's own file
                return importlib.util.spec_from_file_location(
                    fullname, file, submodule_search_locations=[base] if package else None)
        spec = importlib.machinery.ModuleSpec(fullname, _StandInLoader(ANSWERS.get(fullname)),
                                              is_package=True)
        # A stand-in package may hold real modules (vllm, vllm.v1.structured_output).
        spec.submodule_search_locations = [base] if os.path.isdir(base) else []
        return spec


def load(root: str) -> str:
    """Installs the hook for the vLLM files under `root` (holding vllm/); returns the commit
    named in root/VLLM_COMMIT."""
    root = os.path.abspath(root)
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        if not any(isinstance(f, _Finder) and f.root == root for f in sys.meta_path):
            raise SystemExit("vllm_loader.load: one vLLM source folder per process")
        with open(os.path.join(root, "VLLM_COMMIT")) as f:
            return f.read().strip()
    if not os.path.isfile(os.path.join(root, "vllm", "v1", "core", "sched", "scheduler.py")):
        raise SystemExit(f"{root}: no vllm/v1/core/sched/scheduler.py")
    for name, factory in (("torch", _fake_torch), ("msgspec", _fake_msgspec)):
        try:
            __import__(name)
        except ImportError:
            sys.modules.update(factory())
    try:
        import pydantic
        if not str(getattr(pydantic, "VERSION", "1")).startswith("2"):
            raise ImportError
    except ImportError:
        sys.modules.update(_fake_pydantic())
    try:
        import uvloop  # noqa: F401
    except ImportError:
        sys.modules["uvloop"] = _StandIn("uvloop")
    sys.meta_path.insert(0, _Finder(root))
    with open(os.path.join(root, "VLLM_COMMIT")) as f:
        return f.read().strip()
