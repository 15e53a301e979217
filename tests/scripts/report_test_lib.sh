# Sourced by the reproduction-report tests (test_*_report.sh): strict mode, root (the
# repository), tmp (a scratch folder removed on exit), fail, and expect FILE LINE (FILE, relative
# to tmp, must hold LINE as a fixed string; a miss is printed and sets fail). End with exit $fail.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { grep -qF -- "$2" "$tmp/$1" || { echo "missing in $1: $2" >&2; fail=1; }; }
