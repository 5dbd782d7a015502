"""A pull-only container registry over one OCI image layout, for the local real node.

    python3 hack/lib/oci_registry.py LAYOUT_DIR PORT_FILE

Serves the images of LAYOUT_DIR (an OCI image layout whose index.json names each manifest in
the annotation io.containerd.image.name, e.g. docker.io/library/busybox:latest) on 127.0.0.1, on
a free port that it writes to PORT_FILE. The node's containerd uses it as the only host of the
registries in question (hosts.toml, path /<registry>/v2/...), so that a Pod whose image pull
policy is Always (`image: busybox` has no tag, so its default policy is Always) starts from the
locally built image instead of failing to reach docker.io. Read-only: manifests and blobs, GET
and HEAD. index.json is read on every request, so images added later are served at once.
"""

from __future__ import annotations

import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NAME_ANNOTATION = "io.containerd.image.name"
PATH = re.compile(r"(?:/(?P<ns>[^/]+))?/v2/(?P<repo>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class Handler(BaseHTTPRequestHandler):
    layout = "."

    def log_message(self, format: str, *args: object) -> None:  # one line per request
        sys.stderr.write("registry: " + (format % args) + "\n")

    def do_GET(self) -> None:
        self.serve(with_body=True)

    def do_HEAD(self) -> None:
        self.serve(with_body=False)

    def reply(
        self, code: int, data: bytes, ctype: str, digest: str = "", body: bool = True
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def not_found(self, body: bool) -> None:
        error = {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "not in the local layout"}]}
        self.reply(404, json.dumps(error).encode(), "application/json", body=body)

    def blob(self, digest: str) -> bytes | None:
        if not DIGEST.fullmatch(digest):
            return None
        try:
            with open(os.path.join(self.layout, "blobs", "sha256", digest[7:]), "rb") as f:
                return f.read()
        except OSError:
            return None

    def serve(self, with_body: bool) -> None:
        url = urlsplit(self.path)
        if url.path.rstrip("/").endswith("/v2"):
            self.reply(200, b"{}", "application/json", body=with_body)
            return
        match = PATH.fullmatch(url.path)
        if not match:
            self.not_found(with_body)
            return
        ns = match["ns"] or parse_qs(url.query).get("ns", ["docker.io"])[0]
        repo, kind, ref = match["repo"], match["kind"], match["ref"]
        if kind == "blobs":
            data = self.blob(ref)
            if data is None:
                self.not_found(with_body)
            else:
                self.reply(200, data, "application/octet-stream", ref, with_body)
            return
        with open(os.path.join(self.layout, "index.json"), encoding="utf-8") as f:
            index = json.load(f)
        wanted = f"{ns}/{repo}:{ref}"
        for desc in index.get("manifests", []):
            name = (desc.get("annotations") or {}).get(NAME_ANNOTATION)
            if name == wanted or desc.get("digest") == ref:
                data = self.blob(desc["digest"])
                if data is not None:
                    self.reply(200, data, desc["mediaType"], desc["digest"], with_body)
                    return
        data = self.blob(ref)  # a manifest named by digest that the index does not list
        if data is None:
            self.not_found(with_body)
            return
        ctype = json.loads(data).get("mediaType", "application/vnd.oci.image.manifest.v1+json")
        self.reply(200, data, ctype, ref, with_body)


def main() -> None:
    layout, port_file = sys.argv[1], sys.argv[2]
    Handler.layout = layout
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{server.server_address[1]}\n")
    os.replace(tmp, port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
