#!/usr/bin/env bash
# check_period_words.sh — the repository speaks of the product: no text, file or folder name
# names a period of work (a session, a sprint, a day's diary). History is git's. Fails naming
# each file:line (or path) that uses a word of the list below; .ci/run and the CTest entry
# period_words run it.
#
#   scripts/check_period_words.sh [PATH...]     (default: the whole tracked tree)
#
# The words (case-insensitive): session(s) and "Nth session", sprint(s), work period(s),
# period(s) of work, diary/diaries, journal, logbook, lab notebook, today, yesterday. Allowed:
# pytest's fixture scope `scope="session"`, a name of its API.
# Files are the tracked ones (git ls-files) in a git checkout, else every file under the tree.
# Exit status: 0 none found, 1 found, 2 usage.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2

WORDS='\bsessions?|\bsprints?\b|\bwork[ -]periods?\b|\bperiods? of work\b|\bdiar(y|ies)\b|\bjournal|\blogbooks?\b|\blab notebooks?\b|\btoday\b|\byesterday\b'
ALLOWED='scope="session"'

if [ $# -gt 0 ]; then
  paths=("$@")
else
  paths=(.)
fi
skip='^scripts/check_period_words\.sh:'   # this file names the words

# hits: "file:line:text" of every use in the files' text; names: the paths themselves.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  hits=$(git grep -n -I -i -E "$WORDS" -- "${paths[@]}" | grep -v -E "$skip" |
           grep -v -F "$ALLOWED")
  listed=$(git ls-files -- "${paths[@]}" | grep -v -E "$skip")
else
  # A copy without git (e.g. the GPU machine's): every file, less the build folders at the root, the
  # hidden folders that hold what was carried beside the tree (.deps, bundles); .ci, .github kept.
  listed=$(find "${paths[@]}" \( -type d \( -name .git -o -path './build*' -o \
             \( -name '.?*' -not -name .ci -not -name .github \) \) \) -prune -o -type f -print |
             sed 's|^\./||' | grep -v -E "$skip")
  hits=$(printf '%s\n' "$listed" | tr '\n' '\0' |
           xargs -0 grep -H -n -I -i -E "$WORDS" -- 2>/dev/null | grep -v -E "$skip" |
           grep -v -F "$ALLOWED")
fi
names=$(printf '%s\n' "$listed" | grep -i -E "$WORDS")
checked=$(printf '%s\n' "$listed" | grep -c .)

found=0
if [ -n "$names" ]; then
  while IFS= read -r f; do
    echo "$f: the path names a period of work"
    found=$((found + 1))
  done <<<"$names"
fi
if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  found=$((found + $(printf '%s\n' "$hits" | wc -l)))
fi
if [ "$found" -gt 0 ]; then
  echo "check_period_words: $found uses of words that name periods of work in $checked files" \
       "(say what the product does and why; history is git's)" >&2
  exit 1
fi
echo "check_period_words: none of the $checked files checked names a period of work"
