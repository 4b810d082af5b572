"""Fixtures shared by several test modules."""

from redis_servers import any_url, cluster_url, redis_server, redis_url  # noqa: F401
