"""Several ranks per node (swing_mpi.nodes) against MPI's own allreduce, under mpiexec (pytest-mpi).

Every run here sees one host, so the nodes are made with ``SWING_MPI_RANKS_PER_NODE=K``
(each ``K`` consecutive ranks a node, all in the host's shared memory); ``tests/launch``
checks the nodes MPI itself reports (hydra's hosts). For every ``K`` in 2..4 that divides
this size, and node tori of ``P/K`` nodes (a ring, and 2-D where ``P/K`` factors, one node
too): every allreduce algorithm, ``auto`` and ``native`` meet integer sums (exact), float sums
(MPI's within a tolerance, the same bits on every rank), a non-commutative user op (rank
order) and sizes that run on one lane and on all ``K``; sizes change from call to call (the
shared window's halves and growth), buffers are separate or in place, nothing past
``count`` is written. Blocking reduce-scatter (even, uneven, in place) and all-gather likewise;
nonblocking and persistent calls with a node torus run on the torus of ranks ``dims + (K,)``.
Nodes that do not fit are errors on every rank before anything is written.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi import ALGORITHMS, rc
from swing_mpi.nodes import chunks, lanes_for, node_layout

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()

ALLREDUCE = sorted(a for a, info in ALGORITHMS.items() if "allreduce" in info.collectives)
KS = [k for k in (2, 3, 4) if P % k == 0]


def _tori(nodes: int) -> list[tuple[int, ...]]:
    out = [(nodes,)]
    for a in range(2, nodes):
        if nodes % a == 0 and a <= nodes // a:
            out.append((a, nodes // a))
            break
    return out


SETUPS = [(k, t) for k in KS for t in _tori(P // k)]
"""(ranks a node, node torus) of this size; empty where no K in 2..4 divides it."""
needs_nodes = pytest.mark.skipif(not SETUPS, reason=f"{P} rank(s): no node of 2-4 ranks divides them")


@pytest.fixture
def nodes_of():
    """Set the ranks a node for a test (``rc`` is read again from the environment afterwards)."""
    def set_k(k: int, chunk: int | None = None) -> None:
        rc.ranks_per_node = k
        if chunk is not None:
            rc.node_chunk = chunk
    return set_k


def _same_everywhere(a: np.ndarray) -> bool:
    return len(set(WORLD.allgather(a.tobytes()))) == 1


def _floats(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, R, n]).standard_normal(n)


def test_chunks_and_lanes():
    assert chunks(10, 3) == [(0, 4), (4, 3), (7, 3)]
    assert chunks(2, 4) == [(0, 1), (1, 1), (2, 0), (2, 0)]
    assert lanes_for(8, 1, 4, 64) == 1
    assert lanes_for(1 << 20, 1 << 17, 4, 32 << 10) == 4
    assert lanes_for(100, 100, 4, 0) == 4
    assert lanes_for(100, 2, 4, 0) == 2


@needs_nodes
@pytest.mark.parametrize("chunk", [16, None], ids=["all-lanes", "default-lanes"])
def test_every_algorithm_matches_mpi(nodes_of, chunk):
    """Each algorithm meets each (K, node torus) once per chunk setting; sizes and modes rotate."""
    names = ALLREDUCE + ["auto", "native"]
    sizes = [1, 7, 1000, 40_000, 0, 3]
    fails = []
    for i, alg in enumerate(names):
        for j, (k, torus) in enumerate(SETUPS):
            nodes_of(k, chunk)
            n = sizes[(i + j) % len(sizes)]
            dims = "x".join(map(str, torus))
            # integers: exact
            x = (np.arange(n, dtype=np.int64) * 7 + R * 3) % 1000
            ref = np.empty_like(x)
            WORLD.Allreduce(x, ref)
            y = np.full(n + 2, -5, np.int64)
            if (i + j) % 2:
                y[:n] = x
                swing_mpi.allreduce(WORLD, MPI.IN_PLACE, [y, n], algorithm=alg, dims=dims)
            else:
                swing_mpi.allreduce(WORLD, x, [y, n], algorithm=alg, dims=dims)
            if not np.array_equal(y[:n], ref) or (y[n:] != -5).any():
                fails.append(f"{alg} K={k} dims={dims} n={n} int64 SUM")
            # floats: MPI's within a tolerance, the same bits everywhere
            xf = _floats(n, i)
            reff = np.empty_like(xf)
            WORLD.Allreduce(xf, reff)
            yf = np.empty_like(xf)
            swing_mpi.allreduce(WORLD, xf, yf, algorithm=alg, dims=dims)
            if not np.allclose(yf, reff, rtol=1e-12, atol=1e-12 * P) or not _same_everywhere(yf):
                fails.append(f"{alg} K={k} dims={dims} n={n} float64 SUM")
    assert not fails, fails


def _matmul(a, b, dt):
    """``b = a · b`` for 2x2 float matrices: not commutative."""
    x = np.frombuffer(a, np.float64).reshape(-1, 2, 2)
    y = np.frombuffer(b, np.float64).reshape(-1, 2, 2)
    y[...] = x @ y


@needs_nodes
@pytest.mark.parametrize("alg", ["swing-bw", "recdoub", "auto"])
def test_non_commutative_op_keeps_rank_order(nodes_of, alg):
    op = MPI.Op.Create(_matmul, commute=False)
    mat = MPI.DOUBLE.Create_contiguous(4).Commit()
    try:
        for k, torus in SETUPS:
            nodes_of(k, 16)
            m = 50
            rng = np.random.default_rng([R, 11])
            x = rng.choice([0.0, 1.0, 2.0], (m, 2, 2))
            ref = np.empty_like(x)
            WORLD.Allreduce([x, m, mat], [ref, m, mat], op)
            y = np.empty_like(x)
            swing_mpi.allreduce(WORLD, [x, m, mat], [y, m, mat], op, algorithm=alg,
                                dims="x".join(map(str, torus)))
            assert np.array_equal(y, ref), (k, torus)
    finally:
        mat.Free()
        op.Free()


@needs_nodes
def test_sizes_that_change_between_calls(nodes_of):
    """Growing and shrinking vectors: a late reader of one call never sees the next call's input."""
    k, torus = SETUPS[-1]
    nodes_of(k, 64)
    dims = "x".join(map(str, torus))
    for it, n in enumerate([1, 3, 2, 5000, 1, 200_000, 7, 3, 100_000, 2]):
        x = np.arange(n, dtype=np.int64) + R * it
        y = np.empty_like(x)
        swing_mpi.allreduce(WORLD, x, y, algorithm="swing-bw", dims=dims)
        assert np.array_equal(y, np.arange(n) * P + it * P * (P - 1) // 2), (it, n)


HALVES = sorted(a for a, info in ALGORITHMS.items() if "reduce_scatter" in info.collectives)


@needs_nodes
@pytest.mark.parametrize("chunk", [16, None], ids=["all-lanes", "default-lanes"])
def test_reduce_scatter_and_allgather_match_mpi(nodes_of, chunk):
    """Blocking reduce-scatter (even, uneven with zeros, in place) and all-gather on a torus of nodes."""
    fails = []
    for i, alg in enumerate(HALVES + ["auto", "native"]):
        for j, (k, torus) in enumerate(SETUPS):
            nodes_of(k, chunk)
            dims = "x".join(map(str, torus))
            n = [1, 40, 0, 3000][(i + j) % 4]
            x = (np.arange(P * n, dtype=np.int64) * 5 + R) % 997
            ref = np.empty(n, np.int64)
            WORLD.Reduce_scatter_block(x, ref)
            y = np.full(n + 1, -3, np.int64)
            if (i + j) % 2 and alg != "native":  # MPI's own may use the rest of an in-place buffer
                z = np.concatenate([x, [-3]])
                swing_mpi.reduce_scatter_block(WORLD, MPI.IN_PLACE, [z, n], algorithm=alg, dims=dims)  # n a block
                y[:n] = z[:n]
                if not (z[n:P * n] == x[n:]).all():  # MPI leaves the rest of an in-place buffer alone
                    fails.append(f"{alg} K={k} dims={dims} n={n}: in-place rest written")
            else:
                swing_mpi.reduce_scatter_block(WORLD, x, [y, n], algorithm=alg, dims=dims)
            if not np.array_equal(y[:n], ref) or y[n] != -3:
                fails.append(f"{alg} K={k} dims={dims} n={n}: reduce_scatter_block")
            counts = [(r * 7 + i) % 5 for r in range(P)]
            xv = _floats(sum(counts), i)
            refv = np.empty(counts[R])
            WORLD.Reduce_scatter(xv, refv, counts)
            yv = np.empty(counts[R])
            swing_mpi.reduce_scatter(WORLD, xv, yv, counts, algorithm=alg, dims=dims)
            if not np.allclose(yv, refv, rtol=1e-12, atol=1e-12 * P):
                fails.append(f"{alg} K={k} dims={dims} counts={counts}: reduce_scatter")
            mine = np.arange(n, dtype=np.int64) + 1000 * R
            got = np.full(P * n, -1, np.int64)
            if (i + j) % 2:
                got[R * n:(R + 1) * n] = mine
                swing_mpi.allgather(WORLD, MPI.IN_PLACE, got, algorithm=alg, dims=dims)
            else:
                swing_mpi.allgather(WORLD, mine, got, algorithm=alg, dims=dims)
            want = (np.arange(n)[None, :] + 1000 * np.arange(P)[:, None]).ravel()
            if not np.array_equal(got, want):
                fails.append(f"{alg} K={k} dims={dims} n={n}: allgather")
    assert not fails, fails


@needs_nodes
def test_nonblocking_calls_run_on_the_torus_of_ranks(nodes_of):
    k, torus = SETUPS[0]
    nodes_of(k)
    dims = "x".join(map(str, torus))
    n = 1000
    x = np.arange(n, dtype=np.int64) * (R + 1)
    want = np.arange(n) * (P * (P + 1) // 2)
    y = np.empty_like(x)
    swing_mpi.iallreduce(WORLD, x, y, dims=dims).Wait()
    assert np.array_equal(y, want)
    req = swing_mpi.allreduce_init(WORLD, x, y, dims=dims, algorithm="swing-bw")
    for _ in range(2):
        y[...] = 0
        req.Start()
        req.Wait()
        assert np.array_equal(y, want)
    req.Free()
    xs = np.arange(P * 10, dtype=np.int64)
    ys = np.empty(10, np.int64)
    swing_mpi.ireduce_scatter_block(WORLD, xs, ys, dims=dims, algorithm="swing-bw").Wait()
    assert np.array_equal(ys, P * np.arange(R * 10, R * 10 + 10))
    got = np.empty(P * 3, np.int64)
    swing_mpi.iallgather(WORLD, np.full(3, R, np.int64), got, dims=dims).Wait()
    assert np.array_equal(got, np.repeat(np.arange(P), 3))
    comm = swing_mpi.Intracomm(WORLD, dims=dims, algorithm="bucket")
    y2 = np.empty_like(x)
    comm.Allreduce(x, y2)
    assert np.array_equal(y2, want)


@needs_nodes
def test_the_layout_names_nodes_and_lanes(nodes_of):
    k, torus = SETUPS[0]
    nodes_of(k)
    layout = node_layout(WORLD)
    layout.check(torus)
    assert (layout.k, layout.nodes, layout.node, layout.local) == (k, P // k, R // k, R % k)
    assert layout.node_comm.Get_size() == k and layout.lane_comm.Get_size() == P // k
    assert layout.lane_comm.Get_rank() == R // k


@pytest.mark.skipif(P < 2, reason="one rank: a node torus needs two ranks")
def test_nodes_that_do_not_fit_are_errors_everywhere(nodes_of):
    """A node count that does not fill dims, and a K that does not divide P: ValueError on every rank."""
    k = next((k for k in (2, 3, 4, 5, 6, 7) if P % k == 0 and k < P), None)
    y = np.full(4, 9.0)
    if k is not None:  # P/K nodes, but dims ask for a different count of places that still divides P
        nodes_of(P)  # one node of P ranks
        with pytest.raises(ValueError, match=r"on 1 node of"):
            swing_mpi.allreduce(WORLD, np.ones(4), y, dims=str(P // k))
        assert (y == 9.0).all()
    bad_k = next(k for k in range(2, P + 2) if P % k)
    nodes_of(bad_k)
    with pytest.raises(ValueError, match="does not divide"):
        swing_mpi.allreduce(WORLD, np.ones(4), y, dims="1")
    assert (y == 9.0).all()


@pytest.mark.skipif(P < 2, reason="one rank: no node torus")
def test_one_node(nodes_of):
    """A torus of one node: only the node phases (the torus among nodes is one node)."""
    nodes_of(P, 8)
    x = _floats(3000, 5)
    ref = np.empty_like(x)
    WORLD.Allreduce(x, ref)
    y = np.empty_like(x)
    swing_mpi.allreduce(WORLD, x, y, dims="1")
    assert np.allclose(y, ref) and _same_everywhere(y)


@needs_nodes
@pytest.mark.skipif(P < 2, reason="one rank: nothing can differ")
def test_the_mismatch_check_covers_node_calls(nodes_of):
    k, torus = SETUPS[0]
    nodes_of(k)
    n = 10 + (R == P - 1)
    y = np.full(n, 7.0)
    with pytest.raises(swing_mpi.CollectiveMismatchError, match="count differs"):
        swing_mpi.allreduce(WORLD, np.ones(n), y, dims="x".join(map(str, torus)), check=True)
    assert (y == 7.0).all()


@needs_nodes
@pytest.mark.skipif(P < 2, reason="one rank: no trial to agree on")
def test_auto_tries_both_forms_and_every_rank_settles_on_one(nodes_of):
    """``auto`` on a torus of nodes tries both forms and every rank keeps the same one.

    Its first calls of a size try the node phases and the flat torus ``dims + (K,)`` where the model
    finds them close, every rank settles on the same form, and every call meets MPI's result, before,
    during and after the trial. Rank 0 calls on the same arrays every time (the repeat path, once the
    form is settled), the others on new arrays each call.
    """
    from swing_mpi.choose import NODE_FORMS, node_form
    from swing_mpi.state import comm_state

    k, torus = SETUPS[0]
    nodes_of(k)
    n = 8192  # 64 KiB of float64: priced close by the built-in model on every node torus here
    st = comm_state(WORLD)
    lanes = lanes_for(n * 8, n, k)
    d = node_form(torus, k, n * 8, 8, lanes, exact=False, tuning=st.tuning)
    if not st.trial or not d.contenders:
        pytest.skip(f"no trial here: SWING_MPI_TRIAL off or the model does not find the forms close ({d})")
    base = _floats(n, 21)
    ref = np.empty_like(base)
    WORLD.Allreduce(base, ref)
    x0, y0 = base.copy(), np.empty_like(base)
    for it in range(120):
        x, y = (x0, y0) if R == 0 else (base.copy(), np.empty_like(base))
        swing_mpi.allreduce(WORLD, x, y, dims=torus)
        assert np.allclose(y, ref, rtol=1e-12, atol=1e-12 * P), it
        if it % 15 == 0 or it == 119:
            assert _same_everywhere(y), it
    key = ("node-form", torus, k, n * 8, MPI.DOUBLE.py2f(), MPI.SUM.py2f())
    trial = st.trials[key]
    assert trial is not None and trial.pick in NODE_FORMS
    assert set(trial.turns) == set(NODE_FORMS)  # both were tried
    assert swing_mpi.api.auto_trial(WORLD, y, MPI.SUM, dims=torus) is trial  # what a benchmark waits for
    assert len(set(WORLD.allgather((trial.pick, trial.medians)))) == 1
