"""Fuzzing the input layer: whatever a user types, the config and data layers answer with a value or
one ConfigError, never another exception (which the CLI would show as a bug)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wb_core.config import InputOptions, MeasureSettings, SweepSpec, check_timeout, load_spec_file
from wb_core.data import check_npz_headers
from wb_core.errors import ConfigError

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=12))
flag_text = st.one_of(st.text(max_size=20), st.lists(st.sampled_from(["1", "2", "0", "-1", "auto", "nan", "inf", "1e9",
                                                                      "none", "0-1", "first1", "x", ""]),
                                                     max_size=5).map(",".join))
scalars = st.one_of(st.integers(-10**20, 10**20), st.floats(), st.text(max_size=8), st.booleans(), st.none())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
spec_keys = st.sampled_from(["threads", "batch_sizes", "cores", "rates", "backends", "hints", "onednn", "instances",
                             "cores_per_instance", "settings", "inputs", "allow_oversubscribe", "unknown"])
settings_keys = st.sampled_from(list(MeasureSettings.RANGES) + ["bogus"])
inputs_keys = st.sampled_from(["dynamic_size", "shapes", "int_range", "int_ranges", "bogus"])


def only_config_errors(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ConfigError as e:
        text = str(e)
        assert text.strip() and len(text) < 2000
        assert "Traceback" not in text


@FUZZ
@given(st.dictionaries(settings_keys, numbers, max_size=4))
def test_measure_settings(kw):
    only_config_errors(MeasureSettings.from_dict, kw)


@FUZZ
@given(numbers)
def test_timeouts(value):
    only_config_errors(check_timeout, value)


@FUZZ
@given(flag_text, flag_text, flag_text, flag_text)
def test_sweep_flags(batch, threads, cores, rate):
    only_config_errors(SweepSpec, batch_sizes=batch, threads=threads, cores=cores, rates=rate)


@FUZZ
@given(st.one_of(st.none(), st.integers(-5, 10**9)), st.lists(st.text(max_size=16), max_size=3),
       st.one_of(st.none(), flag_text))
def test_input_flags(dynamic, shapes, int_range):
    only_config_errors(InputOptions.parse, dynamic_size=dynamic, shapes=shapes, int_range=int_range)


@FUZZ
@given(st.dictionaries(inputs_keys, values, max_size=4))
def test_input_sections(d):
    only_config_errors(InputOptions.from_dict, d)


@FUZZ
@given(st.dictionaries(spec_keys, values, max_size=5), st.dictionaries(settings_keys, values, max_size=3))
def test_spec_files(tmp_path_factory, d, s):
    if "settings" in d:
        d["settings"] = s
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_text(yaml.safe_dump(d))
    only_config_errors(load_spec_file, path)


@FUZZ
@given(st.binary(max_size=300))
def test_spec_file_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_bytes(data)
    only_config_errors(load_spec_file, path)


def _npz(header: dict | bytes, body: bytes) -> bytes:
    buf = io.BytesIO()
    if isinstance(header, dict):
        np.lib.format.write_array_header_1_0(buf, header)
    else:
        buf.write(header)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("x.npy", buf.getvalue() + body)
    return out.getvalue()


headers = st.one_of(
    st.fixed_dictionaries({"descr": st.sampled_from(["<f4", "<i8", "|u1", "|O", "<c16", "|V4"]),
                           "fortran_order": st.booleans(),
                           "shape": st.lists(st.integers(0, 10**12), max_size=4).map(tuple)}),
    st.binary(max_size=80).map(lambda b: b"\x93NUMPY\x01\x00" + b))


@FUZZ
@given(headers, st.binary(max_size=64))
def test_numpy_headers(tmp_path_factory, header, body):
    path = tmp_path_factory.mktemp("npz") / "d.npz"
    path.write_bytes(_npz(header, body))
    only_config_errors(check_npz_headers, path)


@pytest.mark.parametrize("junk", [b"", b"PK\x03\x04" + b"\x00" * 30, b"\x93NUMPY"])
def test_junk_data_files(tmp_path, junk):
    path = tmp_path / "d.npz"
    path.write_bytes(junk)
    only_config_errors(check_npz_headers, path)
