#!/usr/bin/env bash
# doc_examples.sh — runs the command-line examples of Markdown files as written and compares
# what they print with what the files show (the CTest entry doc_examples runs it on README.md
# and docs/cli.md).
#
#   scripts/doc_examples.sh BIN_DIR FILE.md...
#
# An example is a ```console block: each line that starts with "$ " is a command (a line ending
# in "\" continues on the next), the lines after it up to the next command are what it prints
# (stdout and stderr together). All the examples of one file run in order in one fresh folder
# (so one may use what an earlier one wrote), which holds a copy of the repository's samples/;
# BIN_DIR (the built histeq) comes first on PATH, and CUDA_VISIBLE_DEVICES is empty, so every
# example runs on the CPU, as the docs show, on any machine. A command must exit 0: an example
# of a failure shows its exit status itself ("; echo "exit $?"").
#
# Before comparing, both sides are normalized: decimal numbers (timings, rates) become "#", runs
# of blanks one blank (numbers of other widths move the columns),
# "CPU (N threads)" becomes "CPU (N)", the machine's reason in "no usable CUDA device (...)" (and
# in "no usable CUDA device for the cuda backend (...)") goes, trailing blanks go, and the note
# "histeq: no usable CUDA device (...); running on the CPU" (or "; ran on the CPU") is taken out
# of both and only counted (see notes_agree), since it may come before or after the report line.
# A line "..." in the shown output matches any number of lines.
#
# A block that cannot run here is marked on the line just before its fence, and skipped with
# its reason printed:  <!-- examples: skip (needs a GPU) -->  or (needs the network), etc.
# Exit status: 0 when every example ran and printed what is shown, 1 otherwise, 2 usage.
set -u
if [ $# -lt 2 ]; then
  echo "usage: scripts/doc_examples.sh BIN_DIR FILE.md..." >&2
  exit 2
fi
BIN_DIR="$(cd "$1" && pwd)" || exit 2
shift
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -x "$BIN_DIR/histeq" ] || { echo "doc_examples: no histeq in $BIN_DIR" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/histeq-doc-examples-XXXXXX")" || exit 2
trap 'rm -rf "$WORK"' EXIT

# plan FILE: one record per line, fields separated by a tab:
#   B <line> <skip reason or empty>   a block starts
#   C <line> <command>                a command
#   O <line> <text>                   a line it prints
plan() {
  awk '
    function flush() { if (cmd != "") { print "C\t" cmd_line "\t" cmd; cmd = "" } }
    BEGIN { inblock = 0; marker = ""; cont = 0 }
    !inblock && /^```console[ \t]*$/ {
      reason = ""
      if (marker ~ /<!-- *examples: *skip/) {
        reason = marker
        sub(/^.*examples: *skip */, "", reason)
        sub(/ *-->.*$/, "", reason)
        sub(/^\(/, "", reason)
        sub(/\)$/, "", reason)
        if (reason == "") reason = "marked skip"
      }
      print "B\t" NR "\t" reason
      inblock = 1; cmd = ""; cont = 0
      next
    }
    inblock && /^```[ \t]*$/ { flush(); inblock = 0; marker = ""; next }
    inblock {
      if (cont) {
        line = $0
        cont = sub(/\\$/, "", line)
        cmd = cmd " " line
        next
      }
      if (substr($0, 1, 2) == "$ ") {
        flush()
        cmd = substr($0, 3); cmd_line = NR
        cont = sub(/\\$/, "", cmd)
        next
      }
      flush()
      print "O\t" NR "\t" $0
      next
    }
    /[^ \t]/ { marker = $0 }
  ' "$1"
}

# normalize < text > text
normalize() {
  sed -E -e 's/[ \t]+$//' \
         -e 's/(no usable CUDA device[^()]*)\([^)]*\)/\1(...)/g' \
         -e 's/[0-9]+\.[0-9]+/#/g' \
         -e 's/CPU \([0-9]+ threads?\)/CPU (N)/g' \
         -e 's/  +/ /g' |
    grep -v -E '^histeq: no usable CUDA device \(.*\); (running|ran) on the CPU$'
}

notes() { grep -c -E '^histeq: no usable CUDA device \(.*\); (running|ran) on the CPU$' || true; }

# notes_agree SHOWN PRINTED: whether the no-GPU notes printed agree with those shown. Where a
# CUDA driver is installed (/dev/nvidiactl: a GPU machine, its devices hidden here), finding
# that no device is visible takes the driver's start-up, and a small example may finish on the
# CPU before that: the note may then be missing. Without a driver (the docs' machine) the answer
# is immediate and the note must be there.
notes_agree() {
  if [ -e /dev/nvidiactl ]; then
    [ "$2" -le "$1" ]
  else
    [ "$2" -eq "$1" ]
  fi
}

# matches SHOWN ACTUAL: the shown lines, "..." matching any run of lines, against the actual ones.
matches() {
  awk -v shown="$1" '
    BEGIN {
      n = 0
      while ((getline line < shown) > 0) pat[++n] = line
    }
    { act[++m] = $0 }
    function match_from(i, j,   k) {
      if (i > n) return j > m
      if (pat[i] == "...") {
        for (k = j; k <= m + 1; ++k) if (match_from(i + 1, k)) return 1
        return 0
      }
      if (j > m || act[j] != pat[i]) return 0
      return match_from(i + 1, j + 1)
    }
    END { exit match_from(1, 1) ? 0 : 1 }
  ' "$2"
}

# run_pending: runs the collected command in $dir and compares its output with the shown one.
run_pending() {
  [ -n "$pending" ] || return 0
  ran=$((ran + 1))
  (cd "$dir" && PATH="$BIN_DIR:$PATH" CUDA_VISIBLE_DEVICES= LC_ALL=C \
     bash -c "$pending" >"$WORK/actual" 2>&1 </dev/null)
  local rc=$?
  local why=""
  if [ "$rc" -ne 0 ]; then
    why="exit status $rc"
  elif ! notes_agree "$(notes <"$WORK/shown")" "$(notes <"$WORK/actual")"; then
    why="the no-GPU note is shown $(notes <"$WORK/shown") times, printed $(notes <"$WORK/actual")"
  else
    normalize <"$WORK/shown" >"$WORK/shown.n"
    normalize <"$WORK/actual" >"$WORK/actual.n"
    matches "$WORK/shown.n" "$WORK/actual.n" || why="different output"
  fi
  if [ -n "$why" ]; then
    failures=$((failures + 1))
    echo "FAIL $rel:$pending_line: $pending"
    echo "  ($why)"
    echo "  --- shown (normalized) ---"
    normalize <"$WORK/shown" | sed 's/^/  /'
    echo "  --- printed ---"
    sed 's/^/  /' "$WORK/actual"
  fi
  pending=""
  : >"$WORK/shown"
}

failures=0
ran=0
skipped=0
for file in "$@"; do
  rel="${file#"$ROOT"/}"
  dir="$WORK/$(basename "$file" .md)"
  mkdir -p "$dir" && cp -R "$ROOT/samples" "$dir/samples"
  plan "$file" >"$WORK/plan" || exit 2
  skip=""
  pending=""      # the command whose shown output is being collected
  pending_line=""
  : >"$WORK/shown"
  while IFS=$'\t' read -r kind line text; do
    case "$kind" in
      B)
        run_pending
        skip="$text"
        ;;
      C)
        run_pending
        if [ -n "$skip" ]; then
          skipped=$((skipped + 1))
          echo "skipped $rel:$line ($skip): $text"
        else
          pending="$text"
          pending_line="$line"
        fi
        ;;
      O)
        [ -n "$pending" ] && printf '%s\n' "$text" >>"$WORK/shown"
        ;;
    esac
  done <"$WORK/plan"
  run_pending
done
echo "doc_examples: $ran examples run, $failures failed, $skipped skipped (marked)"
[ "$failures" -eq 0 ] && [ "$ran" -gt 0 ]
