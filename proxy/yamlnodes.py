"""YAML text to PyYAML's node tree, without recursion and with a limit on nesting.

Both of PyYAML's composers recurse once per nesting level: the pure-Python one raises RecursionError a
few hundred levels down, and the libyaml one (Cython) overflows the C stack and kills the process.
This composer builds the same nodes (tags resolved by the safe loader, anchors and aliases, marks for
line numbers) from PyYAML's own event stream, libyaml's parser where it is installed, with an explicit
stack; past `MAX_DEPTH` levels it stops at once, naming the line. It is also several times faster
than the pure-Python composer on a large config (thousands of rules).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["MAX_DEPTH", "TooDeep", "compose", "release"]

MAX_DEPTH = 100  # levels of mappings and sequences; a config needs about ten
_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class TooDeep(ValueError):
    """Nesting past MAX_DEPTH; `line` (1-based) is where it went past."""

    def __init__(self, line: int) -> None:
        self.line = line
        super().__init__(f"nested more than {MAX_DEPTH} levels deep")


class _Open:
    """A collection being composed, and a mapping's key waiting for its value."""

    __slots__ = ("key", "node")

    def __init__(self, node: CollectionNode) -> None:
        self.node = node
        self.key: Node | None = None

    def add(self, child: Node) -> None:
        node = self.node
        if isinstance(node, SequenceNode):
            node.value.append(child)
        elif self.key is None:
            self.key = child
        else:
            node.value.append((self.key, child))
            self.key = None


def compose(text: str) -> Node | None:
    """The node tree of the single YAML document in `text` (None when empty), as `yaml.compose` with the
    safe loader gives it. Raises yaml.YAMLError (with a mark) for bad YAML, TooDeep past MAX_DEPTH."""
    resolver = yaml.SafeLoader("")  # tag resolution only
    try:
        return _compose(text, resolver)
    finally:
        resolver.dispose()


def _compose(text: str, resolver: yaml.SafeLoader) -> Node | None:
    anchors: dict[str, Node] = {}
    stack: list[_Open] = []
    root: Node | None = None
    document: Any = None  # the document's start mark
    for event in yaml.parse(text, Loader=_LOADER):
        # Any: the stubs type libyaml's marks apart from PyYAML's, yet the nodes take either.
        start: Any = event.start_mark
        end: Any = event.end_mark
        node: Node
        if isinstance(event, ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolver.resolve(ScalarNode, event.value, event.implicit)
            node = ScalarNode(tag, event.value, start, end, style=event.style)
        elif isinstance(event, CollectionStartEvent):
            kind = SequenceNode if isinstance(event, SequenceStartEvent) else MappingNode
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolver.resolve(kind, None, event.implicit)
            node = kind(tag, [], start, None, flow_style=event.flow_style)
        elif isinstance(event, SequenceEndEvent | MappingEndEvent):
            stack.pop().node.end_mark = end
            continue
        elif isinstance(event, AliasEvent):
            if event.anchor not in anchors:
                raise ComposerError(None, None, f"found undefined alias {event.anchor!r}", start)
            node = anchors[event.anchor]
        elif isinstance(event, DocumentStartEvent):
            if document is not None:
                raise ComposerError(
                    "expected a single document in the stream", document, "but found another document", start
                )
            document = start
            continue
        else:  # stream and document ends
            continue
        anchor = getattr(event, "anchor", None)
        if anchor is not None and not isinstance(event, AliasEvent):
            if anchor in anchors:
                raise ComposerError(
                    f"found duplicate anchor {anchor!r}; first occurrence",
                    anchors[anchor].start_mark,
                    "second occurrence",
                    start,
                )
            anchors[anchor] = node
        if stack:
            stack[-1].add(node)
        else:
            root = node
        if isinstance(node, CollectionNode) and not isinstance(event, AliasEvent):
            stack.append(_Open(node))
            if len(stack) > MAX_DEPTH:
                raise TooDeep(start.line + 1)
    return root


def release(root: Node | None) -> None:
    """Let go of a node tree a node at a time. Freed at once, the tree of a large config (thousands of
    rules, hundreds of thousands of nodes) holds the GIL, so every thread and the event loop too, for
    tens of milliseconds."""
    stack: list[Node] = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                stack += (key, value)
        else:
            continue
        node.value = []
