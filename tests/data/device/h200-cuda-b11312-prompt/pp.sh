#!/bin/bash
# issue 40: a prompt's copies to the GPU with part of the model in system memory, at two micro-batch sizes
set -u
T0=$(date +%s); log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/steps.log; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/tests:$PWD
( bash .gpu/build_llama_cuda.sh .gpu/llama.cpp-b11312-src.tar.gz /tmp/lb > /tmp/build.out 2>&1; echo "rc=$?" >> /tmp/build.out ) &
BP=$!
mkdir -p /tmp/m
python3 -c "import engine_gguf as e; e.write('/tmp/m/llama3-8b-q4_0.gguf','llama3-8b-q4_0',tile=True)" && log "model written $(stat -c %s /tmp/m/llama3-8b-q4_0.gguf)"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,driver_version --format=csv > $OUT/pcie.txt 2>&1
wait $BP; cp /tmp/build.out $OUT/build.out; log "build: $(tail -1 /tmp/build.out)"
BIN=$(grep -v '^rc=' /tmp/build.out | grep -v '^export' | tail -1)
eval "$(grep '^export LD_LIBRARY_PATH=' /tmp/build.out | tail -1)"
[ -x "$BIN/llama-bench" ] || { log "no llama-bench at $BIN"; exit 1; }
"$BIN/llama-bench" -m /tmp/m/llama3-8b-q4_0.gguf -ngl 16,24,33 -fa 1 -b 2048 -ub 512,2048 -ctk f16 -ctv f16 \
  -p 2048 -n 0 -d 0,16384 -r 2 -o json > $OUT/bench-ngl-ub.json 2> $OUT/bench-ngl-ub.err
log "bench: rc $?"
