"""An S3 endpoint on loopback (moto's server), for the shard store's tests.

``S3Endpoint`` starts moto's threaded server on 127.0.0.1 and a bucket in it; ``env`` is
what a node's environment gives the storage client (the endpoint, made-up credentials),
set by the tests with monkeypatch and passed to Ray workers the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["S3Endpoint"]


class S3Endpoint:
    """moto's S3 server on a free loopback port, holding one bucket."""

    def __init__(self, bucket: str = "kgcheck-runs") -> None:
        from moto.server import ThreadedMotoServer

        self.bucket = bucket
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        self.env = {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_DEFAULT_REGION": "us-east-1"}
        self.fs().mkdir(bucket)

    def fs(self) -> Any:
        """A client of this endpoint (not fsspec's cached one, so tests see fresh listings)."""
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.url, key=self.env["AWS_ACCESS_KEY_ID"],
                                 secret=self.env["AWS_SECRET_ACCESS_KEY"],
                                 skip_instance_cache=True)

    def uri(self, path: str) -> str:
        """Return the s3:// URI of ``path`` in the bucket."""
        return f"s3://{self.bucket}/{path.strip('/')}"

    def stop(self) -> None:
        """Stop the server."""
        self._server.stop()
