"""Training a flax.linen MLP with optax, run by ``tdf.jax.jit`` (``make example``).

The program is the flax documentation's train step: a ``TrainState`` with
``optax.adamw`` on a warmup-cosine learning-rate schedule, the loss and
accuracy of a classifier, one ``apply_gradients`` per batch. The state is
**donated** and compiled with ``strict=True``: every leaf of it (the
parameters, both Adam moments, the rank-0 ``step`` and optax ``count``) is
updated in the caller's own numpy buffer, or compilation fails.

The script trains on a synthetic dataset (Gaussian blobs, one per class)
with tdf and with ``jax.jit`` (state donated as well), checks that the
losses and the final parameters match, prints the time per step of both
(medians of interleaved rounds, side by side in this process) and what a
step allocates. It exits non-zero on any mismatch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import tdf.jax  # noqa: E402


class MLP(nn.Module):
    hidden: int = 128
    classes: int = 10

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.hidden)(x))
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(self.classes)(x)


def train_step(state, x, y):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, logits

    (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    state = state.apply_gradients(grads=grads)
    return state, {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, -1) == y)}


def create_state(hidden, features, classes, steps, seed=0):
    model = MLP(hidden=hidden, classes=classes)
    params = jax.jit(model.init)(jax.random.key(seed), jnp.ones((1, features)))["params"]
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=3e-3, warmup_steps=max(1, steps // 10),
        decay_steps=steps, end_value=3e-5)
    tx = optax.adamw(learning_rate=schedule, weight_decay=1e-4)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def dataset(batches, batch, features, classes, seed=0):
    """Gaussian blobs: class ``c`` around a random centre."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, features)).astype(np.float32) * 2
    data = []
    for _ in range(batches):
        y = rng.integers(0, classes, batch).astype(np.int32)
        x = centres[y] + rng.standard_normal((batch, features)).astype(np.float32)
        data.append((x, y))
    return data


def to_numpy(tree):
    """Writeable numpy copies (int64 leaves as int32, as JAX traces them)."""
    def convert(a):
        a = np.array(a)
        return a.astype(np.int32) if a.dtype == np.int64 else a
    return jax.tree_util.tree_map(convert, tree)


def train(step, state, data, to_host):
    losses, times = [], []
    for x, y in data:
        start = time.perf_counter()
        state, metrics = step(state, x, y)
        loss = to_host(metrics["loss"])
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
    return state, losses, times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=None,
                        help="tdf's threads (default: TDF_NUM_THREADS or the cores)")
    args = parser.parse_args(argv)

    initial = create_state(args.hidden, args.features, args.classes, args.steps)
    data = dataset(args.steps, args.batch, args.features, args.classes)

    threads = {} if args.threads is None else {"num_threads": args.threads}
    tdf_step = tdf.jax.jit(train_step, donate_argnums=0, strict=True, **threads)
    jax_step = jax.jit(train_step, donate_argnums=0)

    state = to_numpy(initial)
    buffers = jax.tree_util.tree_leaves(state)
    state, tdf_losses, _ = train(tdf_step, state, data, np.asarray)
    in_place = all(a is b for a, b in zip(jax.tree_util.tree_leaves(state), buffers))

    ref = jax.tree_util.tree_map(jnp.array, initial)
    ref, jax_losses, _ = train(jax_step, ref, data, lambda v: v.block_until_ready())

    losses_match = np.allclose(tdf_losses, jax_losses, rtol=1e-4, atol=1e-5)
    params_match = all(
        np.allclose(a, np.asarray(b), rtol=1e-3, atol=1e-5)
        for a, b in zip(jax.tree_util.tree_leaves(state.params),
                        jax.tree_util.tree_leaves(ref.params)))
    steps_match = int(state.step) == int(ref.step) == args.steps

    # Per-step time: medians of interleaved rounds, each a few steps from
    # fresh copies of the initial state.
    rounds_data = data[:min(len(data), 10)]
    samples: dict = {"tdf": [], "jax": []}
    for _ in range(args.rounds):
        _, _, t = train(tdf_step, to_numpy(initial), rounds_data, np.asarray)
        samples["tdf"].append(np.median(t[1:] or t))
        _, _, t = train(jax_step, jax.tree_util.tree_map(jnp.array, initial), rounds_data,
                        lambda v: v.block_until_ready())
        samples["jax"].append(np.median(t[1:] or t))
    tdf_time, jax_time = (float(np.median(samples[k])) for k in ("tdf", "jax"))

    # What one step allocates, counted by a second compilation that counts
    # (counting slows the calls down: the timing above is without it).
    counting = tdf.jax.jit(train_step, donate_argnums=0, strict=True, count_allocations=True,
                           **threads)
    probe = to_numpy(initial)
    program = counting.program(probe, *data[0])
    counting(probe, *data[0])
    program.reset_allocation_stats()
    counting(probe, *data[1 % len(data)])
    stats = program.allocation_stats()
    memory = program.memory_analysis()
    state_bytes = sum(a.nbytes for a in buffers)

    print(f"flax.linen MLP {args.features}-{args.hidden}-{args.hidden}-{args.classes}, "
          f"batch {args.batch}, {args.steps} steps, optax.adamw + warmup cosine; "
          f"TrainState donated ({len(buffers)} leaves, {state_bytes} B), strict=True")
    print(f"loss (tdf):     first {tdf_losses[0]:.6f} last {tdf_losses[-1]:.6f}")
    print(f"loss (jax.jit): first {jax_losses[0]:.6f} last {jax_losses[-1]:.6f}")
    worst = max(abs(a - b) for a, b in zip(tdf_losses, jax_losses))
    print(f"losses match jax.jit: {losses_match} (largest difference {worst:.2e}); "
          f"final parameters match: {params_match}")
    print(f"every TrainState leaf updated in place (same numpy buffers after "
          f"{args.steps} steps): {in_place}")
    print(f"time per step (median of {args.rounds} interleaved rounds): tdf "
          f"{tdf_time * 1e6:.0f} us, jax.jit donated {jax_time * 1e6:.0f} us "
          f"({tdf_time / jax_time:.2f}x)")
    print(f"allocated per step: {stats.bytes} B in {stats.calls} allocation(s); "
          f"memory analysis: {memory}")
    ok = losses_match and params_match and steps_match and in_place
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
