#!/usr/bin/env bash
# Packs what the rvc benchmark needs to run on CUDA on a GPU machine with no network, from the npm registry only:
# Node 22 (the `node` package), onnxruntime-node 1.29.0 with its common package, the CUDA provider libraries built
# for that same onnxruntime (ORT 1.29.0, CUDA 13: the npm package com.github.asus4.onnxruntime.linux-x64-gpu),
# and the runner's production dependencies. onnxruntime-node 1.30's own CUDA provider comes from NuGet at install
# time, which such a machine cannot reach; provider libraries load only into the onnxruntime build they were made
# for, hence 1.29.0 on both sides. The machine supplies CUDA 13 and cuDNN 9 (LD_LIBRARY_PATH, see gpu-runner/README.md).
#   bench/runner/offline-cuda-bundle.sh OUT_DIR      -> OUT_DIR/bundle.tar.xz (about 210 MB)
set -euo pipefail
out=$(realpath "${1:?usage: offline-cuda-bundle.sh OUT_DIR}")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent onnxruntime-node@1.29.0 onnxruntime-common@1.29.0 com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9 >/dev/null
mkdir -p bundle/node_modules gpu
tar xzf onnxruntime-node-1.29.0.tgz && mv package bundle/node_modules/onnxruntime-node
tar xzf onnxruntime-common-1.29.0.tgz && mv package bundle/node_modules/onnxruntime-common
tar xzf com.github.asus4.onnxruntime.linux-x64-gpu-0.4.9.tgz -C gpu
bin=bundle/node_modules/onnxruntime-node/bin/napi-v6
rm -rf "$bin/darwin" "$bin/win32" "$bin/linux/arm64"
cp gpu/package/Plugins/Linux/x64/libonnxruntime_providers_{cuda,shared}.so "$bin/linux/x64/"
cp "$root/node_modules/node/bin/node" bundle/node
# The runner's other production dependencies, at the versions its package.json pins.
node -e '
  const deps = { ...require(process.argv[1]).dependencies };
  delete deps["onnxruntime-node"];
  require("fs").writeFileSync("package.json", JSON.stringify({ name: "bundle", private: true, dependencies: deps }));
' "$root/gpu-runner/package.json"
npm install --silent --ignore-scripts --no-audit --no-fund --omit=dev
cp -r node_modules/. bundle/node_modules/
tar cf - bundle | xz -T0 -6 >"$out/bundle.tar.xz"
echo "$out/bundle.tar.xz"
