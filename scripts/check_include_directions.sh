#!/usr/bin/env bash
# The layering check (CTest include_directions, so CI runs it): every #include "..." of the
# library folders points down the arrows
#     server -> scheduler -> model -> kvcache -> kernels
# (a layer includes its own folder and those below it), and the concrete backends
# (kernels/cpu, kernels/cuda, kernels/hip) are included only by themselves, by programs/ and
# tests/, and by the composition root (server/model_loader.cpp). kernels/common is shared by
# the backends only.
#   scripts/check_include_directions.sh [ROOT]      prints each violation; exit 1 if any
#   scripts/check_include_directions.sh --self-test  checks that a planted violation is caught
set -uo pipefail

check() {
  local root=$1 bad=0
  declare -A rank=([kernels]=0 [kvcache]=1 [model]=2 [scheduler]=3 [server]=4)
  while IFS= read -r line; do
    local file=${line%%:*} rest=${line#*:}
    rest=${rest#*:}
    local inc re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)"'
    # bash's own match: one process per include line made the check take a minute on 2 cores.
    [[ $rest =~ $re ]] || continue
    inc=${BASH_REMATCH[1]}
    local from=${file%%/*} to=${inc%%/*}
    [ -n "${rank[$to]+x}" ] || continue  # a system or third-party header
    local why=""
    if [ "${rank[$to]}" -gt "${rank[$from]}" ]; then
      why="$from may not include $to (server -> scheduler -> model -> kvcache -> kernels)"
    fi
    case $inc in
      kernels/cpu/* | kernels/cuda/* | kernels/hip/*)
        local backend=${inc%/*}
        case $file in
          "$backend"/* | server/model_loader.cpp) ;;
          kernels/hip/*) [ "$backend" = kernels/cuda ] || why="$inc is a concrete backend" ;;
          *) why="$inc is a concrete backend: only programs/, tests/ and server/model_loader.cpp include it" ;;
        esac ;;
      kernels/common/*)
        case $file in
          kernels/*) ;;
          *) why="$inc is shared by the backends only" ;;
        esac ;;
    esac
    if [ -n "$why" ]; then
      echo "$file: #include \"$inc\": $why"
      bad=1
    fi
  done < <(cd "$root" && grep -rnE --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' kernels kvcache model scheduler server 2>/dev/null)
  return $bad
}

if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/kernels/cuda" "$tmp/kvcache" "$tmp/model/qwen35" "$tmp/scheduler" "$tmp/server"
  echo '#include "kernels/dtype.h"' > "$tmp/kvcache/ok.h"
  echo '#include "kernels/cuda/cuda_backend.h"' > "$tmp/server/model_loader.cpp"
  check "$tmp" > /dev/null || { echo "self-test: a clean tree was refused"; exit 1; }
  for planted in 'kvcache/up.h:#include "scheduler/engine.h"' 'model/qwen35/be.cpp:#include "kernels/cpu/cpu_backend.h"' \
                 'scheduler/dev.cpp:#include "kernels/cuda/cuda_sampler.h"'; do
    f=${planted%%:*}
    echo "${planted#*:}" > "$tmp/$f"
    if check "$tmp" > /dev/null; then echo "self-test: missed $planted"; exit 1; fi
    rm "$tmp/$f"
  done
  echo "self-test: planted violations caught"
  exit 0
fi

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if check "$root"; then
  echo "include directions: ok"
else
  exit 1
fi
