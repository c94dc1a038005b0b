"""The differential corpus: tdf programs with a JAX reference each.

Every module here defines ``PROGRAM`` (a :class:`tdf.oracle.OracleProgram`);
``PROGRAMS`` lists them in :data:`NAMES` order. ``tests/test_oracle.py`` runs
each one with the in-place rewrite on and off and compares with ``jax.jit``.
"""

from importlib import import_module

NAMES = [
    "ew_chain",
    "add_zz",
    "mixed_results",
    "matmul",
    "kv_row_update",
    "kv_decode_loop",
    "embedding_update",
    "seed_concat",
    "log_concat",
    "concat_parts",
    "opaque_call",
    "views_alias",
    "loop_fresh_accumulator",
    "branch_use",
    "slice_of_donated",
    "kv_row_kernel",
]

PROGRAMS = [import_module(f"{__name__}.{name}").PROGRAM for name in NAMES]
