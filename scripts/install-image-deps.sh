#!/usr/bin/env bash
# Installs what building and running the images needs on a Debian machine: buildah (builds the
# FROM-scratch images without a registry or daemon) and runc (tests/image.rs runs the image with it).
# A no-op when both are present.
set -euo pipefail
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v runc >/dev/null || missing+=(runc)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "install ${missing[*]} (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
