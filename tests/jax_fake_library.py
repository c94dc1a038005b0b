"""A stand-in for a library such as flax or optax, for
tests/test_jax_errors.py: the test registers this file as library code with
``tdf.jax.add_library_path`` and checks that errors raised for primitives
made here name both the user's line and the line here."""

import jax.numpy as jnp
from jax import lax


def dense(x, w):
    y = x @ w
    return lax.igamma(y, y)  # igamma: no translation in tdf.jax


def to_complex(x):
    return x.astype(jnp.complex64) * 2  # complex64: no dtype of tdf.jax


def layer(x):
    return to_complex(x + 1)
