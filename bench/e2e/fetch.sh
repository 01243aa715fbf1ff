#!/bin/sh
# fetch.sh DIR — the photographs of the end-to-end benchmark (bench/e2e/run.py):
# Debian's plasma-workspace-wallpapers (apt-get download, no root needed), per wallpaper the
# largest JPEG at least 2560 pixels wide into DIR/jpg/NAME.jpg, and a PNG copy of each in
# DIR/png/NAME.png (written by OpenCV, python3 -m pip install opencv-python-headless).
# Photos are never committed: DIR should be outside the repository, or bench/e2e/photos (ignored).
# When DIR/jpg already holds JPEGs (e.g. copied to a machine without a package registry), the
# download is skipped and only the PNG copies are made.
set -eu
if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: $0 DIR   (downloads plasma-workspace-wallpapers; writes DIR/jpg and DIR/png)" >&2
  exit 2
fi
dir=$1
mkdir -p "$dir/jpg" "$dir/png"
if ls "$dir"/jpg/*.jpg >/dev/null 2>&1; then
  echo "$dir/jpg already holds JPEGs: no download"
else
mkdir -p "$dir/deb"
if ! ls "$dir"/deb/plasma-workspace-wallpapers_*.deb >/dev/null 2>&1; then
  (cd "$dir/deb" && apt-get download plasma-workspace-wallpapers)
fi
rm -rf "$dir/x"
dpkg -x "$dir"/deb/plasma-workspace-wallpapers_*.deb "$dir/x"
for wp in "$dir"/x/usr/share/wallpapers/*/; do
  name=$(basename "$wp")
  best=""
  bestw=0
  for f in "$wp"contents/images/*.jpg; do
    [ -e "$f" ] || continue
    w=$(basename "$f" .jpg | cut -dx -f1)
    case $w in ''|*[!0-9]*) continue ;; esac
    if [ "$w" -ge 2560 ] && [ "$w" -gt "$bestw" ]; then best=$f; bestw=$w; fi
  done
  [ -n "$best" ] && cp "$best" "$dir/jpg/$name.jpg"
done
rm -rf "$dir/x"
fi
python3 - "$dir" <<'PY'
import sys, pathlib, cv2
d = pathlib.Path(sys.argv[1])
for j in sorted((d / "jpg").glob("*.jpg")):
    p = d / "png" / (j.stem + ".png")
    if not p.exists():
        cv2.imwrite(str(p), cv2.imread(str(j), cv2.IMREAD_COLOR))
PY
echo "$(ls "$dir/jpg" | wc -l) JPEGs in $dir/jpg, $(ls "$dir/png" | wc -l) PNGs in $dir/png"
