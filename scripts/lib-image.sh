# Shared by scripts/build-image.sh and scripts/build-cloudflared-image.sh (sourced, not run):
# builds a FROM-scratch image holding one static binary with buildah, without a registry or a
# daemon, and writes it as an OCI archive that keeps the image name when imported
# (`ctr -n k8s.io images import`, `skopeo copy oci-archive:…`).

# scratch_image CACHE ARCHIVE IMAGE BINARY DEST USER ENTRYPOINT_JSON CMD_JSON [LABEL=VALUE...]
# Rebuilds ARCHIVE only when the binary or any argument changed (key file ARCHIVE.key).
# CMD_JSON may be empty (no default arguments). Progress goes to stderr.
scratch_image() {
  local cache=$1 archive=$2 image=$3 binary=$4 dest=$5 user=$6 entrypoint=$7 cmd=$8
  shift 8
  command -v buildah >/dev/null || {
    echo "buildah is required to build images: run scripts/install-image-deps.sh (apt-get install buildah)" >&2
    return 1
  }
  local arch
  case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac

  mkdir -p "$(dirname "$archive")" "$cache/buildah"
  local key
  key=$( { sha256sum "$binary" | cut -d' ' -f1; printf '%s\n' "$image" "$dest" "$user" "$entrypoint" "$cmd" "$arch" "$@"; declare -f scratch_image; } | sha256sum | cut -d' ' -f1)
  (
    flock 9
    if [ -s "$archive" ] && [ "$(cat "$archive.key" 2>/dev/null)" = "$key" ]; then
      echo "image $image is current: $archive" >&2
      exit 0
    fi
    # buildah keeps its own storage under the cache, apart from any system container storage.
    local bah=(buildah --root "$cache/buildah/root" --runroot "$cache/buildah/runroot" --storage-driver vfs)
    local policy=$cache/buildah/policy.json
    printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$policy"
    local ctr
    ctr=$("${bah[@]}" from --signature-policy "$policy" scratch)
    trap '"${bah[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
    "${bah[@]}" copy --chmod 0755 "$ctr" "$binary" "$dest" >/dev/null
    local config=(--user "$user" --entrypoint "$entrypoint" --workingdir / --os linux --arch "$arch"
      --created-by "COPY $(basename "$dest") $dest")
    [ -n "$cmd" ] && config+=(--cmd "$cmd")
    local label
    for label in "$@"; do config+=(--label "$label"); done
    "${bah[@]}" config "${config[@]}" "$ctr"
    "${bah[@]}" commit --quiet --signature-policy "$policy" --format oci --rm "$ctr" "$image" >/dev/null
    trap - EXIT
    rm -f "$archive.tmp"
    "${bah[@]}" push --quiet --signature-policy "$policy" "$image" "oci-archive:$archive.tmp:$image" >&2
    "${bah[@]}" rmi "$image" >/dev/null 2>&1 || true
    mv "$archive.tmp" "$archive"
    echo "$key" >"$archive.key"
    echo "built $image: $archive ($(du -h "$archive" | cut -f1))" >&2
  ) 9>"$archive.lock"
}
