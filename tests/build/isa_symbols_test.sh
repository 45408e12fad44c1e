#!/usr/bin/env bash
# The per-ISA objects of the CPU loops (cmake/SnnComponent.cmake) define no
# global symbol outside their own SNN_ISA namespace. An inline function with
# external linkage compiled there (a std::vector member, std::min) is a weak
# symbol, and the linker keeps one copy of each for the whole library: the
# AVX-512 object's copy could then run for every caller, on a CPU without
# AVX-512 (SIGILL).
#   isa_symbols_test.sh OBJECT...   (each ISA object, its ISA in its path)
set -euo pipefail
# (CTest passes each target's objects as one ;-separated argument.)
objects=()
for arg in "$@"; do
  IFS=';' read -ra part <<<"$arg"
  objects+=("${part[@]}")
done
[[ ${#objects[@]} -gt 0 ]] || { echo "isa_symbols_test: no object files given" >&2; exit 2; }
bad=0
for obj in "${objects[@]}"; do
  [[ -f "$obj" ]] || { echo "isa_symbols_test: no such object: $obj" >&2; exit 2; }
  case "$obj" in
    *_avx512.dir/*) isa=avx512 ;;
    *_avx2.dir/*) isa=avx2 ;;
    *_base.dir/*) isa=base ;;
    *) echo "isa_symbols_test: cannot tell the ISA of $obj" >&2; exit 2 ;;
  esac
  # Defined global symbols: nm's upper-case types, and u (unique), V and W (weak).
  found=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[A-TV-Zuvw]$/ { $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
    grep -v -E "snn::[a-z_]+::detail::${isa}::" | grep -v -x "DW.ref.__gxx_personality_v0" || true)
  if [[ -n "$found" ]]; then
    echo "isa_symbols_test: $obj ($isa) defines global symbols outside namespace ...::detail::${isa}:" >&2
    echo "$found" | head -20 | sed 's/^/  /' >&2
    bad=1
  fi
done
[[ $bad -eq 0 ]] || exit 1
echo "isa_symbols_test: ${#objects[@]} objects, no global symbol outside their ISA namespace"
