"""Data-parallel training across processes with scanlib.distributed (MPI through mpi4py): the
Kalman-filter fit of examples/kalman.py over many simulated series, its sequences sharded
across the ranks.

    pip install -e '.[mpi]'                                      # mpi4py and Open MPI
    mpiexec -n 2 python -m mpi4py examples/data_parallel.py      # two processes
    python examples/data_parallel.py                             # one: the same fit

Rank 0 simulates the series and broadcasts them. Each rank takes the gradient of its shard's
log-likelihood, and allreduce sums the gradients, so every rank takes the same Adam step as
one process on the full batch would. Rank 0 then runs that one-process fit itself (the other
ranks wait without spinning), compares the gradient at the start (to 1e-12) and the fitted
parameters, and prints the time per step of both, the samples per second and the
allreduce's share of a step.

`python -m mpi4py` makes an unhandled exception on one rank abort every rank, instead of
leaving the others waiting in a collective. Set OMP_NUM_THREADS=1 (and OPENBLAS_NUM_THREADS=1)
so that ranks sharing a host do not fight over its cores.

Several hosts: every host needs the same environment at the same path (a shared file system,
or the same venv on each), and passwordless ssh between them. List the hosts and how many
ranks each runs in a hostfile,

    node1 slots=4
    node2 slots=4

and start `mpiexec -n 8 --hostfile hosts -x OMP_NUM_THREADS=1 python -m mpi4py
examples/data_parallel.py --sequences 64000` (Open MPI's flags; MPICH's mpiexec takes
`-f hosts` and `-genv OMP_NUM_THREADS 1`).

Exit status 0 when the checks pass, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import _util
import numpy as np
from kalman import log_likelihood, simulate, to_theta

import scanlib as sl
import scanlib.distributed as dist


def quiet_barrier(comm=None):
    """A barrier that sleeps while it waits: MPI's blocking calls spin on a core, which would
    slow the rank that is working on a shared host."""
    from mpi4py import MPI

    request = (comm or MPI.COMM_WORLD).Ibarrier()
    while not request.Test():
        time.sleep(0.002)


def fit(ys, n_obs, steps, lr, reduce):
    """Adam on -log-likelihood / n_obs of the series ys [T, N]; `reduce(grads)` combines the
    ranks' gradients. Returns (parameters, first gradient, seconds per step, allreduce share,
    CPU seconds per step of the gradient)."""
    theta, opt = to_theta({"rho": 0.8, "omega": 0.5, "q": 1.0, "r": 0.5}), sl.optim.adam(lr)
    state = opt.init(theta)
    objective = sl.grad(lambda th: -log_likelihood(th, ys) / n_obs)
    first, compute, communicate, cpu = None, 0.0, 0.0, 0.0
    for step in range(steps + 1):
        if step == 1:  # step 0 warms up (the scan's first run compiles its loop)
            compute = communicate = cpu = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        g = objective(theta)
        t1 = time.perf_counter()
        cpu += time.process_time() - c0
        g = reduce(g)
        communicate += time.perf_counter() - t1
        theta, state = opt.step(g, state, theta)
        compute += time.perf_counter() - t0
        first = first or {k: v.numpy() for k, v in g.items()}
    per_step = compute / steps
    return theta, first, per_step, communicate / steps / per_step, cpu / steps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=50, help="time steps per sequence")
    p.add_argument("--sequences", type=int, default=32000,
                   help="independent sequences in the whole batch, split across the ranks")
    p.add_argument("--steps", type=int, default=20, help="Adam steps")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rank, size = dist.rank(), dist.size()
    if min(args.length, args.steps) < 1 or args.sequences < size:
        p.error("--length and --steps must be at least 1, --sequences at least the ranks")

    # rank 0 simulates; the others receive the same series (broadcast needs their shape)
    shape = (args.length, args.sequences)
    ys = (simulate({"rho": 0.95, "omega": 0.3, "q": 0.5, "r": 1.0}, *shape,
                   np.random.default_rng(args.seed)) if rank == 0 else np.empty(shape))
    ys = dist.broadcast(ys, root=0)
    n_obs = ys.size
    shard = np.array_split(np.arange(args.sequences), size)[rank]
    mine = sl.tensor(ys[:, shard])

    theta, g0, t_ranks, share, cpu = fit(mine, n_obs, args.steps, args.lr,
                                         lambda g: dist.allreduce(g, op="sum"))
    cpu_slowest = float(dist.allreduce(np.array(cpu), op="max"))
    quiet_barrier()
    if rank != 0:
        quiet_barrier()  # while rank 0 runs the one-process fit
        return 0
    print(f"{size} rank(s), {args.sequences} sequences x {args.length} steps "
          f"({len(shard)} sequences on rank 0), {args.steps} Adam steps")
    theta1, g1, t_one, _, cpu_one = fit(sl.tensor(ys), n_obs, args.steps, args.lr, lambda g: g)
    quiet_barrier()

    print(f"  1 process,  full batch: {1e3 * t_one:7.1f} ms per step, "
          f"{args.sequences / t_one:9.0f} sequences/s")
    print(f"  {size} rank(s), sharded:    {1e3 * t_ranks:7.1f} ms per step, "
          f"{args.sequences / t_ranks:9.0f} sequences/s  ({t_one / t_ranks:.2f}x), "
          f"allreduce {share:.1%} of a step (waiting for the slowest rank included)")
    # CPU time does not count the time other processes held the core, so on a busy host it
    # says what the wall clock would on idle cores (without the allreduce)
    print(f"  CPU time of a step's gradient: 1 process {1e3 * cpu_one:.1f} ms, slowest rank "
          f"{1e3 * cpu_slowest:.1f} ms ({cpu_one / cpu_slowest:.2f}x)")
    g_err = max(np.max(np.abs(g0[k] - g1[k])) / np.max(np.abs(g1[k])) for k in g1)
    p_err = max(abs(float(theta[k]) - float(theta1[k])) / abs(float(theta1[k])) for k in theta1)
    ok = _util.check(g_err <= 1e-12, f"the summed shard gradients equal the full-batch "
                                     f"gradient (largest relative difference {g_err:.1e})")
    ok &= _util.check(p_err <= 1e-9, f"{size} ranks end with the parameters of one process "
                                     f"(largest relative difference {p_err:.1e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
