"""Python stack frames: normalisation, splitting, and interning into stack ids."""

from __future__ import annotations

import re

import xxhash

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_FILE_LINE_FUNC = re.compile(r"^(.*)\((\d+)\): (.*)$", re.S)
_TWO_63 = 1 << 63
_TWO_64 = 1 << 64


def normalize(frame: str) -> str:
    """Drop per-process memory addresses (`<built-in method to of Tensor object at 0x7f..>`)."""
    return _ADDRESS.sub("", frame) if " at 0x" in frame else frame


def split_frame(frame: str) -> tuple[str | None, int | None, str]:
    """`file.py(12): func` -> (file, 12, func); other frames -> (None, None, frame)."""
    m = _FILE_LINE_FUNC.match(frame)
    if not m:
        return None, None, frame
    return m.group(1), int(m.group(2)), m.group(3)


def _node_id(frame: str, parent: int) -> int:
    h = xxhash.xxh3_64_intdigest(parent.to_bytes(8, "little", signed=True) + frame.encode("utf-8", "surrogatepass"))
    if h >= _TWO_63:
        h -= _TWO_64
    return h or 1


class StackInterner:
    """Stacks as a trie of (frame, parent stack): a stack's id depends only on its frames.

    Ids are hashes, so separate processes agree on them without talking to each other.
    Id 0 is the empty stack.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int], int] = {}
        self.nodes: dict[int, tuple[str, int]] = {}

    def push(self, frame: str, parent: int) -> int:
        """The id of the stack `frame` called from stack `parent` (frame already normalised)."""
        key = (frame, parent)
        node = self._cache.get(key)
        if node is None:
            node = _node_id(frame, parent)
            self._cache[key] = node
            self.nodes[node] = key
        return node

    def from_call_stack(self, text: str) -> int:
        """The id of a `Call stack` arg: frames innermost first, `;`-separated."""
        node = 0
        for frame in reversed(text.split(";")):
            if frame:
                node = self.push(normalize(frame), node)
        return node

    def frames(self, node: int) -> list[str]:
        """Frames of a stack, innermost first."""
        out = []
        while node:
            frame, node = self.nodes[node]
            out.append(frame)
        return out
