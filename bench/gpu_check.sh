#!/usr/bin/env bash
# End-to-end check on a machine with an NVIDIA GPU and CuPy (no network needed):
#   1. install optree (and pytest/hypothesis) from a wheel directory if they are missing,
#   2. run the whole test suite on the CuPy backend,
#   3. time a tanh RNN forward+backward with scanlib on the GPU and on the CPU,
#   4. run the benchmark's GPU column: every workload of `python -m bench` with scanlib on the
#      GPU (scan and loop) against torch CUDA and JAX on the GPU, numpy-manual on the CPU as 1.0x,
# and print the benchmark table and a summary last. Exit status: 0 only if the tests passed.
# Where $OUT is set (the device tool), the logs and the benchmark's JSON are copied there.
#
#   bench/gpu_check.sh                       wheels from ./wheels (see bench/fetch_wheels.sh)
#   SCANLIB_WHEELS=/path bench/gpu_check.sh  wheels from elsewhere
#   SCANLIB_TEST_BACKEND=numpy bench/gpu_check.sh   the same run without a GPU (CPU only)
#   PYTHON=python3.12 bench/gpu_check.sh     choose the interpreter
#   SCANLIB_TIMING_IMPL=loop bench/gpu_check.sh     time the Python loop instead of scan
#   SCANLIB_GPU_BENCH=0 bench/gpu_check.sh   skip step 4 (SCANLIB_GPU_BENCH_TIMEOUT: its limit, s)
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
py="${PYTHON:-python3}"
wheels="${SCANLIB_WHEELS:-${WHEELS:-$root/wheels}}"
backend="${SCANLIB_TEST_BACKEND:-cupy}"
work="$root/bench/results/gpu_check"   # git-ignored
mkdir -p "$work"
summary=()
status=0

note() { printf '[gpu_check] %s\n' "$*"; }

# --- 1. dependencies, offline ------------------------------------------------------------------
# pip may refuse to touch a system Python (PEP 668); then install into a private directory.
install_offline() {
    local pkg="$1"
    if [ ! -d "$wheels" ]; then
        note "no wheel directory $wheels (make one with bench/fetch_wheels.sh where there is network)"
        return 1
    fi
    "$py" -m pip install -q --no-index --find-links "$wheels" "$pkg" && return 0
    note "pip could not install $pkg into $("$py" -c 'import sys; print(sys.prefix)'); trying $work/site"
    "$py" -m pip install -q --no-index --find-links "$wheels" --target "$work/site" "$pkg" \
        && export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
}

for mod in optree pytest hypothesis; do
    if "$py" -c "import $mod" 2>/dev/null; then
        summary+=("deps|$mod|present")
    elif install_offline "$mod" && "$py" -c "import $mod" 2>/dev/null; then
        summary+=("deps|$mod|installed from $wheels")
    else
        summary+=("deps|$mod|MISSING")
        if [ "$mod" != hypothesis ]; then status=1; fi
    fi
done

if [ "$backend" = cupy ]; then
    if ! "$py" -c "import scanlib, sys; sys.exit(0 if scanlib.cuda_available() else 1)"; then
        note "CuPy does not see a usable GPU (is cupy-cuda12x/13x installed, and the driver?)"
        summary+=("gpu|cupy|NOT AVAILABLE")
        status=1
    else
        gpu="$("$py" -c "import cupy as cp; p = cp.cuda.runtime.getDeviceProperties(0); \
print(p['name'].decode(), '| CuPy', cp.__version__, '| CUDA', cp.cuda.runtime.runtimeGetVersion())")"
        summary+=("gpu|device|$gpu")
    fi
fi

# --- 2. the test suite on the chosen backend ------------------------------------------------------
if [ "$status" -eq 0 ]; then
    note "running the tests with SCANLIB_TEST_BACKEND=$backend"
    SCANLIB_TEST_BACKEND="$backend" "$py" -m pytest tests -o addopts= -q -x -p no:cacheprovider \
        2>&1 | tee "$work/pytest.log"
    rc=${PIPESTATUS[0]}
    last="$(grep -E '(passed|failed|error|no tests ran)' "$work/pytest.log" | tail -n 1)"
    summary+=("tests|$backend|rc=$rc: ${last:-no summary line}")
    if [ "$rc" -ne 0 ]; then status=1; fi
else
    summary+=("tests|$backend|not run (see above)")
fi

# --- 3. timing: tanh RNN forward + backward -----------------------------------------------------
note "timing a tanh RNN (forward + backward)"
if [ "$backend" = cupy ]; then devices="cuda cpu"; else devices="cpu"; fi
SCANLIB_TIMING_DEVICES="$devices" "$py" - > "$work/timing.txt" 2> "$work/timing.err" <<'EOF'
import os, time
import numpy as np
import scanlib as sl

T, B, H, D = 200, 32, 256, 64
rng = np.random.default_rng(0)
data = {"W": rng.standard_normal((H, H)) * 0.05, "U": rng.standard_normal((D, H)) * 0.1,
        "b": np.zeros(H)}
xs_np = rng.standard_normal((T, B, D))
impl = os.environ.get("SCANLIB_TIMING_IMPL") or ("scan" if hasattr(sl, "scan") else "loop")


def loss(params, xs):
    def step(h, x):
        h = sl.tanh(h @ params["W"] + x @ params["U"] + params["b"])
        return h, h

    h0 = sl.zeros((B, H), dtype=np.float32, device=xs.device)
    if impl == "scan":
        _, hs = sl.scan(step, h0, xs)
        return (hs * hs).mean()
    h, total = h0, 0.0
    for t in range(T):
        h, y = step(h, xs[t])
        total = total + (y * y).mean()
    return total / T


for device in os.environ["SCANLIB_TIMING_DEVICES"].split():
    params = {k: sl.tensor(v.astype(np.float32), device=device) for k, v in data.items()}
    xs = sl.tensor(xs_np.astype(np.float32), device=device)
    f = sl.value_and_grad(loss)
    value, g = f(params, xs)  # warm-up (CuPy compiles kernels on first use)
    g["W"].numpy()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        value, g = f(params, xs)
        g["W"].numpy()  # copies to the host: waits for the GPU to finish
        times.append(time.perf_counter() - t0)
    print(f"{device}|{impl}|T={T} B={B} H={H} f32|{1000 * min(times):.1f} ms|"
          f"loss {value.item():.6f}")
EOF
trc=$?
if [ "$trc" -eq 0 ]; then
    while IFS= read -r line; do summary+=("timing|$line"); done < "$work/timing.txt"
else
    summary+=("timing|failed|rc=$trc: $(tail -n 1 "$work/timing.err")")
    cat "$work/timing.err" >&2
    status=1
fi

# --- 4. the benchmark's GPU column ---------------------------------------------------------------
if [ "$backend" = cupy ] && [ "${SCANLIB_GPU_BENCH:-1}" = 1 ]; then
    note "benchmark: scanlib on the GPU against torch CUDA and JAX there"
    gpu_contenders="numpy-manual,scanlib-scan,scanlib-scan-cuda,scanlib-loop-cuda"
    gpu_contenders="$gpu_contenders,torch-loop-cuda,torch-scan-cuda,jax-scan-jit-gpu"
    # Bounded, so that the summary still prints inside a device lease (default 300 s).
    PYTHONUNBUFFERED=1 timeout "${SCANLIB_GPU_BENCH_TIMEOUT:-300}" "$py" -m bench \
        --contenders "$gpu_contenders" --budget 0.5 --warmup 1 --no-chart --out "$work/bench" \
        > "$work/bench.log" 2>&1
    brc=$?
    summary+=("bench|gpu column|rc=$brc; $(grep -c 'skipping' "$work/bench.log") contenders skipped")
    grep -E '^skipping|ERROR|DISAGREES' "$work/bench.log"
    sed -n '/^workload/,/^x manual/p' "$work/bench.log"
    if [ "$brc" -ne 0 ]; then tail -n 20 "$work/bench.log"; fi
fi
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$work"/*.log "$work"/*.txt "$OUT"/ 2>/dev/null
    cp "$work"/bench/latest-full.json "$work"/bench/latest-full.md "$OUT"/ 2>/dev/null
fi

# --- summary (last) -------------------------------------------------------------------------------
echo
echo "=================== scanlib gpu_check summary ==================="
for row in "${summary[@]}"; do
    IFS='|' read -r what name rest <<< "$row"
    printf '%-7s %-12s %s\n' "$what" "$name" "${rest//|/  }"
done
echo "overall: $([ "$status" -eq 0 ] && echo PASS || echo FAIL)"
exit "$status"
