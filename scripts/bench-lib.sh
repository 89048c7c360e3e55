# Helpers shared by the bench scripts (sourced, not run).
#
#   checked NAME OUT CMD...   runs CMD with stdout to OUT and stderr to OUT.err; a
#                             non-zero exit stops the whole run with NAME, the exit
#                             status, the command and the end of its stderr, so a
#                             crashing peer never shows up as a fast time
#   machine_line              one line: date, host architecture, CPU model, cores,
#                             memory, load average
#   ensure_cmake NAME         installs cmake and ninja-build with apt when cmake is missing
#   cyb_llm_into DIR          puts the cyb-llm under test at DIR/cyb-llm: $CYB_LLM_BIN where
#                             set, else a release build of this checkout

checked() {
  local name=$1 out=$2 rc=0
  shift 2
  "$@" >"$out" 2>"$out.err" || rc=$?
  if [ "$rc" != 0 ]; then
    {
      echo "bench: $name failed (exit $rc): $*"
      echo "bench: the end of its stderr ($out.err):"
      tail -n 20 "$out.err" | sed 's/^/  /'
    } >&2
    exit 1
  fi
}

machine_line() {
  local cpu mem
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
  mem=$(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)
  echo "$(date -u +%FT%TZ), $(uname -sm), ${cpu:-unknown cpu}, $(nproc) cpus, ${mem:-? GiB}," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
}

# ensure_cmake NAME: installs cmake and ninja with apt (as root or through sudo -n)
# when cmake is missing, so that building a peer needs no manual step.
ensure_cmake() {
  command -v cmake >/dev/null && return 0
  local as_root=""
  [ "$(id -u)" = 0 ] || as_root="sudo -n"
  echo "$1: installing cmake and ninja-build with apt" >&2
  $as_root apt-get update -qq && $as_root apt-get install -y -qq --no-install-recommends cmake ninja-build >&2 || {
    echo "$1: needs cmake (apt-get install -y cmake ninja-build failed)" >&2; exit 1; }
}

cyb_llm_into() {
  if [ -n "${CYB_LLM_BIN:-}" ]; then
    cp "$CYB_LLM_BIN" "$1/cyb-llm"
  else
    cargo build --release --quiet
    cp target/release/cyb-llm "$1/cyb-llm"
  fi
}
