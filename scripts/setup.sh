#!/usr/bin/env bash
# Install what building and testing ppcc/pprt need on Debian 12: the
# toolchain and libraries from Debian (apt-get), and a Python venv (.venv) that
# sees Debian's torch/torchvision/sklearn and adds onnx, onnxruntime and
# transformers from PyPI. Idempotent: does nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake clang libclang-rt-14-dev protobuf-c-compiler libprotobuf-c-dev libonnx-dev libxxhash-dev zlib1g-dev libcjson-dev libdnnl-dev
      libopenmpi-dev openmpi-bin strace
      python3-venv python3-numpy python3-torch python3-torchvision python3-sklearn
      chromium-headless-shell)
# chromium-headless-shell: Debian's Chromium built for headless use (no GTK or
# X), which tests/report/run.py drives to check the ppcc --report-html page:
# about 98 MB to download on bookworm (with chromium-common), against 122 MB
# for the full chromium package
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # the downloaded packages (torch's alone are hundreds of MB) are not needed
  # once installed, and the suite needs the disk
  $sudo apt-get clean
fi
# no wheel cache either (onnxruntime, transformers and their dependencies)
export PIP_NO_CACHE_DIR=1

if ! .venv/bin/python -c "import numpy, onnx, onnxruntime, torch; assert onnx.__version__.startswith('1.22.')" 2>/dev/null; then
  echo "setup: creating .venv (onnx, onnxruntime from PyPI; torch from Debian)"
  /usr/bin/python3 -m venv --system-site-packages .venv
  # keep Debian's numpy: torch from Debian is built against it
  npv=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')
  # onnx 1.22 is the last release that ships the backend node tests (tests/conformance)
  .venv/bin/pip install -q --disable-pip-version-check "numpy==$npv" "onnx==1.22.*" onnxruntime
fi
# Hugging Face transformers for the zoo's transformers (tests/models/zoo.py:
# random weights from configs, nothing downloaded); 4.40 still supports
# Debian's torch 1.13
if ! .venv/bin/python -c "import transformers; assert transformers.__version__ == '4.40.2'" 2>/dev/null; then
  echo "setup: installing transformers 4.40.2 into .venv"
  npv=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')
  .venv/bin/pip install -q --disable-pip-version-check "numpy==$npv" "transformers==4.40.2"
fi
# timm 0.9.2 (the release of the project's notes; supports torch 1.13) for
# tests/split/notes.py: the notes' exec_seq lists on timm models of the same
# families (random weights; nothing downloaded)
if ! .venv/bin/python -c "import timm; assert timm.__version__ == '0.9.2'" 2>/dev/null; then
  echo "setup: installing timm 0.9.2 into .venv"
  npv=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')
  .venv/bin/pip install -q --disable-pip-version-check "numpy==$npv" "timm==0.9.2"
fi
