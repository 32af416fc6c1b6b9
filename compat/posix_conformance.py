#!/usr/bin/env python3
"""The open POSIX conformance suite's pthread_* and sem_* cases, natively
and under libgreenhook.so: every case that passes natively must pass under
the preload too.

    compat/posix_conformance.py LTP_DIR [LIBGREENHOOK]

LTP_DIR is a checkout of https://github.com/linux-test-project/ltp (only
testcases/open_posix_testsuite is used); LIBGREENHOOK defaults to
target/release/libgreenhook.so. Each case is built with the system C
compiler into a temporary directory and run with a 60 s limit, three at a
time; a case whose answers differ runs again alone. Prints the counts, then
each case whose answers still differ. Not in CI:
the suite is not a Debian package, and CI reaches only package registries.
"""
import concurrent.futures as cf
import glob
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = os.path.join(sys.argv[1], "testcases", "open_posix_testsuite")
    here = os.path.dirname(os.path.abspath(__file__))
    lib = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                          os.path.join(here, "..", "target", "release", "libgreenhook.so"))
    out = tempfile.mkdtemp(prefix="posix-conformance-")
    cases = []
    for d in sorted(glob.glob(os.path.join(root, "conformance", "interfaces", "*"))):
        name = os.path.basename(d)
        if not name.startswith(("pthread_", "sem_")):
            continue
        for f in sorted(glob.glob(os.path.join(d, "*.c"))):
            n = os.path.basename(f)[:-2]
            if n[0].isdigit():
                cases.append((name, n, f))

    def build(case):
        name, n, f = case
        exe = os.path.join(out, f"{name}__{n}")
        r = subprocess.run(["cc", "-O1", "-w", "-pthread", "-D_GNU_SOURCE", "-I", os.path.join(root, "include"),
                            f, os.path.join(root, "lib", "common.c"), "-o", exe, "-lrt", "-lm"],
                           capture_output=True, cwd=os.path.dirname(f))
        return exe if r.returncode == 0 else None

    def run(exe, preload):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = lib
        try:
            return subprocess.run([exe], capture_output=True, timeout=60, env=env, cwd=out).returncode
        except subprocess.TimeoutExpired:
            return "timeout"

    def one(case):
        exe = build(case)
        if not exe:
            return case[0] + "/" + case[1], "no build", None
        native = run(exe, False)
        return case[0] + "/" + case[1], native, run(exe, True) if native == 0 else None

    with cf.ThreadPoolExecutor(3) as ex:
        results = list(ex.map(one, cases))
    # Some cases share a name in the system's namespaces (sem_init/3-2 and
    # 3-3 open the same shared memory object), so two of them at once can
    # break each other. A case that passed natively but not under the
    # preload runs again alone, both ways, and that answer stands.
    by_case = {c[0] + "/" + c[1]: c for c in cases}
    for i, (name, native, patched) in enumerate(results):
        if native == 0 and patched != 0:
            again = one(by_case[name])
            if again[1] == 0:
                results[i] = again
    passing = [r for r in results if r[1] == 0]
    print(f"{len(results)} cases, {len(passing)} pass natively, "
          f"{sum(1 for r in passing if r[2] == 0)} of those under the preload")
    for name, native, patched in passing:
        if patched != 0:
            print(f"  {name}: natively 0, under the preload {patched}")


if __name__ == "__main__":
    main()
