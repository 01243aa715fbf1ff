#!/bin/bash
# idle.sh FOLDER ROUNDS LABEL: whole-process wall time of histeq on FOLDER from an idle GPU
# (3 s between runs), in turns each round: the defaults (`equalize --timing`), `--backend cpu`,
# and `bench --folder --tune router.measure=0` (the router deciding from its assumed CPU rate
# alone). Prints one line per run with the --timing start-up line. H names the histeq binary;
# outputs go to a temporary folder, removed at the end.
set -u
if [ $# -ne 3 ] || [ -z "${H:-}" ]; then
  echo "usage: H=path/to/histeq $0 FOLDER ROUNDS LABEL" >&2
  exit 2
fi
F=$1; R=$2; L=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$R"); do
  for v in policy cpu assumed; do
    out=$tmp/o_$v log=$tmp/log_$v
    rm -rf "$out"; sleep 3
    case $v in
      policy) a=(equalize "$F" -o "$out" --timing) ;;
      cpu) a=(equalize "$F" -o "$out" --timing --backend cpu) ;;
      assumed) a=(bench --folder "$F" -o "$out" --tune router.measure=0) ;;
    esac
    t0=$(date +%s.%N); "$H" "${a[@]}" > "$log" 2>&1; rc=$?; t1=$(date +%s.%N)
    w=$(python3 -c "print(f'{$t1-$t0:.3f}')")
    note=$(grep -hE "^start-up|^device |^wall_s|^device route" "$log" | tr '\n' ' ' | cut -c1-400)
    echo "$L round $r $v rc=$rc process_wall=$w | $note"
  done
done
