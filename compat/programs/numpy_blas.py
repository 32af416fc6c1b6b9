"""numpy on OpenBLAS's pthreads pool (compat's numpy row): matrix products
split over 4 threads (the caller and 3 of OpenBLAS's, set by
`openblas_set_num_threads`: the environment's count is capped at the CPUs,
2 here), whose threads wait for each other with sched_yield; products
called from 4 Python threads at once (OpenBLAS's buffers under its
mutexes); SVD, and solve, whose parallel LU factorisation (dgetrf) waits
in loops that call nothing: under fibers each such wait ends at a
preemption tick. Prints one line per step, the same in every run."""
import ctypes
import os
import threading

import numpy as np

steps = 0


def step(line):
    global steps
    steps += 1
    print(line, flush=True)


with open("/proc/self/maps") as maps:
    blas = sorted({l.split()[-1] for l in maps if "libblas" in l})
openblas = ctypes.CDLL(blas[0])
openblas.openblas_set_num_threads(4)
step("blas: %s, %d threads" % (os.path.basename(os.path.dirname(blas[0])), openblas.openblas_get_num_threads()))

rng = np.random.default_rng(1)
a = rng.random((1000, 1000))
b = rng.random((1000, 1000))
for _ in range(5):
    c = a @ b
# The same rows without BLAS (einsum's own loops), to check the product.
ref = np.einsum("ij,jk->ik", a[:100], b)
step("matmul: sum %.6e, rows agree with einsum: %s" % (c.sum(), np.allclose(c[:100], ref)))

results = [None] * 4


def product(i):
    x = np.full((400, 400), i + 1.0)
    results[i] = float((x @ x).sum())


threads = [threading.Thread(target=product, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
step("from 4 threads: %s" % results)

s = np.linalg.svd(a[:300, :300], compute_uv=False)
step("svd: largest %.6f, smallest > 0: %s" % (s[0], bool(s[-1] > 0)))
x = np.linalg.solve(a[:500, :500], b[:500, 0])
step("solve: residual small: %s" % bool(np.abs(a[:500, :500] @ x - b[:500, 0]).max() < 1e-8))
step("done: %d steps" % (steps + 1))
