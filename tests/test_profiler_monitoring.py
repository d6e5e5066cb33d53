"""jax.profiler (traces written by jaxlib's profiler, memory profiles) and jax.monitoring."""
from __future__ import annotations

import logging
import os
import re

import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import monitoring, profiler


def test_trace_writes_an_xprof_trace(tmp_path):
    with profiler.trace(str(tmp_path)):
        with profiler.TraceAnnotation("annotated"):
            jaxkit.jit(lambda x: x * 2)(jnp.ones(3)).block_until_ready()
        profiler.annotate_function(lambda: 1, name="f")()
        with profiler.StepTraceAnnotation("train", step_num=1):
            pass
    written = [f for _, _, fs in os.walk(tmp_path) for f in fs]
    assert any(f.endswith(".xplane.pb") for f in written), written
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()


def test_start_trace_twice_is_an_error(tmp_path):
    profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            profiler.start_trace(str(tmp_path))
    finally:
        profiler.stop_trace()


def test_device_memory_profile(tmp_path):
    x = jnp.ones(1000)
    data = profiler.device_memory_profile()
    assert isinstance(data, bytes) and b"cpu:0" in data  # a pprof protobuf naming the device
    path = tmp_path / "mem.prof"
    profiler.save_device_memory_profile(str(path))
    assert path.stat().st_size > 0
    del x


def test_monitoring_listeners():
    seen = []
    listeners = [lambda e, **kw: seen.append(("event", e, kw)),
                 lambda e, d, **kw: seen.append(("duration", e, d)),
                 lambda e, s, t, **kw: seen.append(("span", e, t - s)),
                 lambda e, v, **kw: seen.append(("scalar", e, v))]
    registers = [monitoring.register_event_listener,
                 monitoring.register_event_duration_secs_listener,
                 monitoring.register_event_time_span_listener,
                 monitoring.register_scalar_listener]
    for register, listener in zip(registers, listeners):
        register(listener)
    monitoring.record_event("e", tag="t")
    monitoring.record_event_duration_secs("d", 1.5)
    monitoring.record_event_time_span("s", 1.0, 3.0)
    monitoring.record_scalar("v", 7)
    assert seen == [("event", "e", {"tag": "t"}), ("duration", "d", 1.5), ("span", "s", 2.0),
                    ("scalar", "v", 7)]
    monitoring.unregister_event_listener(listeners[0])
    with pytest.raises(AssertionError):
        monitoring.unregister_event_listener(listeners[0])
    monitoring.clear_event_listeners()
    monitoring.record_scalar("v", 8)
    assert len(seen) == 4


def _compile_records(lib, numpy, caplog) -> list[str]:
    """The "jax" log records of one new jit function's first and second calls, with
    log_compiles on, times scrubbed."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="jax"), lib.log_compiles():
        f = lib.jit(lambda x: x * 3.0 + 1.0)
        x = numpy.ones(5)
        f(x)
        caplog.clear()  # forget the compiles of the eager ones() above
        f = lib.jit(lambda x: x * 2.0 - 1.0)
        f(x)
        f(x)
    return [(r.name, r.levelname, re.sub(r"[0-9.]+ sec", "T sec", r.getMessage()))
            for r in caplog.records]


def test_log_compiles_logs_as_jax_does(caplog):
    # One trace, one lowering, one compilation for two calls, at WARNING on JAX's logger names
    # (code that counts "Finished ... compilation" records to catch recompiles relies on them).
    jax = pytest.importorskip("jax")
    ours = _compile_records(jaxkit, jnp, caplog)
    theirs = _compile_records(jax, jax.numpy, caplog)
    finished = [m for _, _, m in ours if re.search("Finished .* compilation", m)]
    assert finished == ["Finished XLA compilation of jit(<lambda>) in T sec"]
    assert [(n, lv) for n, lv, _ in ours] == [(n, lv) for n, lv, _ in theirs]
    assert [m.split(" with ")[0] for _, _, m in ours] == [
        m.split(" with ")[0] for _, _, m in theirs]
    assert jaxkit.log_compiles.value is False
    with caplog.at_level(logging.DEBUG, logger="jax"):
        caplog.clear()
        jaxkit.jit(lambda x: x - 4.0)(jnp.ones(5))
    assert caplog.records and {r.levelname for r in caplog.records} == {"DEBUG"}


def test_unsupported_flag_values_raise():
    with pytest.raises(NotImplementedError, match="jax_debug_infs"):
        with jaxkit.debug_infs(True):
            pass
    assert jaxkit.debug_infs.value is False
    live = jaxkit.live_arrays()
    x = jnp.arange(7.)
    assert any(a is x for a in jaxkit.live_arrays()) and len(jaxkit.live_arrays()) > len(live) - 1
    jaxkit.clear_caches()
