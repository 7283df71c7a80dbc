#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The main job: install dependencies, build polstore (Release) and run the
# stress benchmark's default scenario.  Extra arguments go to polstore-stress,
# e.g. scripts/bench.sh --sweep 1,2,4,16 --json
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
log=build-release.log
echo "polstore: building (Release) into build-release/, log in $log" >&2
if ! { cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DPOLSTORE_BUILD_TESTS=OFF &&
	cmake --build build-release -j"$(nproc)" --target polstore-stress; } >"$log" 2>&1; then
	cat "$log" >&2
	exit 1
fi
exec build-release/stress/polstore-stress "$@"
