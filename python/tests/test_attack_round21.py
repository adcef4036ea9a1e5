"""Round 21 (outside checks of the many-process side, CLI and state): regressions of the
lead's fixes (the store fixes are in test_attack_round21_dist.py).

- ``put(x, device=N)`` with an int names the N-th addressable device, not device id N; in a
  job of several processes the two differ. A number out of range says how many devices this
  process addresses (of how many in the job), that the number is a place and not an id, and,
  when some device has that id, how to name it by id.
"""

from __future__ import annotations

from .conftest import fake_plugin_path, run_python


def test_an_int_device_is_a_place_in_the_addressable_devices_and_its_refusal_says_so() -> None:
    r = run_python(
        f"""
        import threading
        import numpy as np, rpjrt
        from rpjrt.distributed import InMemoryStore
        store, cl = InMemoryStore(), {{}}
        def make(p):
            cl[p] = rpjrt.Client({str(fake_plugin_path())!r}, options={{"fake_device_count": 2}},
                                 kv=store, process_id=p, num_processes=2)
        ts = [threading.Thread(target=make, args=(p,)) for p in (0, 1)]
        for t in ts: t.start()
        for t in ts: t.join()
        c1 = cl[1]
        print(c1.put(np.arange(3, dtype=np.float32), device=0).device.id)
        for n in (2, 7):
            try:
                c1.put(np.arange(3, dtype=np.float32), device=n)
            except rpjrt.InvalidArgumentError as e:
                print(e)
        """,
        env={"RPJRT_FAKE_KV": "1"},
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    placed, by_id, none = r.stdout.splitlines()
    # Index 0 of process 1 is its first own device, id 2.
    assert placed == "2"
    assert "device index 2 is out of range" in by_id
    assert "this process has 2 addressable devices (of the job's 4)" in by_id
    assert "not by its id" in by_id
    assert "client.device(2)" in by_id, by_id
    assert "device index 7 is out of range" in none
    assert "client.device(" not in none, none


def test_a_plugin_timeout_follows_the_clis_rule_and_words() -> None:
    """``timeout=`` and ``RPJRT_PLUGIN_TIMEOUT`` take what the CLI's --plugin-timeout
    takes: -1 was called "not non-negative" while 0 was refused too, and 1e-9 was taken
    although no such limit can be measured."""
    import math

    import pytest

    import rpjrt

    from .conftest import plugin_paths

    path = plugin_paths()["new"]
    for bad in (-1, 0, 0.0, -0.0, math.nan, -math.inf):
        with pytest.raises(rpjrt.InvalidArgumentError, match="timeout must be a positive number of seconds"):
            rpjrt.Plugin(path, timeout=bad)
    with pytest.raises(rpjrt.InvalidArgumentError, match=r"timeout must be at least 0\.000001 seconds"):
        rpjrt.Plugin(path, timeout=1e-9)
    with pytest.raises(TypeError, match="not bool"):
        rpjrt.Plugin(path, timeout=True)
    r = run_python(
        f"import rpjrt\ntry:\n    rpjrt.Plugin({path!r})\nexcept rpjrt.InvalidArgumentError as e:\n    print(e)",
        env={"RPJRT_PLUGIN_TIMEOUT": "-1"},
        timeout=60,
    )
    assert "RPJRT_PLUGIN_TIMEOUT must be a positive number of seconds, got -1.0" in r.stdout, r.stdout + r.stderr
