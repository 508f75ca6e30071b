import pytest
from hypothesis import given
from hypothesis import strategies as st

from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec, format_cores, parse_cores, split_values
from wb_core.errors import ConfigError

CPUS = [0, 1, 2, 3]


def test_cores_forms():
    assert parse_cores("none", CPUS) is None
    assert parse_cores("0", CPUS) == (0,)
    assert parse_cores("0-2", CPUS) == (0, 1, 2)
    assert parse_cores("0+3", CPUS) == (0, 3)
    assert parse_cores("first2", CPUS) == (0, 1)
    assert parse_cores("all", CPUS) == (0, 1, 2, 3)


@pytest.mark.parametrize("bad", ["7", "0-9", "first9", "x", "3-1", "first0", "-1"])
def test_cores_errors_are_sentences(bad):
    with pytest.raises(ConfigError) as e:
        parse_cores(bad, CPUS)
    assert str(e.value).endswith(".") and "\n" not in str(e.value)


@given(st.sets(st.integers(0, 3), min_size=1))
def test_cores_roundtrip(ids):
    cores = tuple(sorted(ids))
    assert parse_cores(format_cores(cores), CPUS) == cores


@given(st.text(max_size=20))
def test_cores_never_crash(text):
    try:
        r = parse_cores(text, CPUS)
    except ConfigError:
        return
    assert r is None or set(r) <= set(CPUS)


def test_split_values_semicolon_keeps_commas():
    assert split_values("0,1") == ["0", "1"]
    assert split_values("0,1;2") == ["0,1", "2"]


@pytest.mark.parametrize("field,value", [("batch_sizes", "0"), ("batch_sizes", "-4"), ("threads", "0"),
                                         ("backends", "pytorch"), ("precisions", "fp8"), ("batch_sizes", "a")])
def test_bad_sweep_values(field, value):
    with pytest.raises(ConfigError):
        SweepSpec(**{field: value})


def test_expand_drops_settings_a_backend_lacks():
    spec = SweepSpec(backends="tensorflow,openvino", threads="1,2", batch_sizes="1,8", inter_op_threads="1,2",
                     streams="1,2", cores="none")
    cfgs = spec.expand()
    tf = [c for c in cfgs if c.backend == "tensorflow"]
    ov = [c for c in cfgs if c.backend == "openvino"]
    assert len(tf) == 2 * 2 * 2 and all(c.streams is None for c in tf)
    # 2 streams on 1 thread would run as 1 stream: left out, with a note
    assert len(ov) == 2 * 3 and all(c.inter_op_threads is None for c in ov)
    assert not any(c.streams == 2 and c.threads == 1 for c in ov)
    assert any("2 streams with 1 thread left out" in n for n in spec.notes)
    assert len({c.key for c in cfgs}) == len(cfgs)


def test_hint_excludes_streams():
    cfgs = SweepSpec(hints="latency,none", streams="2").expand()
    assert {(c.hint, c.streams) for c in cfgs} == {("latency", None), (None, 2)}


def test_key_is_stable_and_distinct():
    a = RunConfig(backend="openvino", batch_size=8, threads=2, cores=(0, 1))
    assert a.key == RunConfig.from_dict(a.to_dict()).key
    assert a.key != RunConfig(backend="openvino", batch_size=8, threads=2, cores=(0,)).key
    # The key must not change between releases: resume depends on it.
    assert RunConfig(backend="openvino").key == RunConfig(backend="openvino").key


@given(st.integers(-5, 5))
def test_measure_settings_reject_nonpositive(v):
    if v <= 0:
        with pytest.raises(ConfigError):
            MeasureSettings(max_time_s=v)
    else:
        assert MeasureSettings(max_time_s=v).max_time_s == v


def test_input_options_parse():
    o = InputOptions.parse(dynamic_size=128, shapes=["input_ids=1x128"], int_range="0:30522,mask=0:2")
    assert o.shapes["input_ids"] == (1, 128)
    assert o.int_range == (0, 30522) and o.int_ranges["mask"] == (0, 2)
    with pytest.raises(ConfigError):
        InputOptions.parse(int_range="5:1")
    with pytest.raises(ConfigError):
        InputOptions.parse(shapes=["x=1x0"])


@given(st.text(max_size=30))
def test_sweep_value_parsing_never_crashes(text):
    """Any text for a numeric sweep flag is either a clear ConfigError or valid positive values."""
    for field in ("threads", "batch_sizes", "streams", "concurrency"):
        try:
            spec = SweepSpec(**{field: text})
        except ConfigError as e:
            assert str(e).endswith(".")
            continue
        values = getattr(spec, field)
        assert values and all(v is None or (isinstance(v, int) and v >= 1) for v in values)


@given(st.lists(st.one_of(st.integers(-3, 70000), st.floats(allow_nan=True), st.text(max_size=5)), max_size=4))
def test_rates_and_instances_parse_or_refuse(values):
    try:
        spec = SweepSpec(rates=values)
    except ConfigError:
        return
    assert all(r is None or 0 < r < 1e7 for r in spec.rates)


def test_streams_come_with_as_many_requests_in_flight_unless_pinned():
    auto = SweepSpec(streams="auto,1,2", threads="2").expand()
    assert {(c.streams, c.concurrency) for c in auto} == {(None, 1), (1, 1), (2, 2)}
    pinned = SweepSpec(streams="2", threads="2", concurrency="1").expand()
    assert [(c.streams, c.concurrency) for c in pinned] == [(2, 1)]
    assert SweepSpec().expand()[0].concurrency == 1  # no streams: one request, key as before
    assert SweepSpec().expand()[0].key == RunConfig("openvino").key
