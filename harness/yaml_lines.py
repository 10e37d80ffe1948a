"""Where a key is in a YAML file, for errors that name the file, the line and the field."""
from __future__ import annotations

from pathlib import Path

import yaml


def key_lines(node, prefix: str = "") -> dict[str, int]:
    """Line of every key in a YAML document: ``a``, ``a.b``, ``a[0]``, ``a[0].b``."""
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode):
                name = f"{prefix}.{k.value}" if prefix else str(k.value)
                lines[name] = k.start_mark.line + 1
                lines.update(key_lines(v, name))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            name = f"{prefix}[{i}]"
            lines[name] = item.start_mark.line + 1
            lines.update(key_lines(item, name))
    return lines


def located(path: Path, lines: dict[str, int], prefix: str = ""):
    """``where(key)``: "FILE:LINE: " for a (nested) key, or its nearest located parent."""
    def where(key: str) -> str:
        key = f"{prefix}{key}"
        while key not in lines and ("." in key or "[" in key):
            key = key.rsplit(".", 1)[0] if "." in key else key.rsplit("[", 1)[0]
        return f"{path}:{lines.get(key, 1)}: "
    return where
