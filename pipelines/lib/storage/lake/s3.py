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


def fsspec_fs(**config):
    """An fsspec S3 filesystem (DuckDB registers it; locks use its conditional writes); ``config``: botocore
    client settings (timeouts, retries)."""
    import s3fs

    return s3fs.S3FileSystem(
        endpoint_url=endpoint(),
        key=_env("AWS_ACCESS_KEY_ID"),
        secret=_env("AWS_SECRET_ACCESS_KEY"),
        token=_env("AWS_SESSION_TOKEN"),
        client_kwargs={"region_name": region()},
        config_kwargs=config or None,
        skip_instance_cache=True,
    )


def redact(text: str) -> str:
    """``text`` without any credential of the environment in it."""
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = _env(name)
        if value:
            text = text.replace(value, "***")
    return text


def probe(uri: str) -> None:
    """List the lake's prefix once, quickly: raises what the store answered (unreachable, refused)."""
    fs = fsspec_fs(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2})
    bucket = uri[5:].split("/", 1)[0]
    fs.ls(bucket, refresh=True)
