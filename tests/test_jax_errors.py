"""Errors of ``tdf.jax.jit``: every error raised for a user's function is a
``tdf.TDFError`` naming the innermost primitive, its dtype and the user's
source line (the innermost frame outside library code), plus the library
line when the primitive was made in library code (tests/jax_fake_library.py
stands in for flax or optax)."""

from __future__ import annotations

import datetime
import importlib.util
import inspect
import sys

import jax
import jax.numpy as jnp
import jax_fake_library as fake
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax


def _line(fun, text):
    fun = getattr(fun, "fun", None) or inspect.unwrap(fun)  # custom_jvp, jax.jit
    lines, first = inspect.getsourcelines(fun)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in {fun.__name__}")


def _at(fun, text):
    return f"{__file__ if fun.__module__ == __name__ else inspect.getsourcefile(fun)}:" \
        f"{_line(fun, text)}:"


@pytest.fixture
def library():
    tdf.jax.add_library_path(fake)
    yield fake
    tdf.jax.remove_library_path(fake)


# ------------------------------------------------------------ nested jit


def test_unsupported_dtype_in_a_users_nested_jit_names_the_inner_primitive():
    @jax.jit
    def inner(x):
        return (x * 1j).real

    def fun(x):
        return inner(x) + 1

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError) as info:
        tdf.jax.jit(fun)(np.ones(3, np.float32))
    text = str(info.value)
    assert "(dtype complex64)" in text and "inside jit(inner)" in text
    assert "unsupported JAX primitive 'jit'" not in text
    assert "unsupported JAX primitive 'pjit'" not in text
    assert text.startswith(_at(inner, "(x * 1j).real")), text
    assert "float32[3]" in text  # the operand types


def test_library_function_in_nested_jit_names_the_inner_primitive():
    def fun(x):
        return jnp.abs(jnp.fft.fft(x))

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError,
                       match=r"\(dtype complex64\) inside jit\(fft\)") as info:
        tdf.jax.jit(fun)(np.ones(8, np.float32))
    assert str(info.value).startswith(_at(fun, "jnp.fft.fft"))


def test_custom_jvp_reports_the_primitive_inside():
    @jax.custom_jvp
    def f(x):
        return lax.igamma(x, x)

    f.defjvp(lambda p, t: (f(*p), t[0]))
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError,
                       match=r"unsupported JAX primitive 'igamma' inside custom_jvp_call") as info:
        tdf.jax.jit(lambda x: f(x) * 2)(np.ones(2, np.float32))
    assert str(info.value).startswith(_at(f, "lax.igamma"))


# ------------------------------------------------------------ library code


def test_error_in_library_code_names_the_user_line_and_the_library_line(library):
    def model(x, w):
        h = x * 2
        return fake.dense(h, w)

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match="'igamma'") as info:
        tdf.jax.jit(model)(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    text = str(info.value)
    assert text.startswith(_at(model, "fake.dense(h, w)")), text
    assert f"(in library code at {_at(fake.dense, 'lax.igamma')}" in text, text
    assert "float32[2,4]" in text


def test_unsupported_dtype_in_library_code_names_both_lines(library):
    def model(x):
        return fake.layer(x).real

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match=r"\(dtype complex64\)") as info:
        tdf.jax.jit(model)(np.ones(3, np.float32))
    text = str(info.value)
    assert text.startswith(_at(model, "fake.layer(x)")), text
    # the innermost library frame: the cast inside to_complex
    assert f"(in library code at {_at(fake.to_complex, 'astype')}" in text, text


def test_without_registration_the_library_line_is_the_users():
    def model(x, w):
        return fake.dense(x, w)

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError) as info:
        tdf.jax.jit(model)(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    assert str(info.value).startswith(_at(fake.dense, "lax.igamma"))
    assert "in library code" not in str(info.value)


def test_installed_packages_count_as_library_code(tmp_path):
    package = tmp_path / "site-packages" / "fakeflax"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from jax import lax\n"
        "def apply(x):\n"
        "    return lax.igamma(x, x)\n")
    spec = importlib.util.spec_from_file_location("fakeflax", package / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert tdf.jax.is_library_file(str(package / "__init__.py"))
    assert not tdf.jax.is_library_file(__file__)

    def model(x):
        return module.apply(x) + 1

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError) as info:
        tdf.jax.jit(model)(np.ones(2, np.float32))
    text = str(info.value)
    assert text.startswith(_at(model, "module.apply(x)")), text
    assert f"(in library code at {package / '__init__.py'}:3:" in text, text


# ------------------------------------------------------------ internal errors


def test_an_internal_error_of_a_rule_is_a_translation_error(monkeypatch):
    from tdf.jax._builder import RULES

    def broken(tr, eqn, args):
        raise TypeError("unexpected operand")

    monkeypatch.setitem(RULES, "sin", broken)

    def fun(x):
        return jnp.sin(x) + 1

    with pytest.raises(tdf.jax.TranslationError) as info:
        tdf.jax.jit(fun)(np.ones(3, np.float32))
    text = str(info.value)
    assert isinstance(info.value, tdf.jax.UnsupportedPrimitiveError)
    assert text.startswith(_at(fun, "jnp.sin(x)")), text
    assert "'sin'" in text and "float32[3]" in text and "TypeError: unexpected operand" in text
    assert isinstance(info.value.__cause__, TypeError)


# ------------------------------------------------------------ odd inputs


class _Opaque:
    pass


ODD_CALLS = [
    ("string leaf", lambda x: x, ("abc",)),
    ("object leaf", lambda x: x, (_Opaque(),)),
    ("bytes leaf", lambda x: x, (b"\x00\x01",)),
    ("object array", lambda x: x, (np.array([1, "a"], dtype=object),)),
    ("datetime array", lambda x: x, (np.array(["2024-01-01"], dtype="datetime64[D]"),)),
    ("date object", lambda x: x, (datetime.date(2024, 1, 1),)),
    ("huge python int", lambda x: x + 1, (2 ** 70,)),
    ("complex passthrough", lambda x: x, (np.ones(2, np.complex64),)),
    ("complex arithmetic", lambda x: x * 2, (np.ones(2, np.complex128),)),
    ("complex python scalar", lambda x, y: x * y, (np.ones(2, np.float32), 1j)),
    ("float8", lambda x: x + 1, (np.ones(2, jnp.float8_e4m3fn),)),
    ("too many arguments", lambda x: x, (np.ones(2), np.ones(2))),
    ("too few arguments", lambda x, y: x, (np.ones(2),)),
    ("unhashable static", None, None),
    ("dict with int keys", lambda d: d[1] * 2, ({1: np.ones(2, np.float32)},)),
    ("ragged nested lists", lambda xs: xs[0] + xs[1][0], ([np.float32(1), [np.float32(2)]],)),
    ("zero-size array", lambda x: jnp.sum(x, 0), (np.ones((0, 3), np.float32),)),
    ("non-contiguous", lambda x: x * 2, (np.ones((4, 4), np.float32)[:, ::2],)),
    ("fortran order", lambda x: x.T @ x, (np.asfortranarray(np.ones((3, 2), np.float32)),)),
    ("bool arithmetic", lambda x: x & ~x, (np.array([True, False]),)),
    ("debug callback", lambda x: (jax.debug.print("{}", x), x)[1], (np.ones(2, np.float32),)),
]


@pytest.mark.parametrize("name,fun,args", ODD_CALLS, ids=[c[0] for c in ODD_CALLS])
def test_odd_inputs_raise_tdf_errors_or_match_jax(name, fun, args):
    if name == "unhashable static":
        f = tdf.jax.jit(lambda x, n: x, static_argnums=1)
        call = lambda: f(np.ones(2), [1, 2])  # noqa: E731
    else:
        f = tdf.jax.jit(fun)
        call = lambda: f(*args)  # noqa: E731
    try:
        got = call()
    except tdf.TDFError as err:
        text = str(err)
        assert __file__ in text or "test_jax_errors.py" in text, text  # a located error
        return
    except Exception as err:  # anything else must come from jax.jit too
        with pytest.raises(type(err)):
            jax.jit(fun)(*args)
        assert "tdf" not in "".join(_frames(err)), (name, err)
        return
    want = jax.jit(fun)(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64))


def _frames(err):
    """The files of the frames that raised ``err`` below the test, as a
    check that a non-tdf error did not come from inside tdf."""
    import traceback
    files = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    innermost = files[-1] if files else ""
    return [innermost] if "/tdf/" in innermost.replace("\\", "/") else []


def test_argument_errors_are_type_and_value_errors_too():
    with pytest.raises(tdf.jax.ArgumentError) as info:
        tdf.jax.jit(3)
    assert isinstance(info.value, TypeError) and isinstance(info.value, tdf.TDFError)
    with pytest.raises(tdf.jax.ArgumentError) as info:
        tdf.jax.jit(lambda x: x, donate_argnums=(5,))(np.ones(2))
    assert isinstance(info.value, ValueError) and __file__ in str(info.value)


def test_library_paths_can_be_added_and_removed():
    path = fake.__file__
    assert not tdf.jax.is_library_file(path)
    tdf.jax.add_library_path(path)
    try:
        assert tdf.jax.is_library_file(path)
    finally:
        tdf.jax.remove_library_path(path)
    assert not tdf.jax.is_library_file(path)
    assert tdf.jax.is_library_file(jax.__file__) and tdf.jax.is_library_file(np.__file__)
    assert tdf.jax.is_library_file(sys.modules["inspect"].__file__)
