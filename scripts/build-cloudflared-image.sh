#!/usr/bin/env bash
# Builds a cloudflared image from a cloudflared binary, without a registry or a container daemon,
# the way an air-gapped user mirrors cloudflare/cloudflared: FROM scratch, the binary at
# /usr/local/bin/cloudflared, user 65532:65532, entrypoint `cloudflared --no-autoupdate`, default
# command `version` (the layout of the upstream image, so cftunnel's rendered `args` work as is).
#
#   CFTUNNEL_CLOUDFLARED=/path/to/cloudflared scripts/build-cloudflared-image.sh
#
# stdout: `image NAME:VERSION`, then, on the last line, the OCI archive's path. The tag is the
# binary's own version (`cloudflared --version`); the name is CLOUDFLARED_IMAGE_REPO (default
# mirror.local/cloudflare/cloudflared). Point cftunnel at it with `--cloudflared-image NAME:VERSION`
# (chart value `cloudflared.image`) after `ctr -n k8s.io images import ARCHIVE`.
# Cached under ${CFTUNNEL_CACHE:-~/.cache/cftunnel}/images. Needs buildah (scripts/install-image-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib-image.sh

binary=${CFTUNNEL_CLOUDFLARED:-}
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "CFTUNNEL_CLOUDFLARED must point at a cloudflared binary (linux, static; e.g. built from" >&2
  echo "github.com/cloudflare/cloudflared with CGO_ENABLED=0); got '${binary}'" >&2
  exit 1
fi
if ldd "$binary" 2>/dev/null | grep -q "=>"; then
  echo "$binary is dynamically linked; the scratch image needs a static binary (CGO_ENABLED=0)" >&2
  exit 1
fi
# "cloudflared version 2026.8.2 (built …)"
version=$("$binary" --version | sed -n 's/^cloudflared version \([0-9][0-9A-Za-z.+-]*\).*/\1/p' | head -n 1)
if [ -z "$version" ]; then
  echo "cannot read the version of $binary (\`$binary --version\` printed: $("$binary" --version 2>&1 | head -n 1))" >&2
  exit 1
fi
repo=${CLOUDFLARED_IMAGE_REPO:-mirror.local/cloudflare/cloudflared}
image=$repo:$version
cache=${CFTUNNEL_CACHE:-$HOME/.cache/cftunnel}
archive=$cache/images/cloudflared-$version.oci.tar

scratch_image "$cache" "$archive" "$image" "$binary" /usr/local/bin/cloudflared 65532:65532 \
  '["/usr/local/bin/cloudflared","--no-autoupdate"]' '["version"]' \
  org.opencontainers.image.title=cloudflared \
  "org.opencontainers.image.version=$version" \
  org.opencontainers.image.licenses=Apache-2.0
echo "image $image"
echo "$archive"
