# The peer checkouts the peer scripts need, checked before anything is
# built or run; sourced after the script `cd`s to the repository's root,
# with `script` naming the caller (for messages). Each function exits 2
# with a message saying what to set when its checkout is not usable.
#
#   dramsim3_dir    DRAMSIM3_DIR: a DRAMSim3 checkout built with cmake;
#                   sets d3 (build/dramsim3main) and ini (its stock
#                   DDR4_8Gb_x8_2400.ini).
#   ramulator2_dir  RAMULATOR2_DIR: a Ramulator 2 checkout built with its
#                   Python bindings (python/ramulator/_ramulator*.so);
#                   sets py (RAMULATOR2_PYTHON, default python3), which
#                   must import them and PyYAML.
dramsim3_dir() {
    if [[ -z "${DRAMSIM3_DIR:-}" || ! -x "$DRAMSIM3_DIR/build/dramsim3main" ]]; then
        echo "$script: set DRAMSIM3_DIR to a DRAMSim3 checkout built with cmake (build/dramsim3main)" >&2
        exit 2
    fi
    d3="$DRAMSIM3_DIR/build/dramsim3main"
    ini="$DRAMSIM3_DIR/configs/DDR4_8Gb_x8_2400.ini"
    [[ -f "$ini" ]] || { echo "$script: $ini not found" >&2; exit 2; }
}

ramulator2_dir() {
    if [[ -z "${RAMULATOR2_DIR:-}" ]] || ! compgen -G "$RAMULATOR2_DIR/python/ramulator/_ramulator*.so" > /dev/null; then
        echo "$script: set RAMULATOR2_DIR to a Ramulator 2 checkout built with cmake and its Python bindings (python/ramulator/_ramulator*.so)" >&2
        exit 2
    fi
    py="${RAMULATOR2_PYTHON:-python3}"
    if ! PYTHONPATH="$RAMULATOR2_DIR/python" "$py" -c 'import yaml, ramulator._ramulator' 2> /dev/null; then
        echo "$script: $py cannot import ramulator._ramulator from $RAMULATOR2_DIR/python and yaml (set RAMULATOR2_PYTHON to the Python it was built for, with PyYAML)" >&2
        exit 2
    fi
}
