#!/usr/bin/env bash
# Install OpenRLHF 0.11.2 for the `openrlhf` adapter into PYTHON's environment, torch and numpy held
# by CONSTRAINTS (pip -c). Used by .ci/adapters before it installs rlspec[openrlhf,dev].
#
#   .ci/install/openrlhf.sh PYTHON CONSTRAINTS
#
# OpenRLHF cannot be installed with its dependencies on a machine without CUDA: it requires
# flash-attn (a CUDA build) and pins deepspeed, ray[default], vllm-era packages. The adapter loads
# only models/utils.py, models/loss.py and trainer/ppo_utils/experience_maker.py (see
# checks/adapters/openrlhf.py), whose imports need:
#   deepspeed  (models/utils.py: `import deepspeed`; built from its sdist with no ops, DS_BUILD_OPS=0,
#               --no-deps so it cannot pull another torch; --no-build-isolation so the build sees the
#               pinned torch; its runtime imports: einops hjson msgpack psutil py-cpuinfo pydantic tqdm packaging)
#   ray        (experience_maker.py: `import ray`)
#   transformers, pylatexenc, sympy  (openrlhf.utils, imported by trainer/ppo_utils/experience.py)
# in the versions OpenRLHF 0.11.2 pins (deepspeed==0.19.6, transformers==5.15.0, ray==2.55.0).
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 PYTHON CONSTRAINTS" >&2
    exit 2
fi
python=$1
constraints=$2
pip=("$python" -m pip install --disable-pip-version-check -c "$constraints")

release=${RLSPEC_RELEASE:-0.11.2}  # another release for rlspec matrix --releases (docs/releases.md)
"${pip[@]}" --no-deps "openrlhf==$release"
"${pip[@]}" "setuptools>=77.0.3" wheel  # deepspeed's setup.py build, without build isolation (torch wants >= 77.0.3)
DS_BUILD_OPS=0 "${pip[@]}" --no-deps --no-build-isolation "deepspeed==0.19.6"
"${pip[@]}" einops hjson msgpack psutil py-cpuinfo "pydantic>=2" tqdm packaging \
    "transformers==5.15.0" "ray==2.55.0" pylatexenc sympy
# the three modules import (flash-attn is never needed: the adapter does not run openrlhf/models/__init__.py)
"$python" - <<'PY'
import importlib
for name in ("deepspeed", "ray", "transformers", "pylatexenc", "openrlhf"):
    importlib.import_module(name)
print("openrlhf.sh: deepspeed, ray, transformers, pylatexenc and openrlhf import")
PY
