#!/bin/bash
# The checks to run on a machine with an NVIDIA GPU, in one go (about 8 minutes on 16 cores):
# the GPU tests (OpenCL and CUDA), the ONNX conformance suite through the CUDA adapter in 6
# parallel shards, then benchmarks/gpu.py.  Logs and JSON go to the folder given.
#
#     bash benchmarks/gpu_check.sh OUTDIR [path/to/onnx_conformance.py]
#
# CONF_S, TEST_S and BENCH_S bound each part in seconds (240, 240, 180); TEST_ARGS and BENCH_ARGS
# are passed on to pytest and benchmarks/gpu.py.
set -u
OUT=${1:?usage: gpu_check.sh OUTDIR [onnx_conformance.py]}
CONF=${2:-}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
T0=$(date +%s)
{ nvidia-smi -L; python3 --version; nproc
  python3 -c "from cuda.bindings import nvrtc; print('nvrtc', nvrtc.nvrtcVersion()); from tensorforge.runtime.cuda import device_arch; print(device_arch())"
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"
if [ -n "$CONF" ]; then
  python3 "$CONF" generate --seed 7 --out "$OUT/suite" > "$OUT/gen.log" 2>&1
  for i in 0 1 2 3 4 5; do
    timeout "${CONF_S:-240}" python3 "$CONF" run --data "$OUT/suite" --backend tests/onnx_backend.py:run_user_cuda \
      --strict-int --shard "$i/6" --timeout 60 --budget $(( ${CONF_S:-240} - 15 )) --json "$OUT/conf$i.json" \
      > "$OUT/conf$i.log" 2>&1 &
  done
fi
timeout "${TEST_S:-240}" python3 -m pytest -q -n 4 tests/backends/gpu -rs -p no:cacheprovider ${TEST_ARGS:-} > "$OUT/tests.log" 2>&1
echo "tests: exit $? after $(( $(date +%s) - T0 )) s"; tail -3 "$OUT/tests.log"
wait
if [ -n "$CONF" ]; then
  echo "conformance done after $(( $(date +%s) - T0 )) s"; grep -h "^backend " "$OUT"/conf?.log
  rm -rf "$OUT/suite"
fi
timeout "${BENCH_S:-180}" python3 benchmarks/gpu.py --target cuda --repeat 20 --json "$OUT/gpu.json" ${BENCH_ARGS:-} > "$OUT/gpu.log" 2>&1
echo "benchmark: exit $? after $(( $(date +%s) - T0 )) s"; tail -40 "$OUT/gpu.log"
