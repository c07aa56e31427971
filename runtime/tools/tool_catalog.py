"""The tool catalog: which tools exist in this host, by name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runtime.providers.provider_port import ToolSpec
from runtime.tools.bash_tool import BashTool
from runtime.tools.file_tools import EditFileTool, ReadFileTool, WriteFileTool
from runtime.tools.listing_tools import GlobTool, ListDirTool
from runtime.tools.tool_contract import Tool


class ToolCatalog:
    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name}")
            self._tools[tool.name] = tool

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._tools))

    def tools(self) -> Mapping[str, Tool[Any]]:
        return dict(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(
            ToolSpec(tool.name, tool.description, tool.parameters)
            for tool in sorted(self._tools.values(), key=lambda t: t.name)
        )


def default_catalog() -> ToolCatalog:
    return ToolCatalog(
        [ReadFileTool(), WriteFileTool(), EditFileTool(), ListDirTool(), GlobTool(), BashTool()]
    )
