# shellcheck shell=bash
# Sourced first by each script with its arguments: `. "$(dirname "${BASH_SOURCE[0]}")/help.sh" "$@"`.
# With -h or --help among them it prints the script's usage, its header comment (the lines after the
# shebang up to the first line that is not a comment), and exits 0 before the script does anything else.
for _arg in "$@"; do
  if [[ $_arg == -h || $_arg == --help ]]; then
    sed -n '2,/^[^#]/{/^#/!d;/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"
    exit 0
  fi
done
unset _arg
