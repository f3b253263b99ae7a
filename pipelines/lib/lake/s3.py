"""Object storage reached the standard AWS way: AWS_ENDPOINT_URL (an S3-compatible server such as
SeaweedFS or MinIO), AWS_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or the SDK's
own chain (profile, instance role) when no keys are set. Credentials are passed to the clients, never
printed, logged or written into a message."""

from __future__ import annotations

import os

import pyarrow.fs as pafs


def _env(*names: str) -> str | None:
    for n in names:
        v = os.environ.get(n, "").strip()
        if v:
            return v
    return None


def endpoint() -> str | None:
    return _env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def region() -> str:
    return _env("AWS_REGION", "AWS_DEFAULT_REGION") or "us-east-1"


def storage_options() -> dict[str, str]:
    """deltalake's (object_store's) options for the lake."""
    opts = {"AWS_REGION": region()}
    url = endpoint()
    if url:
        opts["AWS_ENDPOINT_URL"] = url
        if url.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        v = _env(name)
        if v:
            opts[name] = v
    return opts


def pyarrow_fs() -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem for writing and reading the lake's files."""
    url = endpoint()
    kwargs: dict = {"region": region()}
    if url:
        scheme, _, rest = url.partition("://")
        kwargs.update(endpoint_override=rest, scheme=scheme)
    if _env("AWS_ACCESS_KEY_ID"):
        kwargs.update(
            access_key=_env("AWS_ACCESS_KEY_ID"),
            secret_key=_env("AWS_SECRET_ACCESS_KEY"),
            session_token=_env("AWS_SESSION_TOKEN"),
        )
    return pafs.S3FileSystem(**kwargs)


def fsspec_fs():
    """An fsspec S3 filesystem (DuckDB registers it; locks use its conditional writes)."""
    import s3fs

    return s3fs.S3FileSystem(
        endpoint_url=endpoint(),
        key=_env("AWS_ACCESS_KEY_ID"),
        secret=_env("AWS_SECRET_ACCESS_KEY"),
        token=_env("AWS_SESSION_TOKEN"),
        client_kwargs={"region_name": region()},
        skip_instance_cache=True,
    )
