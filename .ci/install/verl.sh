#!/usr/bin/env bash
# Install verl 0.9.1 for the `verl` adapter into PYTHON's environment, torch and numpy held by
# CONSTRAINTS (pip -c). Used by .ci/adapters before it installs rlspec[verl,dev].
#
#   .ci/install/verl.sh PYTHON CONSTRAINTS
#
# verl is installed with --no-deps: its requirements pull vLLM-era and GPU-training packages
# (wandb, tensorboard, accelerate, pybind11, ...) that the adapter never touches, and pip's resolver
# would be free to replace the pinned torch. What the adapter's imports need:
#   verl.trainer.ppo.core_algos, verl.utils.torch_functional, verl.workers.config.ActorConfig:
#       ray, tensordict (verl accepts >=0.8,!=0.9.0,<=0.10.0), omegaconf, codetiming, orjson,
#       transformers (verl accepts >=5.5.3,!=5.6.0,<5.11)
#   the reward path (assemble_rewards: verl.trainer.ppo.ray_trainer.apply_kl_penalty and
#   verl.experimental.reward_loop's RewardManagerBase), imported on first use:
#       torchdata, datasets (with pandas, pyarrow, dill), peft, cachetools, fastapi, uvicorn, aiohttp
# pyproject's extra `verl` lists the same packages (everything but verl itself).
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 PYTHON CONSTRAINTS" >&2
    exit 2
fi
python=$1
constraints=$2
pip=("$python" -m pip install --disable-pip-version-check -c "$constraints")

release=${RLSPEC_RELEASE:-0.9.1}  # another release for rlspec matrix --releases (docs/releases.md)
"${pip[@]}" --no-deps "verl==$release"
"${pip[@]}" "ray>=2.41" "tensordict>=0.8,!=0.9.0,<=0.10.0" omegaconf codetiming orjson \
    "transformers>=5.5.3,!=5.6.0,<5.11" \
    torchdata datasets pandas "pyarrow>=19" dill peft cachetools fastapi uvicorn aiohttp
"$python" - <<'PY'
import verl.trainer.ppo.core_algos  # noqa: F401
import verl.utils.torch_functional  # noqa: F401
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase  # noqa: F401
from verl.trainer.ppo.ray_trainer import apply_kl_penalty  # noqa: F401
from verl.workers.config import ActorConfig  # noqa: F401
import verl
print(f"verl.sh: verl {verl.__version__}: core_algos, torch_functional, ActorConfig and the reward path import")
PY
