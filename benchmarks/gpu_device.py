"""GPU check and benchmark: tdf's GPU programs exported here as shared
libraries (``GPUProgram.export_library``), run on a machine with a GPU that
has JAX but neither MLIR's wheels nor tdf (``tdf/gpu_library.py`` loads
them; it needs only numpy).

Two steps::

    # here (tdf installed): compile, export, save inputs and expected results
    .venv/bin/python benchmarks/gpu_device.py export DIR [--tiny]
    # on the GPU machine, from the repository root (python with jax, numpy)
    python3 benchmarks/gpu_device.py run DIR [--reps 7] [--out FILE]

Programs:

- the GPU tests' MLIR programs (``tests/test_gpu.py``,
  ``tests/test_gpu_cublas.py``: an in-place add chain on a donated buffer,
  a KV-cache row update, a concatenation written in place, a decode loop,
  ``x @ w + bias`` and a bf16 ``q @ k^T`` through cuBLAS, an f64
  batch_matmul accumulating into a donated argument). Expected: the same
  program compiled by ``tdf.compile`` for the CPU, same inputs;
- JAX programs (``jax.jit`` on the GPU is the oracle and the time anchor):
  GEMMs (f32 ``x @ w``, ``x @ w.T``, bf16 batched ``q @ k^T``), an MLP
  forward pass, the GPT-2 prefill and decode step (KV caches donated, the
  position read on the host), MLP train step, Adam update, RNN scan and
  sparse embedding update of ``models.py``; some also with other options (:data:`VARIANTS`:
  ``<name>_kernels`` without cuBLAS, ``<name>_nopool`` without tdf's
  device pool). Expected: ``jax.jit`` on this machine's CPU, and, on the
  GPU machine, ``jax.jit`` there (matmul precision ``highest``: f32 GEMMs
  in f32, as cuBLAS runs tdf's, not TF32).

``run`` checks every result (and that non-donated inputs are unchanged),
then times each JAX program side by side in interleaved rounds
(``harness.time_variants``): the exported library called with numpy arrays
(host in, host out: its transfers included), ``jax.jit`` called with numpy
arrays and its results fetched to numpy (the same work), and ``jax.jit``
on arrays already on the device (no transfers). Ratios are
tdf / ``jax.jit`` (numpy in and out).

The export step copies what the library needs besides ``libcuda.so.1``:
``libmlir_cuda_runtime.so`` and ``libtdf_gpu_runtime.so``. MLIR's CUDA
runtime names ``libLLVM.so`` (136 MB) as needed but imports no symbol from
it (the export step checks its undefined symbols); an empty library of that
name stands in for it in ``DIR/lib``, so that DIR fits the GPU machine's
file transfer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


# ------------------------------------------------------------ JAX programs

#: Programs also exported with other options, as ``<name><suffix>``:
#: ``_kernels`` with ``blas=False`` (every contraction an MLIR kernel:
#: cuBLAS against tdf's own GEMM kernels), ``_nopool`` with ``pool=False``
#: (a ``cuMemAlloc``/``cuMemFree`` per buffer and call: MLIR's runtime
#: against tdf's stream-ordered pool).
VARIANTS = {
    "_kernels": ({"blas": False}, ("mlp_forward", "x_wT_128x4096", "x_wT_16x512")),
    "_nopool": ({"pool": False}, ("gemm_f32_1024", "gemm_f32_256", "gpt2_prefill", "adam",
                                  "rnn_scan")),
}


def _jax_programs(tiny: bool) -> dict:
    """name -> (function, arguments, donated argument numbers, tolerance)."""
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import models

    rng = np.random.default_rng(7)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32) / np.float32(np.sqrt(shape[-1]))

    n = 256 if tiny else 1024
    rows = 16 if tiny else 128
    wide = 512 if tiny else 4096
    programs = {
        f"gemm_f32_{n}": (lambda x, w: x @ w, (f32(n, n), f32(n, n)), (), 1e-4),
        f"x_wT_{rows}x{wide}": (lambda x, w: x @ w.T, (f32(rows, 512), f32(wide, 512)), (), 1e-4),
        "bf16_scores": (lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k,
                                                  preferred_element_type=jnp.float32),
                        (f32(8, 128, 64).astype(ml_dtypes.bfloat16),
                         f32(8, 256, 64).astype(ml_dtypes.bfloat16)), (), 1e-3),
    }

    def mlp(x, w1, b1, w2, b2):
        return jax.nn.gelu(x @ w1 + b1) @ w2 + b2

    d = 128 if tiny else 1024
    programs["mlp_forward"] = (mlp, (f32(rows, d), f32(d, 4 * d), f32(4 * d), f32(4 * d, d),
                                     f32(d)), (), 1e-3)
    c = models._gpt2_config(tiny)
    tokens = (np.arange(c["seq"]) * 7 % c["vocab"]).astype(np.int32)
    programs["gpt2_prefill"] = (models.make_gpt2_prefill(c), (models._gpt2_params(c), tokens),
                                (), 2e-3)
    size = 1 << (12 if tiny else 18)
    tree = {"w1": rng.standard_normal((size,)).astype(np.float32),
            "w2": rng.standard_normal((size // 4, 4)).astype(np.float32)}
    grads = jax.tree_util.tree_map(lambda a: (a * 0.01).astype(np.float32), tree)
    zeros = jax.tree_util.tree_map(np.zeros_like, tree)
    programs["adam"] = (models.adam, (tree, grads, zeros, zeros), (0, 2, 3), 1e-4)
    rnn, rp, xs, h0 = models.make_rnn(*((32, 16, 4, 16) if tiny else (256, 128, 16, 64)))
    programs["rnn_scan"] = (rnn, (rp, xs, h0), (), 1e-4)
    # A decode step over donated KV caches (random, so that attention reads
    # something), the position a scalar the host reads.
    cache = (c["layers"], c["heads"], c["seq"], c["dim"] // c["heads"])
    programs["gpt2_decode"] = (models.make_gpt2_decode(c),
                               (models._gpt2_params(c), f32(*cache), f32(*cache), np.int32(3),
                                np.int32(5)), (1, 2), 1e-4)
    step, params = models.make_mlp_train([64, 64, 10] if tiny else [784, 512, 512, 10])
    batch = 16 if tiny else 128
    x = rng.standard_normal((batch, 64 if tiny else 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    programs["mlp_train"] = (step, (params, x, y), (0,), 1e-4)
    # A sparse embedding update (the table donated): the host loops over the
    # indices (read once, tdf-gpu-host-scalars), one row kernel each.
    vocab, k = (1000, 32) if tiny else (8192, 512)
    programs["embed_update"] = (models.embed_update,
                                (rng.standard_normal((vocab, 128)).astype(np.float32),
                                 rng.integers(0, vocab, k).astype(np.int32),
                                 rng.standard_normal((k, 128)).astype(np.float32)), (0,), 1e-5)
    return programs


def _leaves(tree) -> list:
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


# ------------------------------------------------------------ MLIR programs


def _mlir_programs() -> dict:
    """name -> (MLIR text, function, arguments (numpy arrays and Python
    ints), donated argument numbers, tolerance)."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import ml_dtypes
    from test_gpu import CHAIN, CONCAT, DECODE_LOOP, KV
    from test_gpu_cublas import ATTENTION, BATCHED, DENSE

    rng = np.random.default_rng(3)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return {
        "chain": (CHAIN, "chain", (f32(64, 128), f32(64, 128)), (0,), 1e-6),
        "kv_update": (KV, "step", (f32(4, 16, 64), f32(4, 1, 64), 5), (0,), 0.0),
        "concat": (CONCAT, "concat", (f32(4, 64), f32(4, 64)), (), 1e-5),
        "decode_loop": (DECODE_LOOP, "decode", (f32(4, 16, 64), f32(4, 16, 64), 9), (0,), 0.0),
        "dense": (DENSE, "dense", (f32(64, 32), f32(32, 48), f32(64, 48)), (), 1e-5),
        "bf16_q_kT": (ATTENTION, "scores", (f32(4, 16, 32).astype(ml_dtypes.bfloat16),
                                           f32(4, 24, 32).astype(ml_dtypes.bfloat16)), (), 1e-4),
        "f64_bmm_acc": (BATCHED, "bmm", (rng.standard_normal((3, 8, 5)),
                                         rng.standard_normal((3, 5, 7)),
                                         rng.standard_normal((3, 8, 7))), (2,), 1e-12),
    }


# ------------------------------------------------------------------ export


def _digest(arrays) -> str:
    import hashlib

    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _stub_llvm(lib_dir: str) -> None:
    """An empty ``libLLVM.so`` for MLIR's CUDA runtime, after checking that
    the runtime imports nothing from LLVM (see the module docstring)."""
    from tdf.jit_symbols import mlir_lib

    runtime = mlir_lib("libmlir_cuda_runtime.so")
    nm = os.path.join(os.path.dirname(os.path.dirname(runtime)), "..", "llvm", "bin", "llvm-nm")
    undefined = subprocess.run([nm, "-D", "--undefined-only", "--format=just-symbols", runtime],
                               capture_output=True, text=True, check=True).stdout.split()
    llvm = [s for s in undefined if "llvm" in s.lower()]
    if llvm:
        raise SystemExit(f"libmlir_cuda_runtime.so imports LLVM symbols ({llvm[:3]}): "
                         f"copy libLLVM.so instead of a stub")
    empty = os.path.join(lib_dir, "empty.c")
    with open(empty, "w") as f:
        f.write("/* stands in for libLLVM.so: see benchmarks/gpu_device.py */\n")
    subprocess.run(["cc", "-shared", "-Wl,-soname,libLLVM.so", "-o",
                    os.path.join(lib_dir, "libLLVM.so"), empty], check=True)
    os.remove(empty)


def export(out_dir: str, tiny: bool) -> int:
    import jax

    import tdf
    import tdf.jax
    from tdf import _tdf, gpu
    from tdf.jit_symbols import mlir_lib

    jax.config.update("jax_platforms", "cpu")
    lib_dir = os.path.join(out_dir, "lib")
    os.makedirs(lib_dir, exist_ok=True)
    shutil.copy(mlir_lib("libmlir_cuda_runtime.so"), lib_dir)
    shutil.copy(os.path.join(os.path.dirname(_tdf.__file__), "libtdf_gpu_runtime.so"), lib_dir)
    _stub_llvm(lib_dir)
    index = []

    def save(name, program, function, args, donate, tol, expected, kind):
        start = time.perf_counter()
        manifest = program.export_library(os.path.join(out_dir, f"lib{name}.so"))
        # A JAX program's inputs are made again there (same seeds), checked
        # by their digest: the weights would not fit the transfer.
        saved = {} if kind == "jax" else {f"arg{i}": np.asarray(a) for i, a in enumerate(args)}
        np.savez(os.path.join(out_dir, f"{name}.npz"), **saved,
                 **{f"expected{i}": np.asarray(e) for i, e in enumerate(expected)})
        report = program.report()
        index.append({"name": name, "kind": kind, "function": function, "donate": list(donate),
                      "digest": _digest(args),
                      "tolerance": tol, "arguments": len(args), "results": len(expected),
                      "kernels": report.kernels, "cublas_calls": report.cublas_calls,
                      "compile_seconds": round(sum(report.compile_seconds.values()), 3)})
        print(f"exported {name}: {report.kernels} kernel launches, {report.cublas_calls} cuBLAS "
              f"calls, {len(manifest['functions'][function]['results'])} results, "
              f"export {time.perf_counter() - start:.2f} s", flush=True)

    for name, (text, function, args, donate, tol) in _mlir_programs().items():
        program = gpu.compile_nvvm(text, blas=True, filename=f"{name}.mlir")
        cpu = tdf.compile(text)
        out = getattr(cpu, function)(*_copy(args))
        save(name, program, function, args, donate, tol,
             list(out) if isinstance(out, tuple) else [out], "mlir")

    for name, (fn, args, donate, tol) in _jax_programs(tiny).items():
        lowered = tdf.jax.jit(fn, donate_argnums=donate).lower(*args)
        expected = _leaves(jax.jit(fn)(*args))
        flat = _leaves(args)
        flat_donate = []
        position = 0
        for i, a in enumerate(args):
            count = len(_leaves(a))
            if i in donate:
                flat_donate += list(range(position, position + count))
            position += count
        variants = [("", {})] + [(suffix, options) for suffix, (options, names)
                                 in VARIANTS.items() if name in names]
        for suffix, options in variants:
            program = gpu.compile_nvvm(lowered.as_text(), **{"blas": True, **options},
                                       filename=f"{name}.mlir")
            (function,) = program.functions()
            save(name + suffix, program, function, flat, flat_donate, tol, expected, "jax")
    with open(os.path.join(out_dir, "programs.json"), "w") as f:
        json.dump({"tiny": tiny, "programs": index}, f, indent=1)
    return 0


# --------------------------------------------------------------------- run


def run(out_dir: str, reps: int, out_file: str | None) -> int:
    import importlib.util

    import harness as H
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")
    spec = importlib.util.spec_from_file_location(
        "gpu_library", os.path.join(ROOT, "python", "tdf", "gpu_library.py"))
    gpu_library = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_library)
    with open(os.path.join(out_dir, "programs.json")) as f:
        index = json.load(f)
    jax_programs = _jax_programs(index["tiny"])
    lib_dir = os.path.join(out_dir, "lib")
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}", flush=True)
    rows, failures = [], 0
    for entry in index["programs"]:
        name = entry["name"]
        data = np.load(os.path.join(out_dir, f"{name}.npz"))
        base = next((name[:-len(suffix)] for suffix in VARIANTS if name.endswith(suffix)), name)
        if entry["kind"] == "jax":
            args = _leaves(jax_programs[base][1])
        else:
            args = [data[f"arg{i}"] for i in range(entry["arguments"])]
            args = [a.item() if a.ndim == 0 and a.dtype == np.int64 else a for a in args]
        expected = [data[f"expected{i}"] for i in range(entry["results"])]
        row = dict(entry)
        try:
            if entry["kind"] == "jax" and _digest(args) != entry["digest"]:
                raise RuntimeError("the inputs made here differ from the exported ones "
                                   "(another numpy?)")
            start = time.perf_counter()
            library = gpu_library.load_library(os.path.join(out_dir, f"lib{name}.so"),
                                               search_dirs=[lib_dir])
            row["load_seconds"] = time.perf_counter() - start
            call = getattr(library, entry["function"])
            # np.savez keeps bf16 arrays as raw 2-byte records: view them again.
            specs = library.manifest["functions"][entry["function"]]["arguments"]
            args = [a.view(gpu_library._dtype("bf16")) if spec.get("element") == "bf16"
                    and a.dtype.kind == "V" else a for a, spec in zip(args, specs)]
            inputs = _copy(args)
            out = call(*inputs)
            outs = list(out) if isinstance(out, tuple) else [out]
            # Results that are a donated argument, updated in place.
            row["in_place_results"] = sum(any(o is inputs[i] for i in entry["donate"])
                                          for o in outs)
            worst = 0.0
            for got, want in zip(outs, expected):
                got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
                err = np.max(np.abs(got64 - want64) / (np.abs(want64) + 1.0)) if got64.size else 0.0
                worst = max(worst, float(err))
            row["max_error"] = worst
            ok = worst <= entry["tolerance"]
            for i, (before, after) in enumerate(zip(args, inputs)):
                if i not in entry["donate"] and isinstance(before, np.ndarray) \
                        and not np.array_equal(before, after):
                    ok = False
                    row["changed_input"] = i
            if entry["kind"] == "jax":
                fn, jargs, _, _ = jax_programs[base]
                jitted = jax.jit(fn)
                oracle = _leaves(jitted(*jargs))
                row["max_error_vs_gpu_jax"] = max(
                    float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))
                                 / (np.abs(np.asarray(w, np.float64)) + 1.0)))
                    for g, w in zip(outs, oracle))
                ok = ok and row["max_error_vs_gpu_jax"] <= entry["tolerance"]
                on_device = jax.device_put(jargs)
                state = {"tdf": _copy(args)}

                def run_tdf(state=state, call=call):
                    call(*state["tdf"])

                def run_jax_numpy(jitted=jitted, jargs=jargs):
                    _leaves(jitted(*jargs))

                def run_jax_device(jitted=jitted, on_device=on_device):
                    jax.block_until_ready(jitted(*on_device))

                timing = H.time_variants({"tdf": run_tdf, "jax_numpy": run_jax_numpy,
                                          "jax_device": run_jax_device}, reps=reps)
                row["seconds"] = {k: t["median"] for k, t in timing.items()}
                row["tdf_over_jax"] = H.ratio(timing["tdf"]["median"],
                                              timing["jax_numpy"]["median"])
                row["tdf_over_jax_device"] = H.ratio(timing["tdf"]["median"],
                                                     timing["jax_device"]["median"])
            row["ok"] = bool(ok)
        except Exception as err:  # report every program, then fail
            row["ok"] = False
            row["error"] = f"{type(err).__name__}: {err}"
        failures += not row["ok"]
        rows.append(row)
        extra = ""
        if "seconds" in row:
            s = row["seconds"]
            extra = (f"; tdf {s['tdf'] * 1e3:.3f} ms, jax.jit numpy {s['jax_numpy'] * 1e3:.3f} ms, "
                     f"on device {s['jax_device'] * 1e3:.3f} ms, tdf/jax {row['tdf_over_jax']:.2f}")
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {name}: max error {row.get('max_error')}, "
              f"{row.get('in_place_results', 0)} results in place"
              f"{' ' + row['error'] if 'error' in row else ''}{extra}", flush=True)
    if out_file:
        with open(out_file, "w") as f:
            json.dump({"device": jax.devices()[0].device_kind, "rows": rows}, f, indent=1)
    print(f"{failures} failures")
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="compile and export the programs (here)")
    ex.add_argument("dir")
    ex.add_argument("--tiny", action="store_true", help="small sizes (a smoke test)")
    rn = sub.add_parser("run", help="check and time the exported programs (on the GPU machine)")
    rn.add_argument("dir")
    rn.add_argument("--reps", type=int, default=7)
    rn.add_argument("--out", default=None, help="write the rows as JSON")
    args = parser.parse_args(argv)
    if args.command == "export":
        return export(args.dir, args.tiny)
    return run(args.dir, args.reps, args.out)


if __name__ == "__main__":
    sys.exit(main())
