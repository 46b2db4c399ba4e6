#!/usr/bin/env bash
# Checks that every C++ source of the repository (*.h, *.cc; generated code
# lives in build trees and is skipped) is formatted as .clang-format says.
# Usage: check_format.sh CLANG_FORMAT REPO_ROOT. Exit 1 listing each file
# that is not, with the first few differences.
set -euo pipefail
clang_format="$1"
root="$2"
cd "$root"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked and new files, minus what .gitignore excludes (build*/).
  mapfile -t files < <(git ls-files --cached --others --exclude-standard \
    -- '*.h' '*.cc' | sort -u)
else
  mapfile -t files < <(find . -path './build*' -prune -o -path './.git' \
    -prune -o \( -name '*.h' -o -name '*.cc' \) -print | sed 's|^\./||' | sort)
fi

bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted but still tracked
  if ! "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done

echo "check_format: ${#files[@]} files checked with $("$clang_format" --version)"
if [ ${#bad[@]} -eq 0 ]; then
  exit 0
fi
echo "check_format: ${#bad[@]} file(s) not formatted; fix with:"
echo "  $clang_format -i ${bad[*]}"
for f in "${bad[@]}"; do
  echo "--- $f"
  "$clang_format" --dry-run "$f" 2>&1 | head -n 12 || true
done
exit 1
