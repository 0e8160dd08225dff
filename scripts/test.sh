#!/usr/bin/env bash
# `make test`: the static checks and pytest, every check run even when another fails, then a
# failure if any did. The static checks (ruff, mypy, lint-imports, vulture: about 45 s of one
# core) run alongside pytest, whose two workers leave about half of two cores idle while they
# wait on agents, servers and subprocesses; their output is printed, check by check, after it.
set -u
BIN=.venv/bin
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

static_checks() {
    local failed=""
    echo "== ruff check ."; $BIN/ruff check . || failed="$failed ruff"
    echo "== mypy"; $BIN/mypy || failed="$failed mypy"
    echo "== lint-imports"
    local out
    out=$($BIN/lint-imports --no-logo --no-cache 2>&1) && echo "$out" | grep KEPT \
        || { echo "$out"; failed="$failed lint-imports"; }
    echo "== vulture (dead code)"; $BIN/vulture mcd scripts/vulture_whitelist.py || failed="$failed vulture"
    echo "$failed" > "$logs/failed"
}

# Bytecode, written even where the environment says not to: every agent, controller and server
# the tests start is a new Python process importing mcd, and each compiled it again from source
# without it. Compiled once here (about 1 s); pytest's workers write their rewritten test modules.
unset PYTHONDONTWRITEBYTECODE
$BIN/python -m compileall -q -j 0 mcd sim/mcd_sim tests >/dev/null

static_checks > "$logs/static.log" 2>&1 &
checks=$!
failed=""
echo "== pytest -q -n auto --dist worksteal"
# worksteal: a worker left with the longest tests hands some to one that finished early
$BIN/python -m pytest -q -n auto --dist worksteal || failed=" pytest"
wait "$checks"
cat "$logs/static.log"
failed="$(cat "$logs/failed" 2>/dev/null || echo " static checks")$failed"
if [ -n "${failed// /}" ]; then echo "make test: FAILED:$failed"; exit 1; fi
echo "make test: ruff, mypy, lint-imports, vulture and pytest passed"
