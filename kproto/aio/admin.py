"""AIOAdmin: :class:`~kproto.admin.Admin`'s calls, awaited.

Every Admin call is a few request/answer exchanges and nothing else; here each
runs in a worker thread (the loop stays free), one at a time per client. The
names, arguments and results are the Admin's (docs/client.md): ``await
admin.create_topics({"events": 3})``, ``await admin.list_offsets(...)``,
``await admin.describe_configs(...)``...
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..admin import Admin
from .driver import AsyncioDriver
from .locks import Serial

__all__ = ["AIOAdmin"]


class AIOAdmin:
    """The Admin client for asyncio: every public method of
    :class:`~kproto.admin.Admin` as a coroutine, run in a worker thread.

    >>> async with AIOAdmin(bootstrap_servers="127.0.0.1:9092") as admin:  # doctest: +SKIP
    ...     await admin.create_topics({"events": 3})
    ...     topics = await admin.list_topics()
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._admin = Admin(config, **settings)
        self.config = self._admin.config
        self._serial = Serial(AsyncioDriver())

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._admin, name)
        if not callable(method):
            raise AttributeError(f"{name!r} is not an Admin call")

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._serial.offload(lambda: method(*args, **kwargs))

        call.__name__ = call.__qualname__ = name
        call.__doc__ = method.__doc__
        return call

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(self._admin)
                                                if not n.startswith("_")})

    async def close(self) -> None:
        """Close the connections."""
        await self._serial.offload(self._admin.close)

    async def __aenter__(self) -> AIOAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AIOAdmin {self._admin!r}>"
