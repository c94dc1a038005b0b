"""flax and optax programs, written the way their documentation writes them,
run by ``tdf.jax.jit`` and by ``jax.jit`` and compared (floats to a tight
tolerance, integers and random bits exactly). Donated state (a
``TrainState``, an optax state, a decode cache, nnx RNG counters) is
compiled with ``strict=True``, so a donated leaf whose update is not made in
its own buffer fails the test, and every updated leaf is checked to *be* the
caller's array; non-donated inputs are checked unchanged."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from flax.training import train_state

import tdf.jax

leaves = jax.tree_util.tree_leaves
tree_map = jax.tree_util.tree_map


def _is_key(a) -> bool:
    return jax.dtypes.issubdtype(getattr(a, "dtype", None), jax.dtypes.prng_key)


def to_numpy(tree):
    """Writeable numpy copies of every leaf (64-bit integers as int32, as
    JAX traces them; typed PRNG keys stay keys)."""
    def convert(a):
        if _is_key(a):
            return a
        a = np.array(a)
        return a.astype(np.int32) if a.dtype == np.int64 else a
    return tree_map(convert, tree)


def _raw(a):
    return np.asarray(jax.random.key_data(a) if _is_key(a) else a)


def assert_trees_match(ours, theirs, rtol=1e-5, atol=1e-6):
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(leaves(ours), leaves(theirs)):
        a, b = _raw(a), _raw(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(a, b)


def assert_same_buffers(out, before):
    """Every leaf of ``out`` is the caller's array of ``before`` (updated in
    its own buffer)."""
    moved = [i for i, (a, b) in enumerate(zip(leaves(out), leaves(before))) if a is not b]
    assert not moved, f"leaves {moved} of {len(leaves(before))} not returned in place"


def assert_unchanged(now, kept):
    for a, b in zip(leaves(now), leaves(kept)):
        np.testing.assert_array_equal(_raw(a), _raw(b), err_msg="a non-donated input changed")


def run_train_steps(train_step, initial, batches, rtol=1e-5, atol=1e-6):
    """``train_step(state, x, y) -> (state, metrics)`` for each batch from
    ``initial``, the state donated (strict) and fed back; compared with
    jax.jit after every step. Returns the final state."""
    step = tdf.jax.jit(train_step, donate_argnums=0, strict=True)
    ref_step = jax.jit(train_step)
    state = to_numpy(initial)
    buffers = leaves(state)
    ref = initial
    for x, y in batches:
        kept = to_numpy((x, y))
        state, metrics = step(state, x, y)
        ref, ref_metrics = ref_step(ref, x, y)
        assert_trees_match(metrics, ref_metrics, rtol, atol)
        assert_trees_match(state, ref, rtol, atol)
        assert_unchanged((x, y), kept)
    assert all(a is b for a, b in zip(leaves(state), buffers)), "state not updated in place"
    return state


def init_params(model, example, seed=0):
    """``model.init(key, example)["params"]`` in shape, filled from numpy
    (scaled normals, zero biases): flax's initializers compiled by XLA take
    most of this file's time otherwise, and the programs under test are the
    steps, not the initialization."""
    shapes = jax.eval_shape(model.init, jax.random.key(seed), example)["params"]
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        name = jax.tree_util.keystr(path[-1:])
        if "bias" in name:
            return np.zeros(leaf.shape, leaf.dtype)
        if "scale" in name:
            return np.ones(leaf.shape, leaf.dtype)
        fan_in = int(np.prod(leaf.shape[:-1])) or 1
        return (rng.standard_normal(leaf.shape) / np.sqrt(fan_in)).astype(leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


def _classification_batches(shape, classes, count, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape).astype(np.float32),
             rng.integers(0, classes, shape[0]).astype(np.int32)) for _ in range(count)]


# ------------------------------------------------- linen MLP, adamw + schedule


class MLP(nn.Module):
    features: tuple = (32, 32)
    classes: int = 10

    @nn.compact
    def __call__(self, x):
        for width in self.features:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.classes)(x)


def classifier_train_step(state, x, y):
    """The flax docs' train step: loss and accuracy, one optimizer step."""
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, logits

    (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    state = state.apply_gradients(grads=grads)
    return state, {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, -1) == y)}


def make_mlp_state(batch=16, features=20):
    model = MLP()
    params = init_params(model, jnp.ones((batch, features)))
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=1e-2, warmup_steps=2, decay_steps=10, end_value=1e-4)
    tx = optax.adamw(learning_rate=schedule, weight_decay=1e-4)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def test_linen_mlp_adamw_schedule_train_state_donated():
    batches = _classification_batches((16, 20), 10, 4)
    state = run_train_steps(classifier_train_step, make_mlp_state(), batches)
    # rank-0 step and optax counts are among the in-place leaves
    assert int(state.step) == 4 and state.step.dtype == np.int32
    counts = [a for a in leaves(state.opt_state) if a.ndim == 0]
    assert counts and all(int(c) == 4 for c in counts)


# ------------------------------------------------------------------ linen CNN


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(features=8, kernel_size=(3, 3))(x))
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(features=16, kernel_size=(3, 3))(x))
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(features=32)(x))
        return nn.Dense(features=10)(x)


def make_cnn_state(batch=8, size=12):
    model = CNN()
    params = init_params(model, jnp.ones((batch, size, size, 1)), seed=1)
    tx = optax.sgd(learning_rate=0.05, momentum=0.9)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def test_linen_cnn_sgd_momentum_train_state_donated():
    """Conv/avg_pool/max_pool/Dense; the momentum trace of every bias is
    updated in place too (it is computed in a reshaped view)."""
    batches = _classification_batches((8, 12, 12, 1), 10, 3, seed=1)
    state = run_train_steps(classifier_train_step, make_cnn_state(), batches,
                            rtol=2e-5, atol=2e-6)
    assert int(state.step) == 3


# ---------------------------------------------- optax.chain over a params dict


def make_chain_problem(seed=2):
    rng = np.random.default_rng(seed)
    params = {"w": rng.standard_normal((6, 4)).astype(np.float32),
              "b": rng.standard_normal(4).astype(np.float32)}
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate=1e-3))
    return params, tx


def test_optax_chain_clip_adam_opt_state_donated():
    params, tx = make_chain_problem()

    def update(params, opt_state, grads):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    rng = np.random.default_rng(3)
    step = tdf.jax.jit(update, donate_argnums=(0, 1), strict=True)
    ref_step = jax.jit(update)
    state = to_numpy((params, tx.init(params)))
    ref = to_numpy(state)
    buffers = leaves(state)
    for _ in range(3):
        grads = tree_map(lambda p: (3 * rng.standard_normal(p.shape)).astype(np.float32),
                         params)
        kept = to_numpy(grads)
        state = step(*state, grads)
        ref = ref_step(*ref, grads)
        assert_trees_match(state, ref, rtol=1e-6, atol=1e-7)
        assert_unchanged(grads, kept)
    assert_same_buffers(state, buffers)
    assert int(state[1][1][0].count) == 3


# ---------------------------------------------- nnx encoder block with dropout


class EncoderBlock(nnx.Module):
    def __init__(self, dim, heads, hidden, rate, rngs):
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(num_heads=heads, in_features=dim,
                                                decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
        self.linear1 = nnx.Linear(dim, hidden, rngs=rngs)
        self.linear2 = nnx.Linear(hidden, dim, rngs=rngs)
        self.dropout = nnx.Dropout(rate, rngs=rngs)

    def __call__(self, x):
        x = x + self.dropout(self.attention(self.norm1(x)))
        return x + self.dropout(self.linear2(nnx.gelu(self.linear1(self.norm2(x)))))


def make_encoder(rate=0.25):
    model = EncoderBlock(16, 2, 32, rate, nnx.Rngs(params=0, dropout=1))
    return nnx.split(model, nnx.Param, nnx.RngState)


def encoder_forward(graphdef):
    """A pure function of the split state (no nnx.jit): merge, run in
    training mode, split the advanced RNG state back out. Also returns the
    dropout mask of one more draw (its bits show the random stream)."""
    def forward(params, rng_state, x):
        model = nnx.merge(graphdef, params, rng_state)
        model.train()
        y = model(x)
        mask = model.dropout(jnp.ones_like(x)) != 0
        _, _, rng_state = nnx.split(model, nnx.Param, nnx.RngState)
        return y, mask, rng_state

    return forward


def test_nnx_encoder_block_dropout_training_mode():
    graphdef, params, rng_state = make_encoder()
    forward = encoder_forward(graphdef)
    x = np.random.default_rng(4).standard_normal((2, 5, 16)).astype(np.float32)
    step = tdf.jax.jit(forward, donate_argnums=1, strict=True)
    ref_step = jax.jit(forward)
    ours_params, ours_rng = to_numpy(params), to_numpy(rng_state)
    ref_rng = rng_state
    kept = to_numpy((params, x))
    counts = [a for a in leaves(ours_rng) if not _is_key(a)]
    masks = []
    for _ in range(2):
        y, mask, ours_rng = step(ours_params, ours_rng, x)
        ref_y, ref_mask, ref_rng = ref_step(params, ref_rng, x)
        np.testing.assert_allclose(y, np.asarray(ref_y), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(mask, np.asarray(ref_mask))
        assert_trees_match(ours_rng, ref_rng)
        masks.append(mask)
    assert_unchanged((ours_params, x), kept)
    # dropout is active, draws differ per call, the rate is about right
    assert 0.5 < masks[0].mean() < 0.95 and not np.array_equal(masks[0], masks[1])
    # the counters (uint32, rank 0) are advanced in their own buffers
    now = [a for a in leaves(ours_rng) if not _is_key(a)]
    assert counts and all(a is b for a, b in zip(now, counts))
    assert all(c.dtype == np.uint32 and c.ndim == 0 for c in now)


# ------------------------------------------ linen decode loop with the cache


class Decoder(nn.Module):
    vocab: int = 16
    dim: int = 16
    heads: int = 2
    decode: bool = False

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab, self.dim)(tokens)
        mask = None if self.decode else nn.make_causal_mask(tokens)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads, decode=self.decode)(
            nn.LayerNorm()(x), mask=mask)
        x = x + nn.Dense(self.dim)(nn.gelu(nn.Dense(2 * self.dim)(nn.LayerNorm()(x))))
        return nn.Dense(self.vocab)(x)


def test_linen_decode_loop_cache_donated():
    """The lm1b/wmt pattern: ``decode=True``, the 'cache' collection
    initialized for the full length, one token per step with the cache
    mutable and donated; ``cache_index`` (rank 0) and the cached keys and
    values updated in place. Each step's logits match jax.jit's and, at
    the end, the full causal forward pass."""
    batch, length = 2, 6
    tokens = np.random.default_rng(5).integers(0, 16, (batch, length)).astype(np.int32)
    model = Decoder(decode=True)
    params = init_params(Decoder(), tokens, seed=2)
    cache = model.init(jax.random.key(0), tokens)["cache"]

    def decode_step(params, cache, token):
        logits, mutated = model.apply({"params": params, "cache": cache}, token,
                                      mutable=["cache"])
        return logits, mutated["cache"]

    step = tdf.jax.jit(decode_step, donate_argnums=1, strict=True)
    ref_step = jax.jit(decode_step)
    ours_params, ours_cache, ref_cache = to_numpy(params), to_numpy(cache), cache
    buffers = leaves(ours_cache)
    kept = to_numpy(params)
    logits = []
    for i in range(length):
        out, ours_cache = step(ours_params, ours_cache, tokens[:, i:i + 1])
        ref_out, ref_cache = ref_step(params, ref_cache, tokens[:, i:i + 1])
        np.testing.assert_allclose(out, np.asarray(ref_out), rtol=1e-5, atol=1e-5)
        assert_trees_match(ours_cache, ref_cache)
        logits.append(out)
    assert_same_buffers(ours_cache, buffers)
    assert_unchanged(ours_params, kept)
    index = [a for a in leaves(ours_cache) if a.ndim == 0]
    assert len(index) == 1 and int(index[0]) == length
    full = Decoder().apply({"params": params}, tokens)
    np.testing.assert_allclose(np.concatenate(logits, axis=1), np.asarray(full),
                               rtol=1e-4, atol=1e-4)
