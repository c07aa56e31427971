#!/usr/bin/env bash
# Screenshot of the *bundled* desktop app under Xvfb (real X server, xcb platform plugin):
#   packaging/screenshot_bundle.sh [BUNDLE_EXE] [OUT_PNG]
# Defaults: dist/maka/maka -> docs/screenshots/bundled-app.png. Needs xvfb, xdotool, imagemagick.
# Two demo sessions are created first (offline demo provider) so the window shows real content.
set -euo pipefail
cd "$(dirname "$0")/.."
exe=$(realpath "${1:-dist/maka/maka}")
out=$(realpath -m "${2:-docs/screenshots/bundled-app.png}")
work=$(mktemp -d)
display=":$((90 + RANDOM % 50))"
xvfb_pid=""
gui_pid=""
cleanup() {
    [ -n "$gui_pid" ] && kill "$gui_pid" 2>/dev/null && wait "$gui_pid" 2>/dev/null
    [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
export MAKA_DATA_DIR="$work/data"
unset QT_QPA_PLATFORM
mkdir -p "$work/project"
(cd "$work/project" &&
    "$exe" run --cwd . --provider demo --permission-mode auto "write hello.txt saying hi" &&
    "$exe" run --cwd . --provider demo --permission-mode auto "run ls -la") >/dev/null 2>&1
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb_pid=$!
sleep 1
DISPLAY=$display "$exe" >"$work/gui.log" 2>&1 &
gui_pid=$!
window=""
for _ in $(seq 1 100); do
    window=$(DISPLAY=$display xdotool search --name " — Maka" 2>/dev/null | head -1 || true)
    [ -n "$window" ] && break
    sleep 0.2
done
[ -n "$window" ] || { echo "no Maka window appeared; log:" >&2; cat "$work/gui.log" >&2; exit 1; }
sleep 2  # let the transcript load and paint
DISPLAY=$display import -window "$window" "$out"
echo "screenshot: $out"
