"""Typed use of the public API; type-checked by test_stubs.py (mypy --strict), not run."""

from __future__ import annotations

import array
import asyncio

import rpjrt


def use(client: rpjrt.Client, program: str) -> list[float]:
    exe: rpjrt.Executable = client.compile(program, num_replicas=1)
    dev: rpjrt.Device = client.devices()[0]
    mem: rpjrt.Memory = dev.default_memory()
    x: rpjrt.Buffer = client.put(array.array("f", [1.0]), dev, memory=mem, dtype=rpjrt.float32, copy=None)
    outs: list[rpjrt.Buffer] = exe(x, x, donate=[0])
    sharded: list[list[rpjrt.Buffer]] = exe.execute_sharded([[x]])
    y = outs[0].block_until_ready()
    shape: tuple[int, ...] = y.shape
    dt: rpjrt.DType = y.dtype
    mv: memoryview = y.to_host()
    version: tuple[int, int] = client.plugin.api_version
    infos: list[rpjrt.PluginInfo] = rpjrt.plugins()
    del shape, dt, version, infos, sharded
    return [float(v) for v in mv.tolist()]


async def wait(buf: rpjrt.Buffer) -> rpjrt.Buffer:
    return await buf


def errors() -> type[rpjrt.Error]:
    try:
        with rpjrt.Client("cpu") as c:
            c.close()
    except rpjrt.PluginLoadError as e:
        print(e.code, e.entry)
    return rpjrt.InvalidArgumentError


def multi_process() -> int:
    from rpjrt import distributed

    d = distributed.initialize(0, 1, "127.0.0.1:0", "token")
    store: distributed.KvStore = distributed.InMemoryStore()
    c = rpjrt.Client("cpu", kv=store, process_id=d.process_id, num_processes=d.num_processes)
    c2 = rpjrt.Client("cpu", kv=d.store, process_id=0, num_processes=1)
    adapted: distributed.KvStore = distributed.RedisStore(object())
    value: bytes | None = adapted.try_get("k")
    d.barrier("b", timeout=1.0)
    print(value, c2, d.source, distributed.detect().coordinator)
    return c.process_index + int(d.shutdown())


_ = asyncio


def compile_once(client: rpjrt.Client, program: str) -> rpjrt.Executable:
    cache = rpjrt.Cache("/var/tmp/rpjrt-cache", max_bytes=1 << 30)
    exe = client.compile(program, cache=cache)
    data: bytes = exe.serialize()
    hits = cache.stats()["hits"]
    entries: list[dict[str, object]] = cache.entries()
    client.cache = cache
    versions: tuple[str, str] | None = client.plugin.stablehlo_versions()
    target: str | None = client.plugin.stablehlo_target()
    written: str | None = rpjrt.artifact_stablehlo_version(data)
    layouts: list[tuple[int, ...] | None] = exe.output_layouts()
    stats: dict[str, int] = exe.compiled_memory_stats()
    spin: float = rpjrt.wait_spin()
    rpjrt.set_wait_spin(spin)
    del hits, entries, versions, target, written, layouts, stats, spin
    return client.load(data, overrides={"num_replicas": 1})


def session(client: rpjrt.Client, exe: rpjrt.Executable) -> float:
    import rpjrt.sharding as sh

    s = rpjrt.Session(client)
    step: rpjrt.SessionProgram = s.program(exe, inputs=["w", "x"], outputs=["w", None])
    s.bind("w", [1.0, 2.0])
    s.bind_many({"x": lambda: [3.0, 4.0]})
    step()
    step(x=[5.0, 6.0])
    donated: list[str] = step.donated
    n: int = s.uploads + s.loads
    mesh = sh.Mesh({"x": 2}, [0, 1])
    parts = sh.shard(client, [1.0, 2.0], mesh, ("x",))
    whole = sh.assemble(parts, mesh, ("x",), (2,))
    s.save("ckpt.npz")
    s.restore("ckpt.npz")
    w = rpjrt.Slot("w", (rpjrt.float32, (2,)))
    with rpjrt.Session(client) as t:
        prog: rpjrt.SessionProgram = t.program(exe, inputs=[w, "x"], outputs=["w_next", None])
        t.bind(w, [1.0, 2.0])
        t.bind_many({rpjrt.Slot("x"): [3.0, 4.0]})
        outs: dict[str, rpjrt.Buffer] = prog()
        t.feed_back(outs, into={"w_next": w})
        closed: bool = t.closed
    del donated, n, whole, closed
    return float(s.fetch("w")[0])


def data_plane(client: rpjrt.Client, x: rpjrt.Buffer) -> array.array[float]:
    out = array.array("f", [0.0])
    same: array.array[float] = x.to_host(out=out)
    x.copy_to_host(out)
    fresh: memoryview = x.to_host()
    col: rpjrt.Buffer = client.put([[1, 2], [3, 4]], layout=(0, 1))
    alias, fulfiller = client.create_alias_buffer(rpjrt.float32, (1,), 0)
    done: rpjrt.AliasFulfiller = fulfiller
    done.fulfill(x)
    pending: bool = done.pending
    del fresh, col, alias, pending
    return same


def use_cuda(ptx: str) -> bytes:
    import rpjrt.cuda

    opts = rpjrt.cuda.options(memory_fraction=0.5, preallocate=False, allocator="bfc", visible_devices=[0])
    client = rpjrt.Client("cuda", options=opts)
    drv: rpjrt.cuda.CudaDriver = rpjrt.cuda.load()
    ctx: rpjrt.cuda.CudaContext = drv.context(0)
    mem: rpjrt.cuda.DeviceMemory = ctx.alloc(1024)
    fn: rpjrt.cuda.CudaFunction = ctx.load_ptx(ptx).function("k")
    stream: rpjrt.cuda.CudaStream = ctx.stream()
    ctx.launch(fn, (1,), (256,), [("ptr", mem.ptr), ("u32", 256), ("f32", 1.5)], stream=stream.handle)
    stream.synchronize()
    free, total = ctx.mem_info()
    del client, free, total
    return mem.to_bytes()


def use_triton(client: rpjrt.Client, ttir: str) -> str | None:
    import rpjrt.triton

    ok: bool = rpjrt.triton.is_available(client)
    k: rpjrt.triton.TritonKernel = rpjrt.triton.compile(client, ttir, "sm_90", num_warps=8, num_stages=2)
    smem: int = k.shared_mem_bytes
    dims: tuple[int, int, int] | None = k.cluster_dims
    asm: bytes = k.asm
    del ok, smem, dims, asm
    return k.entry_name


def use_trace(client: rpjrt.Client, program: str) -> int:
    with rpjrt.trace("trace.json", client=client) as t:
        client.compile(program)
    spans: list[dict[str, object]] = list(t.events)
    done: rpjrt.Trace = t.result
    note: str = t.metadata["plugin_profile"]
    profile: bytes | None = t.plugin_profile
    t.save("again.json")
    del spans, note, profile
    return done.count("execute") + len(done)
