# Type stubs of the extension module rpjrt._rpjrt (written in Rust with PyO3).
# Users import these names from `rpjrt`; this module is an implementation detail.

import os
import types
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar, final, overload

from typing_extensions import CapsuleType, Self, TypeAlias

from ._discovery import PluginInfo
from ._dtypes import DType
from ._errors import Error

__all__ = ["_exit_if_loader_stuck", "_stop_notifiers", "_leak_at_exit", "_import_failed", "_before_fork", "_after_fork", "_on_rpjrt_thread", "_plugin_timeout_env", "Buffer", "Client", "Device", "Event", "Executable", "Memory", "Plugin", "_Waiter", "__version__", "_bench_c_floor", "_BenchFloor", "_candidates", "_discover", "_element_type_from_name", "_element_types", "_pick_library", "_discovery_tables", "_probe_pjrt_version", "_run_cli", "_Session", "SessionProgram", "AliasFulfiller", "_uses_shardy", "_shard_split", "_shard_assemble", "Cache", "Topology", "artifact_stablehlo_version", "inspect_artifact", "InMemoryStore", "TcpStore", "_detect_launch_env", "_first_host", "FfiBuffer", "FfiCall", "_ffi_bench_register_rust", "_ffi_is_registered", "_ffi_register_native", "_ffi_register_python", "_ffi_rpjrt_version", "_ffi_runtime_version", "_ffi_unregister", "_python_shape", "_python_to_host", "_convert_host", "_shard_global_dims", "_global_signature", "_shard_check", "_initialize", "_MAX_PROCESSES", "_bench_hold_gil", "OpSharding", "set_wait_spin", "wait_spin", "Trace", "_TraceRecording", "_trace_begin", "_trace_html", "release_pooled_memory", "pooled_memory_stats", "set_pooled_memory_limit", "_bench_rust_loop"]

__version__: str

#: A client create option or plugin attribute value.
_OptionValue: TypeAlias = str | int | float | bool | Sequence[int]
#: What names a plugin: a platform ("cpu", "cuda", "gpu", "tpu"), a plugin or wheel name,
#: a path to the library, a discovered PluginInfo, or a loaded Plugin.
_PluginSpec: TypeAlias = str | os.PathLike[str] | PluginInfo | Plugin
#: Anything `rpjrt.dtype(...)` accepts.
_DTypeLike: TypeAlias = DType | str | type | Any
#: A device layout to request: minor_to_major dimension numbers, or an untiled
#: `rpjrt.transfer.DeviceLayout`.
_LayoutLike: TypeAlias = Sequence[int] | Any
_Out = TypeVar("_Out")

@final
class Plugin:
    """A loaded PJRT plugin library. Loading the same file twice returns the same plugin."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...

    def __new__(
        cls, spec: str | os.PathLike[str] | PluginInfo | None = None, *, timeout: float | None = None
    ) -> Self:
        """Loads the plugin. The load runs on a thread of its own: Ctrl-C interrupts the wait,
        and after `timeout` seconds (default: RPJRT_PLUGIN_TIMEOUT, else none) it raises
        DeadlineExceededError; a load given up on goes on in the background."""
    @property
    def path(self) -> str: ...
    @property
    def info(self) -> PluginInfo:
        """What discovery knew about it (source, wheel version...)."""
    @property
    def name(self) -> str: ...
    @property
    def api_version(self) -> tuple[int, int]:
        """The PJRT C API version the plugin implements, (major, minor)."""
    @property
    def table_slots(self) -> int: ...
    @property
    def extensions(self) -> list[str]:
        """Names of the PJRT extensions the plugin offers (e.g. "FFI", "Layouts")."""
    @property
    def attributes(self) -> dict[str, str | int | float | bool | list[int]]:
        """The plugin's attributes (xla_version, stablehlo_current_version, ...). A name the
        plugin reports more than once keeps its first value (see duplicate_attributes)."""
    @property
    def duplicate_attributes(self) -> list[tuple[str, str | int | float | bool | list[int]]]:
        """The attributes the plugin reported again under a name it had already used, as
        `[(name, value)]` in its order: what `attributes` (first value wins) leaves out."""
    @property
    def stablehlo_version(self) -> tuple[int, int, int] | None:
        """The newest StableHLO version the plugin reads (its stablehlo_current_version), by
        the rule of stablehlo_versions(): three numbers, none negative; else None.

        Serialize portable artifacts for at most this version.
        """
    def __repr__(self) -> str: ...
    def stablehlo_versions(self) -> tuple[str, str] | None:
        """(current, minimum) StableHLO versions the plugin reads, as "X.Y.Z"."""
    def stablehlo_target(self) -> str | None:
        """The StableHLO version to serialize portable artifacts to for this plugin."""
    def stablehlo_fit(self, program: str | bytes) -> dict[str, Any]:
        """artifact (version it was written for, or None), minimum, current, fits, refused."""
    def topology(self, name: str) -> Topology:
        """A named topology without a client; UnsupportedError where the plugin has none."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Client:
    """A PJRT client: devices, compilation, buffers. A context manager; close() is idempotent."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...

    def __new__(
        cls,
        plugin: _PluginSpec | None = None,
        *,
        options: Mapping[str, _OptionValue] | None = None,
        cache_dir: Cache | str | bytes | os.PathLike[str] | os.PathLike[bytes] | None = None,
        kv: _KvStoreLike | None = None,
        process_id: int | None = None,
        num_processes: int | None = None,
        timeout: float | None = None,
    ) -> Self:
        """cache_dir turns the persistent compile cache on for this client (also on when
        RPJRT_CACHE_DIR is set). kv, process_id and num_processes together make one process
        of a multi-process client: the plugin rendezvouses through kv's set/get/try_get.
        Loading the plugin and creating the client run on a thread of their own: Ctrl-C
        interrupts the wait, and after `timeout` seconds (default: RPJRT_PLUGIN_TIMEOUT, else
        none) it raises DeadlineExceededError; a call given up on goes on in the background."""
    @property
    def plugin(self) -> Plugin: ...
    def load(
        self,
        data: bytes | bytearray | memoryview | os.PathLike[str],
        *,
        bare: bool = False,
        overrides: Mapping[str, int | bool] | None = None,
    ) -> Executable:
        """Load an artifact written by Executable.serialize(), checked completely (magic,
        length, checksum, target) before the plugin sees it; a mismatch names both sides.
        bare=True loads a plugin's own serialized executable with no checks: a bare blob
        does not name the plugin or version that wrote it, so one from another plugin may
        load and compute wrong values without an error (use it only for bytes this same
        plugin serialized with serialize_bare()). device_ordinal overrides are checked as
        compile options are (-1 or a device of this client). overrides
        (num_replicas, num_partitions, portable, use_spmd_partitioning, device_ordinal)
        replace the artifact's compile options where the plugin allows it (PJRT 0.71+)."""
    @property
    def cache(self) -> Cache | None:
        """The compile cache compile() uses (settable: a Cache, a directory, or None)."""
    @cache.setter
    def cache(self, cache: Cache | str | bytes | os.PathLike[str] | os.PathLike[bytes] | None) -> None: ...
    def topology(self) -> Topology:
        """The topology of the client's devices; UnsupportedError where the plugin has none."""
    def artifact_target(self) -> dict[str, str | int]:
        """What artifacts from this client are built for (platform, versions, devices)."""
    @property
    def platform(self) -> str:
        """The platform name the plugin reports, e.g. "cpu", "cuda"."""
    @property
    def platform_version(self) -> str: ...
    @property
    def process_index(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def devices(self) -> list[Device]:
        """Every device of the client, other processes' too (as Rust's ``Client::devices``)."""
    def addressable_devices(self) -> list[Device]:
        """The devices this process can use."""
    def all_devices(self) -> list[Device]:
        """Deprecated name of ``devices()`` (warns); removed in the next release."""
    def device(self, id: int) -> Device:
        """The device with global id `id`."""
    def memories(self) -> list[Memory]:
        """The memories this process can use."""
    def compile(
        self,
        program: str | bytes | os.PathLike[str],
        *,
        format: Literal["mlir", "hlo"] | None = None,
        num_replicas: int | None = None,
        num_partitions: int | None = None,
        use_spmd_partitioning: bool | None = None,
        use_shardy_partitioner: bool | None = None,
        device_assignment: Sequence[Sequence[int | Device]] | None = None,
        device: Device | None = None,
        portable: bool = False,
        env_option_overrides: Mapping[str, str | int | float | bool] | None = None,
        cache: Cache | str | bytes | os.PathLike[str] | os.PathLike[bytes] | None = None,
    ) -> Executable:
        """Compile StableHLO (text, bytecode or a jax.export portable artifact) or an HLO proto.

        num_replicas and num_partitions default to 1 (None means the default);
        device_assignment is indexed `[replica][partition]`; device picks the one device of
        a single-device program (default: the first addressable one); portable=True makes a
        single-device program that runs on any device (`exe(..., device=d)`).
        """
    def put(
        self,
        obj: object,
        device: Device | int | None = None,
        *,
        memory: Memory | str | None = None,
        dtype: _DTypeLike | None = None,
        copy: bool | None = True,
        cast: bool = False,
        layout: _LayoutLike | None = None,
    ) -> Buffer:
        """Put host data on a device.

        device: a Device, or an int: the device at that place in addressable_devices() (not
        a device id; in a job of several processes the two differ, and `client.device(id)`
        looks a device up by id). Default: the client's default device.
        obj: any buffer-protocol object (bytes, bytearray, array.array, memoryview, numpy
        arrays, including non-contiguous ones), a `__dlpack__` producer, a Python number or a
        nested list of numbers of one kind, or a Buffer (copied to `device`). numpy and
        ml_dtypes scalars in a list keep their dtype, promoted as `numpy.asarray` promotes
        them (`[np.int8(1)]` is int8); a `longdouble` one is refused, as the bare scalar is.
        dtype: the element type; with raw bytes (format "B", "b" or "c", or numpy's raw
        "|V" items of the same width) it reinterprets them; numpy arrays and scalars,
        `__dlpack__` producers, Python numbers and lists are converted, and every value must
        fit exactly (out-of-range values, float -> int, complex -> real and float overflow
        raise InvalidArgumentError; a NaN keeps its sign and payload as numpy's astype
        keeps them); with other buffer-protocol objects it must match the data (big-endian
        data is converted, other formats refused).
        cast: convert as numpy's astype does (wrapping, truncating, saturating) instead of
        refusing values the dtype cannot hold.
        copy: True copies during the call; False shares the host memory (raises if the
        plugin cannot use it in place; the data must then stay unchanged while the Buffer
        lives); None shares when possible. Host allocations that cannot be made raise
        ResourceExhaustedError (a MemoryError).
        layout: a device layout to ask the plugin for, as minor_to_major dimension numbers
        (``(0, 1)``: column-major 2-d) or an untiled ``rpjrt.transfer.DeviceLayout``; the
        data is copied (copy=False is refused). Host reads stay row-major; programs refuse
        such a buffer as an argument (plugins disagree on it), so copy it first.
        """
    def create_alias_buffer(
        self,
        dtype: _DTypeLike,
        shape: Sequence[int],
        device: Device | int | None = None,
        *,
        memory: Memory | str | None = None,
    ) -> tuple[Buffer, AliasFulfiller]:
        """A buffer of ``dtype[shape]`` whose contents come later, and its fulfiller
        (PJRT_Client_CreateAliasBuffer): ``fulfiller.fulfill(other)`` gives it the contents
        of a buffer of the same dtype, shape and device; ``fulfiller.fail(code, message)``
        an error. Waiting on the alias blocks until then. Raises UnsupportedError naming
        the entry on plugins without it."""
    def from_dlpack(
        self, obj: object, device: Device | int | None = None, *, copy: bool | None = None
    ) -> Buffer:
        """Adopt a `__dlpack__` producer's memory (zero-copy when possible)."""
    def close(self) -> None:
        """Destroy the client. Later use of it or its objects raises ClientClosedError."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None: ...
    def __repr__(self) -> str: ...

@final
class Device:
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...
    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def platform(self) -> str: ...
    @property
    def process_index(self) -> int: ...
    @property
    def local_hardware_id(self) -> int | None: ...
    @property
    def is_addressable(self) -> bool: ...
    @property
    def attributes(self) -> dict[str, str | int | float | bool | list[int]]: ...
    @property
    def client(self) -> Client: ...
    def memories(self) -> list[Memory]: ...
    def default_memory(self) -> Memory: ...
    def memory(self, kind: str) -> Memory:
        """The memory of this device with the given kind, e.g. "pinned_host"."""
    def memory_stats(self) -> dict[str, int | None]:
        """The allocator's figures: bytes_in_use, peak_bytes_in_use, num_allocs,
        largest_alloc_size, bytes_limit, largest_free_block_bytes (None: not reported).

        Raises UnsupportedError, quoting the plugin's answer, where the plugin reports
        none (both CPU plugins)."""
    def __repr__(self) -> str: ...
    def __str__(self) -> str: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Memory:
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...
    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def kind_id(self) -> int: ...
    @property
    def client(self) -> Client: ...
    def devices(self) -> list[Device]:
        """The devices that can address this memory."""
    def __repr__(self) -> str: ...
    def __str__(self) -> str: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Executable:
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...
    @property
    def name(self) -> str: ...
    def delete(self) -> None:
        """Free the compiled program's device resources now (a no-op when already deleted). Later calls raise ExecutableDeletedError."""
    def is_deleted(self) -> bool: ...
    @property
    def client(self) -> Client: ...
    @property
    def num_outputs(self) -> int: ...
    @property
    def num_replicas(self) -> int: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def input_dtypes(self) -> list[DType]: ...
    @property
    def input_shapes(self) -> list[tuple[int, ...]]: ...
    @property
    def output_dtypes(self) -> list[DType]: ...
    @property
    def output_shapes(self) -> list[tuple[int, ...]]: ...
    @property
    def fingerprint(self) -> str | None:
        """The plugin's fingerprint of the executable, or None where it offers none.

        XLA's plugins give their fingerprint of the program module: it need not change with
        compile options (two executables of one program compiled differently can share it),
        so it does not identify the compiled code. Raises ClientClosedError after
        ``client.close()``, ExecutableDeletedError after ``delete()``, and the plugin's
        error when its fingerprint entry fails.
        """
    def serialize(self) -> bytes:
        """An rpjrt artifact: the plugin's executable in an envelope recording its target."""
    def serialize_bare(self) -> bytes:
        """The plugin's own serialized executable, with no envelope."""
    def optimized_program(self) -> tuple[str, bytes]:
        """(format, bytes) of the optimized program the plugin compiled."""
    def optimized_hlo_text(self) -> str:
        """Optimized HLO text; UnsupportedError where the plugin gives only a binary form."""
    def cost_analysis(self) -> dict[str, int | float | str | bool | list[int]]: ...
    def compiled_memory_stats(self) -> dict[str, int]: ...
    def output_memory_kinds(self) -> list[str]: ...
    def parameter_shardings(self) -> list[OpSharding]:
        """The sharding of each parameter: the plugin's (Shardings extension), else what the
        SPMD partitioner recorded in the compiled program; UnsupportedError when neither says."""
    def output_shardings(self) -> list[OpSharding]:
        """The sharding of each output, from the plugin or the compiled program as
        parameter_shardings(); UnsupportedError when neither says."""
    def parameter_layouts(self) -> list[tuple[int, ...] | None]:
        """minor_to_major of each parameter's layout (Layouts extension)."""
    def output_layouts(self) -> list[tuple[int, ...] | None]: ...
    def compile_options(self) -> bytes:
        """The serialized CompileOptionsProto it was built with."""
    def addressable_devices(self) -> list[Device]:
        """The addressable devices it runs on, in execute_sharded order."""
    def devices(self) -> list[Device]:
        """Deprecated name of ``addressable_devices()`` (warns); removed in the next release."""
    def __call__(
        self,
        *args: object,
        device: Device | None = None,
        donate: Sequence[int] | None = None,
        ffi_user_data: object = None,
        wait: bool = False,
    ) -> list[Buffer]:
        """Run on one device; returns at once with not-yet-ready output Buffers.

        Arguments that are not Buffers are put on the device first. `donate` lists
        argument positions whose Buffers the program may reuse (they become deleted).
        `ffi_user_data` is handed to custom-call handlers as `call.user_data` (the call
        then waits until the execution has finished, and raises a handler's error).
        `wait=True` returns once every output is ready (or raises its computation's
        error), polling without the GIL in the same release as the execution:
        `exe(x, wait=True)` is one release where `exe(x)[0].block_until_ready()` is two.
        For a program with no outputs, `wait=True` waits for the execution itself (a
        failing custom call's error has nowhere else to go).
        """
    def execute_sharded(
        self,
        args: Sequence[Sequence[object]],
        *,
        donate: Sequence[int] | None = None,
        wait: bool = False,
    ) -> list[list[Buffer]]:
        """Run on every addressable device: args[i] is device i's argument list.

        `wait=True` returns once every output is ready, raising a failed computation's
        error; a program without outputs is then waited for through its completion events,
        which are the only place its failure (a custom call's error) goes."""
    def prepare(
        self, args: Sequence[Sequence[object]], *, donate: Sequence[int] | None = None
    ) -> PreparedCall:
        """Bind args (one argument list per device, as for execute_sharded) for repeated
        calls; every check of a call runs here, once."""
    def execute_with_events(
        self,
        *args: object,
        device: Device | None = None,
        donate: Sequence[int] | None = None,
    ) -> tuple[list[Buffer], Event | None]:
        """Run like calling the executable; also returns the execution's completion
        Event (None where the plugin hands back none)."""
    def __repr__(self) -> str: ...

@final
class PreparedCall:
    """An executable with its arguments bound (Executable.prepare)."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...
    def __call__(self, *, wait: bool = True) -> CallOutputs:
        """Run once; with wait=True return once every device has finished (one wait per
        device) and raise the execution's error."""
    @property
    def executable(self) -> Executable: ...
    @property
    def num_devices(self) -> int: ...
    @property
    def num_args(self) -> int: ...
    def argument(self, device: int, position: int) -> Buffer:
        """The bound argument (the same buffer: deleting it makes later calls fail)."""

@final
class CallOutputs:
    """The outputs of one prepared call: outs[j] lists output j's shards, one per device."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> list[Buffer]: ...
    @property
    def num_devices(self) -> int: ...
    def per_device(self) -> list[list[Buffer]]:
        """One output list per device, as Executable.execute_sharded returns."""
    def device(self, device: int) -> list[Buffer]: ...
    def block_until_ready(self) -> Self:
        """Wait until the execution has finished on every device (one wait for all of them)."""

@final
class Event:
    """Something the device finishes later (a buffer's readiness, an execution).

    Future-shaped: ``wait``, ``is_ready``/``done``, ``await ev``, ``add_done_callback``,
    ``error``."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...
    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the event completes or ``timeout`` seconds pass: True when it
        completed, False on timeout; raises the event's error. Ctrl-C works."""
    def is_ready(self) -> bool: ...
    def done(self) -> bool: ...
    def error(self) -> Error | None:
        """The exception a failed event carries; None while pending or after success. Once
        the client is closed, an event not seen to complete before carries a
        ClientClosedError (never None)."""
    def add_done_callback(self, fn: Callable[[Event], object]) -> None:
        """Call ``fn(event)`` once the event completes, on rpjrt's callback thread (callbacks
        run one at a time there; one that blocks delays the others, never an ``await``)."""
    def __await__(self) -> Generator[Any, None, None]: ...
    def __repr__(self) -> str: ...

@final
class Buffer:
    """An array in device memory. Operations on it do not block unless they say so."""
    def copy(self) -> Buffer:
        """An independent copy in the same memory: deleting or donating one leaves the other."""
    def __copy__(self) -> Buffer: ...
    def __deepcopy__(self, memo: Any, /) -> Buffer: ...

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int:
        """Number of elements."""
    @property
    def nbytes(self) -> int:
        """Bytes of the host representation: size * dtype.itemsize."""
    @property
    def on_device_size(self) -> int:
        """Bytes the buffer occupies on the device."""
    @property
    def device(self) -> Device: ...
    @property
    def memory(self) -> Memory: ...
    @property
    def client(self) -> Client: ...
    def is_ready(self) -> bool: ...
    def block_until_ready(self) -> Self:
        """Wait until the data is computed; raises the computation's error. Ctrl-C works.

        Polls for up to :func:`wait_spin` seconds (100 µs by default) before sleeping:
        waking a sleeping thread costs more than a short computation."""
    def __await__(self) -> Generator[Any, None, Self]:
        """`await buf` waits without blocking the event loop and returns the buffer."""
    def ready_event(self) -> Event:
        """An Event that completes when the buffer's contents are ready."""
    @overload
    def to_host(self, out: None = None) -> memoryview:
        """A fresh host copy as a memoryview with this shape and a struct format, or, with
        ``out``, the data copied into ``out`` (see copy_to_host), which is returned.

        Types without a buffer-protocol format (bfloat16, float8..., int4...) come as
        unsigned integers of the same item size holding the raw bits.
        """
    @overload
    def to_host(self, out: _Out) -> _Out: ...
    def copy_to_host(self, out: Any) -> None:
        """Copy into ``out``: any writable buffer-protocol object or numpy array of this
        shape and dtype, with any strides (negative, non-contiguous, Fortran order). Types
        without a buffer format take a numpy array of their ml_dtypes type, or integers of
        the same size (the raw bits). Sub-byte types land one element per byte. Wrong shape,
        dtype, byte order or a read-only ``out`` raise InvalidArgumentError naming it."""
    def tobytes(self) -> bytes: ...
    def tolist(self) -> Any: ...
    def to_numpy(self, out: Any = None) -> Any:
        """A fresh, writable numpy array that owns its data (needs numpy, imported on the
        first call; ml_dtypes for its types). `numpy.asarray(buf)` gives the same.

        With `out` (a preallocated writable array of the buffer's shape and dtype, any
        strides) the contents are copied into `out`, which is returned: no allocation and
        no page faults of fresh memory, so a loop that reuses its destination copies at
        `memcpy` speed (a fresh 64 MiB array costs about what numpy's own `copy()` does)."""
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any: ...
    def __jax_array__(self) -> Any:
        """`jnp.asarray(buf)` / `jnp.array(buf)`: a host copy, as `numpy.asarray(buf)`."""
    def __float__(self) -> float: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __complex__(self) -> complex: ...
    def copy_to(self, destination: Device | Memory) -> Buffer: ...
    def delete(self) -> None:
        """Free the device memory now (a no-op when already deleted). Later use raises BufferDeletedError."""
    def is_deleted(self) -> bool: ...
    def __dlpack__(
        self,
        *,
        stream: int | Any | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __repr__(self) -> str: ...
    # len: the first dimension (TypeError for a 0-d buffer). bool: the truth of a
    # one-element buffer's value (read from the device); any other size raises ValueError,
    # as numpy 2 does. ==: handles of one device buffer (never elementwise).
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Cache:
    """A persistent compile-cache directory (atomic writes, shared by processes, LRU bound)."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...

    def __new__(cls, dir: str | bytes | os.PathLike[str] | os.PathLike[bytes], max_bytes: int | None = None) -> Self: ...
    @staticmethod
    def from_env() -> Cache | None:
        """The cache named by RPJRT_CACHE_DIR (and RPJRT_CACHE_MAX_BYTES), or None."""
    @property
    def dir(self) -> str: ...
    @property
    def max_bytes(self) -> int | None: ...
    def stats(self) -> dict[str, int | float]:
        """hits, misses, corrupt, writes, evictions, bytes_read, bytes_written, time_saved,
        compile_time, hit_time and hit_plugin_time (seconds; the plugin's deserialization
        within the hits), counted by this object."""
    def reset_stats(self) -> None: ...
    def entries(self) -> list[dict[str, Any]]: ...
    def info(self, key: str) -> dict[str, Any]: ...
    def clear(self) -> int: ...
    def evict(self) -> int: ...
    def total_bytes(self) -> int: ...
    def take_warnings(self) -> list[str]: ...
    def __repr__(self) -> str: ...

@final
class Topology:
    """A plugin's description of a set of devices (for compiling without them)."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...

    @property
    def platform_name(self) -> str: ...
    @property
    def platform_version(self) -> str: ...
    def devices(self) -> list[tuple[int, str]]: ...
    def fingerprint(self) -> int | None: ...
    def serialize(self) -> bytes: ...
    def compile(
        self, program: str | bytes | os.PathLike[str], *, format: Literal["mlir", "hlo"] | None = None
    ) -> bytes:
        """Compile without devices; returns an artifact for Client.load."""

@final
class OpSharding:
    """XLA's OpSharding of a parameter or output; str() is XLA's short form
    ("{replicated}", "{maximal device=0}", "{devices=[2,1]<=[2]}")."""

    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview | os.PathLike[str]) -> OpSharding:
        """Decodes a serialized OpSharding proto (InvalidArgumentError when it is not one)."""
    @property
    def type(self) -> Literal["replicated", "maximal", "tuple", "other", "manual", "unknown", "unreduced"]: ...
    @property
    def tile_assignment_dimensions(self) -> list[int]: ...
    @property
    def tile_assignment_devices(self) -> list[int]:
        """Devices listed explicitly (empty for an iota assignment; see devices())."""
    @property
    def iota_reshape_dims(self) -> list[int]: ...
    @property
    def iota_transpose_perm(self) -> list[int]: ...
    @property
    def replicate_on_last_tile_dim(self) -> bool: ...
    @property
    def last_tile_dims(self) -> list[str]: ...
    @property
    def tuple_shardings(self) -> list[OpSharding]: ...
    @property
    def shard_group(self) -> tuple[Literal["shard_as", "shard_like"], int] | None: ...
    @property
    def is_replicated(self) -> bool: ...
    def devices(self) -> list[int]:
        """The tile assignment's device ids in row-major order, an iota expanded."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def artifact_stablehlo_version(data: bytes | bytearray | memoryview | os.PathLike[str]) -> str | None:
    """The StableHLO version a portable artifact was written for, or None."""
def inspect_artifact(data: bytes | bytearray | memoryview | os.PathLike[str]) -> dict[str, Any]:
    """Verify an rpjrt artifact (magic, length, checksum) and describe its target."""

@final
class _Session:
    """Named slots on one device (the engine of rpjrt.Session)."""

    def __new__(cls, client: Client, device: Device | int | None = None) -> Self: ...
    @property
    def client(self) -> Client: ...
    @property
    def device(self) -> Device: ...
    @property
    def uploads(self) -> int: ...
    @property
    def loads(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def _close(self) -> None:
        """Frees every slot's buffer and refuses later use; closing twice, or after the
        client was closed, does nothing more."""
    def program(
        self,
        executable: Executable,
        inputs: Sequence[str],
        outputs: Sequence[str | None],
        donate: bool = True,
    ) -> SessionProgram: ...
    def bind(self, name: str, value: object) -> None: ...
    def bind_all(
        self,
        pairs: Sequence[tuple[str, object]],
        lazy: Sequence[tuple[str, Any] | tuple[str, Any, tuple[Any, Sequence[int]] | None]] | None = None,
    ) -> None:
        """Binds every ``(name, value)`` pair, and each ``(name, loader)`` or ``(name,
        loader, (dtype, shape) | None)`` of ``lazy`` to its loader, all or nothing: names,
        loaders, declared specs (which become the slots' specs) and the client are checked,
        and values uploaded, before any slot changes."""
    def bind_lazy(self, name: str, loader: Any) -> None:
        """Binds slot ``name`` to ``loader``; refused for an empty name, a value that is
        not callable, or a closed session or client."""
    def buffer(self, name: str) -> Buffer: ...
    def fetch_host(self, name: str) -> Any: ...
    def save(self, path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> None: ...
    def restore(self, path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> None: ...
    def slots(self) -> list[tuple[str, Any, tuple[int, ...] | None, str]]: ...
    def __repr__(self) -> str: ...

@final
class AliasFulfiller:
    """Completes an alias buffer (Client.create_alias_buffer) once; dropped unused, it
    fails the alias with CANCELLED so nothing waits forever."""

    def fulfill(self, buffer: Buffer) -> None:
        """Give the alias ``buffer``'s contents (same client, dtype, shape and device).
        ``buffer`` is moved into the alias, as a donation is: it is deleted (later use of it
        raises ``BufferDeletedError``; read the alias instead). A buffer that does not match
        is refused and the alias stays pending."""
    def fail(self, code: str, message: str) -> None:
        """Complete the alias with an error ``code`` (a name such as "INTERNAL")."""
    @property
    def pending(self) -> bool:
        """Whether the alias still waits to be completed."""
    def __repr__(self) -> str: ...

@final
class SessionProgram:
    """A program whose arguments and outputs are slots of a Session."""
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any, /) -> Self: ...

    @property
    def executable(self) -> Executable: ...
    @property
    def inputs(self) -> list[str]: ...
    @property
    def outputs(self) -> list[str | None]: ...
    @property
    def donated(self) -> list[str]:
        """Slots donated to each call (read and written, aliased in the compiled module)."""
    def __call__(self, **values: object) -> dict[str, Buffer]:
        """Bind the keyword arguments to their slots, then run (without waiting); returns
        the outputs that have a slot, ``{slot name: Buffer}``, each shared with its slot."""
    def __repr__(self) -> str: ...

def _uses_shardy(program: str | bytes) -> bool: ...
def _shard_split(
    data: Any,
    dtype: _DTypeLike,
    dims: Sequence[int],
    axes: Sequence[tuple[str, int]],
    device_ids: Sequence[int],
    spec: Sequence[Sequence[str]],
) -> tuple[list[bytes], list[int]]: ...
def _shard_assemble(
    shards: Sequence[tuple[Any, _DTypeLike, Sequence[int]]],
    dtype: _DTypeLike,
    dims: Sequence[int],
    axes: Sequence[tuple[str, int]],
    device_ids: Sequence[int],
    spec: Sequence[Sequence[str]],
) -> bytearray: ...
def _shard_global_dims(
    shard_dims: Sequence[int],
    axes: Sequence[tuple[str, int]],
    device_ids: Sequence[int],
    spec: Sequence[Sequence[str]],
) -> list[int]: ...
def _global_signature(
    exe: Executable,
) -> tuple[list[list[int] | None], list[list[int] | None]] | None: ...
def _shard_check(
    sharding: OpSharding,
    rank: int,
    axes: Sequence[tuple[str, int]],
    device_ids: Sequence[int],
    spec: Sequence[Sequence[str]],
) -> None: ...

@final
class _Waiter:
    """Keeps a buffer's ready-event alive while `await buf` waits on it."""

def _bench_c_floor(
    exe: Executable, args: Sequence[Buffer], iters: int, wait: Literal["event", "ready", "none"]
) -> float: ...
@final
class _BenchFloor:
    """The raw C floor of an execution, prepared once; one iteration per call (benchmarks)."""

    def __new__(
        cls, exe: Executable, lists: Sequence[Sequence[Buffer]], wait: Literal["event", "ready", "none"]
    ) -> Self: ...
    def __call__(self, *_args: object) -> None: ...
    def run(self, iters: int) -> float: ...

def _bench_hold_gil(flag: bool) -> None: ...
def _bench_rust_loop(exe: Executable, lists: Sequence[Sequence[Buffer]], iters: int) -> float: ...
def _probe_pjrt_version(path: str | os.PathLike[str]) -> str: ...

_FoundPlugin: TypeAlias = tuple[
    str, str, str | None, str, str | None, str | None, dict[str, Any] | None, str | None
]

def _discover(search_path: Sequence[str | os.PathLike[str]]) -> list[_FoundPlugin]: ...
def _candidates(spec: str | None, search_path: Sequence[str | os.PathLike[str]]) -> list[_FoundPlugin]: ...
def _discovery_tables() -> tuple[
    list[tuple[str, str, str, str, str]], list[str], list[str]
]: ...
def _pick_library(directory: str | os.PathLike[str], preferred: str | None = None) -> str | None: ...
def _element_types() -> list[
    tuple[str, int, int, int, str, str | None, list[str], tuple[int, int, int] | None, int | None]
]:
    """The element-type table: (name, code, bits, itemsize, kind, format, aliases, dlpack, ffi_code)."""
def _element_type_from_name(name: str) -> tuple[int | None, str]:
    """The PJRT code `name` denotes, or (None, why not)."""
def _python_to_host(obj: object, dtype: _DTypeLike | None = None) -> tuple[bytes, int, list[int]]:
    """(bytes, element type code, shape) of a Python number or nested list of numbers, under
    the one rule for numbers (rpjrt_npy::scalars::to_host)."""
def _convert_host(data: object, from_: _DTypeLike, shape: list[int], dtype: _DTypeLike) -> tuple[bytes, int, list[int]]:
    """(bytes, element type code, shape) of dense native host data of `from_` converted
    into `dtype` under the one rule for numbers (rpjrt_npy::scalars::convert)."""
def _python_shape(obj: object, dtype: _DTypeLike | None = None) -> tuple[list[int], int]:
    """(shape, element type code) of a Python number or nested list of numbers, checked but
    not converted (the cast=True path)."""
def _exit_if_loader_stuck() -> None:
    """The exit hook that ends the process when a plugin load given up on is still inside
    the system's library loader (a normal exit would wait for its lock forever)."""
def _stop_notifiers() -> None:
    """The exit hook that ends rpjrt's notifier threads before the interpreter finalizes."""
def _import_failed(module: str, what: str, error: BaseException, hint: str = "") -> BaseException:
    """The ImportError to raise for `what` when importing `module` raised `error` (the
    install hint only when the module is missing; at shutdown, that reason); `error` is its
    cause. Another exception than an ImportError comes back as it is."""
def _leak_at_exit() -> None:
    """The last exit hook: plugin objects freed after it are leaked, not destroyed in the
    plugin (a destroy that hangs cannot keep the process from ending); a client destroy in
    flight is waited for at most two seconds."""
def _before_fork() -> None:
    """The `os.register_at_fork(before=...)` hook: waits (at most 2 s) for a plugin load on
    another thread and holds the plugin registry across the fork; a child of the fork ends
    before the exit handlers registered until then (the plugin's static destructors)."""
def _after_fork() -> None:
    """The `os.register_at_fork` hook after a fork (parent and child): lets go of what
    `_before_fork` held."""
def _on_rpjrt_thread() -> bool:
    """Whether the calling thread is one of rpjrt's that runs Python code (a done-callback's
    notifier, a plugin thread running an FFI handler): the fork hook imports nothing there."""

def _plugin_timeout_env() -> float | None:
    """RPJRT_PLUGIN_TIMEOUT in seconds by the rule of ``Plugin(..., timeout=)``; None when unset."""

def set_wait_spin(seconds: float) -> None:
    """Set how long a blocking wait (``block_until_ready``, reading a buffer still being
    computed) polls for completion before it sleeps; 0 sleeps at once. Process-wide;
    default 100 µs (or ``RPJRT_WAIT_SPIN_US`` at the first client's creation). Polling
    trades CPU for latency: waking a sleeping thread costs tens of microseconds."""

def wait_spin() -> float:
    """How long, in seconds, a blocking wait polls before it sleeps."""

@final
class Trace:
    """A finished trace of rpjrt's own spans (see ``rpjrt.trace()``)."""

    @property
    def events(self) -> list[dict[str, Any]]:
        """The spans, ordered by start: dicts with ``name``, ``category``, ``start_us``,
        ``duration_us``, ``thread`` and ``args``."""
    def count(self, category: str) -> int:
        """How many spans of ``category`` (``load``, ``compile``, ``transfer``,
        ``execute``, ``wait``, ``fetch``, ``custom_call``) were recorded."""
    @property
    def metadata(self) -> dict[str, str]:
        """The metadata (``otherData``): ``plugin_profile`` says what the plugin's
        profiler gave, or why nothing."""
    @property
    def plugin_profile(self) -> bytes | None:
        """The plugin's serialized XSpace, or ``None``."""
    def to_chrome_json(self) -> str:
        """The Chrome trace-event JSON text."""
    def to_html(self) -> str:
        """The self-contained HTML viewer page."""
    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the Chrome trace JSON (and the plugin's profile beside it)."""
    def __len__(self) -> int: ...

@final
class _TraceRecording:
    def finish(self) -> Trace:
        """Stops the recording (and the plugin's profiler) and returns the trace."""

def _trace_begin(client: Client | None = None) -> _TraceRecording:
    """Starts recording rpjrt's spans (and ``client``'s plugin profiler, if any)."""

def _trace_html(json: str, title: str = "rpjrt trace") -> str:
    """The viewer page of a Chrome trace given as JSON text."""

def release_pooled_memory() -> int:
    """Unmap the idle blocks of the staging pool and return the bytes released.

    A ``put`` of 4 MiB or more (copying) goes through a warm staging block that returns to
    a process-wide pool once its buffer is gone, so repeated puts of similar sizes copy at
    ``memcpy`` speed. Blocks in use by live buffers are not affected."""

def pooled_memory_stats() -> dict[str, int]:
    """What the staging pool holds and has done: ``limit``, ``pooled_bytes``,
    ``pooled_blocks`` (idle, kept for reuse), ``in_use_bytes``, ``in_use_blocks`` (lent to
    live buffers), ``hits`` (puts served warm), ``misses`` (new mappings),
    ``released_bytes`` (unmapped by the bound or on demand)."""

def set_pooled_memory_limit(nbytes: int) -> None:
    """Bound the idle memory the staging pool keeps (default 256 MiB, or
    ``RPJRT_STAGING_POOL_BYTES`` at first use; 0 turns pooling off). Idle blocks above the
    new bound are unmapped at once."""

def _run_cli(args: Sequence[str]) -> int:
    """Run the rpjrt command-line tool with argv `args` (args[0] is the program name)."""

class _KvStoreLike(Protocol):
    def set(self, key: str, value: bytes, /) -> None: ...
    def get(self, key: str, timeout: float, /) -> bytes: ...
    def try_get(self, key: str, /) -> bytes | None: ...

@final
class InMemoryStore:
    """A key-value store in this process's memory, shared by its threads.

    A store belongs to the process that made it: in a process forked from that one,
    ``set``, ``get``, ``try_get``, ``delete`` and ``barrier`` raise
    ``FailedPreconditionError`` naming the fork."""

    def __new__(cls) -> Self: ...
    def set(self, key: str, value: bytes | bytearray | memoryview) -> None:
        """Sets `key` to `value`, any contiguous bytes-like object (copied)."""
    def get(self, key: str, timeout: float = 30.0) -> bytes:
        """The value of `key`, waiting up to `timeout` s for it (Ctrl-C ends the wait)."""
    def try_get(self, key: str) -> bytes | None: ...
    def delete(self, key: str) -> bool:
        """Removes `key`; returns whether it was set."""
    def barrier(
        self, name: str, process_id: int, num_processes: int, timeout: float = 30.0
    ) -> None:
        """Waits for every process. Ctrl-C ends the wait, takes this arrival back and gives
        the use back: calling it again waits at the same generation."""

@final
class TcpStore:
    """The TCP key-value store: process 0 hosts it, the others connect with the token.

    A store belongs to the process that made it: in a process forked from that one,
    ``set``, ``get``, ``try_get``, ``delete``, ``barrier`` and ``shutdown`` raise
    ``FailedPreconditionError`` naming the fork, and dropping the store there does nothing
    (the parent's store goes on working).

    On a peer every call answers Ctrl-C, and a ``get`` whose host does not answer (paused,
    overloaded) fails about a second after its timeout."""

    @staticmethod
    def host(address: str, token: str) -> TcpStore: ...
    @staticmethod
    def connect(address: str, token: str, process_id: int, timeout: float = 30.0) -> TcpStore: ...
    @property
    def address(self) -> str: ...
    @property
    def is_host(self) -> bool: ...
    def set(self, key: str, value: bytes | bytearray | memoryview) -> None:
        """Sets `key` to `value`, any contiguous bytes-like object (copied)."""
    def get(self, key: str, timeout: float = 30.0) -> bytes:
        """The value of `key`, waiting up to `timeout` s for it (Ctrl-C ends the wait)."""
    def try_get(self, key: str) -> bytes | None: ...
    def delete(self, key: str) -> bool:
        """Removes `key`; returns whether it was set."""
    def barrier(
        self, name: str, process_id: int, num_processes: int, timeout: float = 30.0
    ) -> None:
        """Waits for every process. Ctrl-C ends the wait, takes this arrival back and gives
        the use back: calling it again waits at the same generation."""
    def shutdown(self, grace: float = 0.0) -> bool:
        """Host: stop, first waiting up to ``grace`` s for every peer to leave (Ctrl-C
        ends the wait: the host stops at once and ``KeyboardInterrupt`` is raised).
        Peer: say goodbye, then close."""

def _detect_launch_env() -> dict[str, Any]: ...
def _initialize(
    process_id: int | None,
    num_processes: int | None,
    coordinator: str | None,
    token: str | None,
    timeout: float,
) -> tuple[dict[str, Any], TcpStore]:
    """distributed.initialize: the resolved launch environment and the joined store."""
def _first_host(list: str) -> str: ...

_MAX_PROCESSES: int

@final
class FfiBuffer:
    """One buffer argument or result of a custom call; valid only during the handler call.

    Views (``memoryview()``, ``to_numpy()``, ``__array__``, ``__dlpack__``) never address the
    runtime's memory: the first view of a buffer makes a copy (an argument's bytes, or a zeroed
    result), and what is written into a result's views is copied into the result when the
    handler returns, as ``jax.pure_callback`` copies. A view kept past the call stays readable
    but is detached from the computation; a new view after the call raises. ``data`` is an
    address for native code (ctypes, a C kernel): on the host, of the copy the views share,
    so what is written through it reaches a result as a view's writes do; on an accelerator,
    the runtime's device memory. It is meaningful during the call only.
    """
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def ffi_dtype(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def data(self) -> int: ...
    @property
    def is_host(self) -> bool: ...
    @property
    def writable(self) -> bool: ...
    def memoryview(self) -> memoryview: ...
    def to_numpy(self) -> Any:
        """A numpy array over the buffer's copy, during the call only. Sub-byte types (int4,
        uint4, int2, uint2) are packed below a byte, which no numpy view can show: this
        raises, saying to return the result as an ml_dtypes array (rpjrt packs it) or to
        use ``memoryview()`` (packed, low bits first); ``np.asarray(arg)`` /
        ``np.array(buf)`` give an unpacked copy (see ``__array__``)."""
    def __array__(self, dtype: object = None, copy: bool | None = None) -> Any: ...
    def __dlpack__(self, **kwargs: Any) -> CapsuleType:
        """DLPack export of the buffer's copy (the keywords of ``ndarray.__dlpack__``).

        An argument is read-only, which only versioned DLPack can mark:
        ``max_version=(1, 0)`` or newer (as ``np.from_dlpack`` asks) exports it read-only;
        a legacy request (no ``max_version``) gets a private writable copy of the
        argument's values (writing it changes nothing), and a legacy request with
        ``copy=False`` raises ``BufferError`` saying to pass ``max_version``.
        """
        ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __repr__(self) -> str: ...

@final
class FfiCall:
    """What a Python custom-call handler receives.

    The handler returns ``None`` (after writing ``rets``), or the results: one array-like
    for a single result, or a tuple/list with one per result (a plain list is one value
    per result, even for a single result), each of the result's exact shape and dtype
    (anything else fails the execution with ``InvalidArgumentError``). A ``BaseException``
    that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``,
    one's own subclass...) raised in a handler propagates as itself from the call that
    reports the execution's error. A string attribute that is not UTF-8 fails
    the call with an error naming the attribute. At interpreter exit, handlers not yet
    started fail (``CancelledError``) without running Python.
    """
    @property
    def target(self) -> str: ...
    @property
    def args(self) -> tuple[FfiBuffer, ...]: ...
    @property
    def rets(self) -> tuple[FfiBuffer, ...]: ...
    @property
    def attrs(self) -> dict[str, Any]: ...
    @property
    def stream(self) -> int: ...
    @property
    def user_data(self) -> Any: ...
    @property
    def runtime_version(self) -> tuple[int, int]: ...
    @property
    def stage(self) -> str: ...
    @property
    def device_ordinal(self) -> int | None:
        """The ordinal of the device the call runs on (None where the runtime does not
        say, and during the instantiate stage, which runs at compile)."""
    @property
    def state(self) -> Any:
        """The instance's state: what the ``instantiate`` function given at registration
        returned for this compiled call site (None without one, and during the
        instantiate stage)."""
    def __repr__(self) -> str: ...

_FfiRegistration: TypeAlias = tuple[str, str, tuple[int, int], tuple[int, int]]

def _ffi_register_python(
    target: Client | Plugin,
    name: str,
    func: Any,
    platform: str | None = None,
    replace: bool = False,
    instantiate: Any = None,
) -> _FfiRegistration: ...
def _ffi_register_native(
    target: Client | Plugin,
    name: str,
    handler: CapsuleType | int,
    platform: str | None = None,
    replace: bool = False,
) -> _FfiRegistration: ...
def _ffi_unregister(target: Client | Plugin, name: str, platform: str | None = None) -> bool: ...
def _ffi_is_registered(target: Client | Plugin, name: str, platform: str | None = None) -> bool: ...
def _ffi_runtime_version(target: Client | Plugin) -> tuple[int, int]: ...
__all__ += ["_ffi_finalize"]

def _ffi_finalize() -> None: ...

__all__ += ["_ffi_handler_wait_limit"]

def _ffi_handler_wait_limit(seconds: float | None = None) -> float: ...
def _ffi_rpjrt_version() -> tuple[int, int]: ...
def _ffi_bench_register_rust(target: Client | Plugin, name: str) -> _FfiRegistration: ...

__all__ += ["_byte_strides", "_copy_raw_to_host", "_create_error_buffer", "_create_uninitialized_buffer", "_default_layout", "_device_layout", "_layouts_extension_size", "_put_streaming"]

def _put_streaming(
    client: Client,
    source: Callable[[int, int], Any],
    dtype: _DTypeLike,
    shape: list[int],
    device: Device | int | None = None,
    memory: Memory | str | None = None,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    progress_threshold: int | None = None,
) -> Buffer:
    """Upload dtype[shape] in chunks from source(offset, nbytes) (see rpjrt.transfer)."""
def _copy_raw_to_host(buffer: Buffer, offset: int, size: int) -> bytes: ...
def _create_uninitialized_buffer(
    client: Client,
    dtype: _DTypeLike,
    shape: list[int],
    device: Device | int | None = None,
    memory: Memory | str | None = None,
) -> Buffer: ...
def _create_error_buffer(
    client: Client,
    dtype: _DTypeLike,
    shape: list[int],
    code: str,
    message: str,
    device: Device | int | None = None,
    memory: Memory | str | None = None,
) -> Buffer: ...
def _device_layout(buffer: Buffer) -> tuple[list[int], list[list[int]], int, int]:
    """(minor_to_major, tiles, element_size_bits, memory_space) of the buffer's layout."""
def _default_layout(
    client: Client, dtype: _DTypeLike, shape: list[int]
) -> tuple[list[int], list[list[int]], int, int]: ...
def _byte_strides(buffer: Buffer) -> list[int]: ...
def _layouts_extension_size(client: Client) -> int: ...

# rpjrt.cuda (python/src/cuda.rs); the public names are re-exported by rpjrt/cuda.py.
__all__ += ["CudaContext", "CudaDriver", "CudaEvent", "CudaFunction", "CudaModule", "CudaStream", "DeviceMemory", "PinnedMemory", "_cuda_allocators", "_cuda_driver_summary", "_cuda_options"]

def _cuda_options(
    *,
    memory_fraction: float | None = None,
    preallocate: bool | None = None,
    allocator: str | None = None,
    visible_devices: Sequence[int] | None = None,
) -> dict[str, str | int | float | bool | list[int]]:
    """Checked CUDA plugin create options, as a dict for Client(..., options=...)."""
def _cuda_allocators() -> list[str]:
    """The allocator names the CUDA plugin accepts."""
def _cuda_driver_summary() -> str:
    """One line on the CUDA driver: loaded (version, devices) or why it cannot be used."""

_KernelArgType = Literal["ptr", "i32", "u32", "i64", "u64", "f32", "f64"]

@final
class CudaDriver:
    """The CUDA driver library (libcuda.so.1), opened at run time."""

    @staticmethod
    def load(path: str | os.PathLike[str] | None = None) -> CudaDriver: ...
    @property
    def library(self) -> str: ...
    @property
    def driver_version(self) -> int: ...
    def device_count(self) -> int: ...
    def device_name(self, ordinal: int) -> str: ...
    def context(self, ordinal: int = 0) -> CudaContext: ...

@final
class CudaContext:
    """A device's primary context (the one XLA uses)."""

    @property
    def ordinal(self) -> int: ...
    def synchronize(self) -> None: ...
    def mem_info(self) -> tuple[int, int]: ...
    def alloc(self, nbytes: int) -> DeviceMemory: ...
    def alloc_pinned(self, nbytes: int) -> PinnedMemory:
        """Page-locked host memory for the asynchronous copies."""
    def memcpy_htod_async(self, dst: int, src: PinnedMemory, stream: int = 0) -> None: ...
    def memcpy_dtoh_async(self, dst: PinnedMemory, src: int, stream: int = 0) -> None: ...
    def stream(self) -> CudaStream: ...
    def event(self, timing: bool = False) -> CudaEvent: ...
    def load_ptx(self, ptx: str) -> CudaModule: ...
    def load_cubin(self, image: bytes) -> CudaModule: ...
    def memcpy_htod(self, dst: int, data: bytes) -> None: ...
    def memcpy_dtoh(self, src: int, nbytes: int) -> bytes: ...
    def memcpy_dtod(self, dst: int, src: int, nbytes: int) -> None: ...
    def memcpy_dtod_async(self, dst: int, src: int, nbytes: int, stream: int = 0) -> None: ...
    def memset(self, dst: int, value: int, nbytes: int) -> None: ...
    def memset_async(self, dst: int, value: int, nbytes: int, stream: int = 0) -> None: ...
    def launch(
        self,
        function: CudaFunction,
        grid: Sequence[int],
        block: Sequence[int],
        args: Sequence[tuple[_KernelArgType, int | float]],
        *,
        shared_mem: int = 0,
        stream: int = 0,
    ) -> None: ...

@final
class DeviceMemory:
    """Device memory allocated by rpjrt, freed when collected."""

    @property
    def ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def copy_from_host(self, data: bytes) -> None: ...
    def to_bytes(self) -> bytes: ...

@final
class PinnedMemory:
    """Page-locked host memory; waits for its last asynchronous copy before use or free."""

    @property
    def nbytes(self) -> int: ...
    def write(self, data: bytes) -> None: ...
    def to_bytes(self) -> bytes: ...

@final
class CudaModule:
    def function(self, name: str) -> CudaFunction: ...

@final
class CudaFunction:
    @property
    def name(self) -> str: ...

@final
class CudaStream:
    @property
    def handle(self) -> int: ...
    def synchronize(self) -> None: ...
    def wait_event(self, event: CudaEvent) -> None: ...

@final
class CudaEvent:
    def record(self, stream: int = 0) -> None: ...
    def synchronize(self) -> None: ...
    def elapsed_ms(self, start: CudaEvent) -> float: ...

__all__ += ["RawCopy", "_copy_raw_to_host_async"]
__all__ += ["CallOutputs", "PreparedCall"]

@final
class RawCopy:
    """A raw copy to host in flight (rpjrt.transfer.read_raw_async); ``wait()`` gives the
    bytes once."""

    def wait(self) -> bytes:
        """Wait for the copy (without the GIL) and return the bytes. Ctrl-C interrupts the
        wait for the source buffer's contents; the copy can then be waited for again."""
    @property
    def ready(self) -> bool:
        """Whether the copy has finished; True once waited for."""

def _copy_raw_to_host_async(buffer: Buffer, offset: int, size: int) -> RawCopy: ...

__all__ += ["TritonKernel", "_triton_available", "_triton_compile"]

@final
class TritonKernel:
    """A kernel the plugin compiled from Triton IR (rpjrt.triton.compile)."""

    @property
    def asm(self) -> bytes:
        """The assembly (PTX on CUDA); empty when the plugin wrote a file (``path``)."""
    @property
    def asm_text(self) -> str | None:
        """The assembly as text, or None if it is not UTF-8."""
    @property
    def entry_name(self) -> str | None:
        """The first ``.entry`` of the PTX (the kernel function to launch), if any."""
    @property
    def shared_mem_bytes(self) -> int:
        """Dynamic shared memory the kernel needs at launch, in bytes."""
    @property
    def cluster_dims(self) -> tuple[int, int, int] | None:
        """Thread-block cluster dimensions, reported by version-1 plugins only."""
    @property
    def path(self) -> str | None:
        """The file the plugin wrote the kernel to (ROCm), if it did instead of asm."""
    @property
    def arch(self) -> str:
        """The architecture it was compiled for, as sent to the plugin (``"9.0"``)."""
    @property
    def num_warps(self) -> int:
        """Warps per CTA (the kernel's block is 32 * num_warps threads)."""
    @property
    def num_ctas(self) -> int:
        """CTAs per cluster."""
    @property
    def num_stages(self) -> int:
        """Software-pipelining stages."""

def _triton_compile(
    target: Client | Plugin,
    module: str | bytes | bytearray,
    arch: str | None = None,
    num_warps: int = 4,
    num_ctas: int = 1,
    num_stages: int = 3,
) -> TritonKernel:
    """Compile Triton IR with the plugin's Triton extension."""

def _triton_available(target: Client | Plugin) -> bool:
    """Whether the plugin behind ``target`` has the Triton extension."""
