#!/usr/bin/env bash
# Submits the driver cards of a fleet and their matrix on Slurm: an array of
# TASKS card jobs (one per node or GPU model), then the merge, which waits for
# the whole array. Extra arguments go to both sbatch calls (a partition, an
# account); the card jobs' GPU request goes in CARD_ARGS.
#
#   CARDS=/shared/gpulab/cards MATRIX=/shared/gpulab/matrix TASKS=8 \
#     CARD_ARGS="--gpus-per-node=1" deploy/slurm/submit.sh --partition=gpu
#
# Prints the two job ids: the array's, then the merge's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tasks=${TASKS:-1}
read -r -a card_args <<<"${CARD_ARGS:-}"
array=$(sbatch --parsable --array="0-$((tasks - 1))" "${card_args[@]}" "$@" "$here/card.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterany:$array" "$@" "$here/merge.sbatch")
merge=${merge%%;*}
echo "$array $merge"
