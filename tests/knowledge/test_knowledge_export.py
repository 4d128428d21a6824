"""DOT and HTML views of a world graph: structure, escaping, self-containment."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from wmkit.knowledge import WorldGraph, to_dot, to_html

ODD = 'odd "quoted" \\ name'


def small_graph() -> WorldGraph:
    graph = WorldGraph("wmkit/Vault-v0")
    rooms = [{"name": f"room:{r}", "type": "room"} for r in ("hall", "kitchen", "cellar")]
    graph.merge(
        {
            "entities": [
                *rooms,
                {"name": "door:oak", "type": "door", "properties": {"locked": True}},
                {"name": ODD, "type": "thing"},
            ],
            "states": [{"name": "door_open", "type": "door_state", "conditions": ["door.open"]}],
            "edges": [
                {"relation": "containment", "src_ref": "room:hall", "dst_ref": "door:oak"},
                {"relation": "containment", "src_ref": "room:cellar", "dst_ref": ODD},
                {"relation": "transition", "src_ref": "room:hall", "dst_ref": "room:kitchen",
                 "trigger": "go north"},
                {"relation": "transition", "src_ref": "room:kitchen", "dst_ref": "room:cellar",
                 "trigger": "go down"},
                {"relation": "episodic", "src_ref": "door_open", "dst_ref": "door:oak"},
            ],
            "rules": [
                {"condition": "door.locked == true", "action": "open_door_fail",
                 "confidence": 0.9, "recovery": "use_key_on_door", "linked_nodes": ["door:oak"]},
                {"condition": "lamp.lit == false", "action": "read note fails",
                 "confidence": 0.4},
            ],
        },
        scene="s1",
    )  # fmt: skip
    graph.merge(
        {"entities": [{"name": "door:oak", "type": "door", "properties": {"locked": False}}]},
        scene="s2",
    )
    return graph


_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_NODE = re.compile(rf"^\s*{_QUOTED} \[(.*)\];$")
_EDGE = re.compile(rf"^\s*{_QUOTED} -> {_QUOTED} \[(.*)\];$")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse_dot(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Node ids -> attributes and (src, dst, attributes) edges, from our DOT dialect."""
    lines = text.strip().splitlines()
    assert lines[0].startswith("digraph ") and lines[0].endswith("{") and lines[-1] == "}"
    nodes, edges = {}, []
    for line in lines[1:-1]:
        if m := _EDGE.match(line):
            edges.append((_unquote(m.group(1)), _unquote(m.group(2)), m.group(3)))
        elif m := _NODE.match(line):
            nodes[_unquote(m.group(1))] = m.group(2)
        else:
            assert re.match(r"^\s*(graph|node|edge) \[.*\];$", line), line
    return nodes, edges


def test_dot_holds_every_node_and_edge_with_styles_and_labels():
    graph = small_graph()
    nodes, edges = parse_dot(to_dot(graph))
    assert set(nodes) == {n.id for n in graph.nodes()}
    assert "shape=box" in nodes["room:hall"] and "shape=diamond" in nodes["door_open"]
    assert "locked=false" in nodes["door:oak"]  # the tie went to the latest report
    assert {(s, d) for s, d, _ in edges} == {(e.src_ref, e.dst_ref) for e in graph.edges()}
    by_pair = {(s, d): attrs for s, d, attrs in edges}
    assert "style=dashed" in by_pair[("room:hall", "door:oak")]
    assert "go north" in by_pair[("room:hall", "room:kitchen")]
    assert "style=dotted" in by_pair[("door_open", "door:oak")]
    assert all(src in nodes and dst in nodes for src, dst, _ in edges)
    assert ODD in nodes  # quotes and backslashes survive the quoting


def test_the_map_keeps_rooms_and_transitions_only():
    nodes, edges = parse_dot(to_dot(small_graph(), rooms_only=True))
    assert set(nodes) == {"room:hall", "room:kitchen", "room:cellar"}
    assert {(s, d) for s, d, _ in edges} == {
        ("room:hall", "room:kitchen"),
        ("room:kitchen", "room:cellar"),
    }


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_graphviz_renders_the_dot(tmp_path):
    path = tmp_path / "world.dot"
    path.write_text(to_dot(small_graph()))
    done = subprocess.run(["dot", "-Tsvg", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        self.attrs += attrs
        self.scripts += tag == "script"
        if tag not in {"meta", "br", "input", "rect", "path", "line"}:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.attrs += attrs

    def handle_endtag(self, tag):
        if tag in {"rect", "path", "line"} and (not self.stack or self.stack[-1] != tag):
            return
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_one_self_contained_page_with_map_rooms_and_rules():
    page = to_html(small_graph())
    assert "http://" not in page and "https://" not in page
    parser = _Tags()
    parser.feed(page)
    parser.close()
    assert parser.stack == []  # every tag closed, in order
    assert parser.scripts == 1
    assert not any(name in {"src", "href"} for name, _ in parser.attrs)
    text = " ".join(parser.text)
    assert "<svg" in page and "room:kitchen" in text and "go north" in text
    assert "door.locked == true" in text and "use_key_on_door" in text
    assert "0.63" in text  # rule confidence (1 + 0.9) / 3
    assert "locked=false (vs true ×1)" in text  # the contested value and its rival
    assert "5 nodes" not in text and "6 nodes (3 rooms)" in text


def test_html_escapes_what_the_agent_wrote():
    graph = WorldGraph("x")
    graph.merge(
        {
            "entities": [{"name": "<script>alert(1)</script>", "type": "room"}],
            "rules": [{"condition": "a < b & c", "action": "x > y", "confidence": 1.0}],
        },
        scene="s",
    )
    page = to_html(graph)
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "a &lt; b &amp; c" in page


def test_html_of_an_empty_graph_and_row_limits():
    assert "No rooms yet" in to_html(WorldGraph())
    page = to_html(small_graph(), max_rows=1)
    assert "2 more not shown" in page  # rooms: 3, one shown
