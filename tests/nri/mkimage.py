"""The busybox OCI image archive tests/nri/run.sh imports into containerd.

usage: python3 mkimage.py BUSYBOX NAME OUT.tar

One uncompressed layer (bin/busybox, bin/sh, the usual mount points), an
entrypoint that sleeps, and an index whose `io.containerd.image.name`
annotation is the name `ctr images import` gives it. Standard library only;
every mtime is 0, so the same busybox gives the same digest. The image is
both the sandbox ("pause") image and the containers' image.
"""

import hashlib
import io
import json
import sys
import tarfile


def add(tar, path, data=None, kind=tarfile.REGTYPE, target="", mode=0o755):
    info = tarfile.TarInfo(path)
    info.type, info.linkname, info.mode, info.mtime = kind, target, mode, 0
    if data is None:
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def digest(blob):
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def main(busybox, name, out):
    with open(busybox, "rb") as f:
        binary = f.read()
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for d in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            add(layer, d, kind=tarfile.DIRTYPE)
        add(layer, "bin/busybox", binary)
        add(layer, "bin/sh", kind=tarfile.SYMTYPE, target="busybox")
    layer = layer_buf.getvalue()
    config = canonical({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/bin/busybox", "sleep", "2147483647"]},
        "rootfs": {"type": "layers", "diff_ids": [digest(layer)]},
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": digest(layer), "size": len(layer)}],
    })
    index = canonical({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": digest(manifest), "size": len(manifest),
                       "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"io.containerd.image.name": name}}],
    })
    with tarfile.open(out, "w") as archive:
        add(archive, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}', mode=0o644)
        add(archive, "index.json", index, mode=0o644)
        for blob in (layer, config, manifest):
            add(archive, "blobs/sha256/" + digest(blob)[len("sha256:"):], blob, mode=0o644)
    print(name, digest(manifest))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2])
    main(*sys.argv[1:])
