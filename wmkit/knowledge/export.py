"""Look at what the agent learned: a world graph as Graphviz DOT or one offline HTML page.

``to_dot`` writes rooms (nodes of type ``room``) as boxes, other entities as ellipses
and states as diamonds; containment edges dashed, transitions labelled by their
trigger, episodic edges dotted; every label carries its confidence. Render it with
``dot -Tsvg world.dot`` where Graphviz is installed; nothing here needs it.

``to_html`` writes one self-contained page (inline CSS, inline SVG, a few lines of
inline JS to filter tables; no external reference, so it opens offline): a map of the
rooms laid out in Python (breadth-first layers of the transition graph, one column
per layer), the rooms with their objects and exits, the entities with their
properties (contested values shown with their evidence), and the rules with
confidence and support, best first.
"""

from __future__ import annotations

import html
import math
from collections import deque
from collections.abc import Iterable

from wmkit.knowledge.graph import EdgeRow, NodeRow, WorldGraph, property_confidence

__all__ = ["ROOM_TYPE", "to_dot", "to_html"]

ROOM_TYPE = "room"
"""Nodes of this type are rooms: the places of the map."""

_SHAPES = {"room": "box", "entity": "ellipse", "state": "diamond"}
_STYLES = {"containment": "dashed", "transition": "solid", "episodic": "dotted"}


def _dot_str(text: str) -> str:
    r"""A DOT double-quoted string: ``\`` and ``"`` escaped, newlines as ``\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def _is_room(node: NodeRow) -> bool:
    return node.kind == "entity" and node.type == ROOM_TYPE


def _value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def to_dot(graph: WorldGraph, *, rooms_only: bool = False) -> str:
    """Return the graph in Graphviz DOT.

    Args:
        graph: the world graph.
        rooms_only: keep only rooms and the transitions between them (the map).

    Returns:
        A ``digraph`` whose node ids are the graph's node ids, quoted.
    """
    keep = {n.id for n in graph.nodes() if not rooms_only or _is_room(n)}
    lines = [
        f"digraph {_dot_str(graph.env_name or 'world')} {{",
        "  graph [rankdir=LR, fontname=Helvetica];",
        "  node [fontname=Helvetica, fontsize=10];",
        "  edge [fontname=Helvetica, fontsize=9];",
    ]
    for node in sorted(graph.nodes(), key=lambda n: n.id):
        if node.id not in keep:
            continue
        shape = _SHAPES["room" if _is_room(node) else node.kind]
        label = node.name if node.name == node.id else f"{node.name}\n[{node.id}]"
        if not _is_room(node):
            label += f" ({node.type})"
        label += "".join(f"\n{k}={_value(v)}" for k, v in sorted(node.properties.items()))
        label += f"\nconf {node.confidence:.2f}"
        fill = ', style=filled, fillcolor="#dde8f5"' if _is_room(node) else ""
        lines.append(f"  {_dot_str(node.id)} [shape={shape}{fill}, label={_dot_str(label)}];")
    for edge in sorted(graph.edges(), key=lambda e: e.key):
        if edge.src_ref not in keep or edge.dst_ref not in keep:
            continue
        label = edge.trigger or ("" if edge.relation != "episodic" else "episodic")
        label = f"{label} ({edge.confidence:.2f})".strip()
        lines.append(
            f"  {_dot_str(edge.src_ref)} -> {_dot_str(edge.dst_ref)} "
            f"[style={_STYLES[edge.relation]}, label={_dot_str(label)}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- HTML --------------------------------------------------------------------------

_CELL_W, _CELL_H, _BOX_W, _BOX_H, _PAD = 170, 70, 130, 40, 20

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top;text-align:left}
th{background:#f0f3f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
.contested{color:#a33}.muted{color:#777}
.map{border:1px solid #ccc;background:#fbfcfe;max-width:100%;overflow:auto}
svg text{font:11px sans-serif}
input.filter{margin:.3em 0;padding:.2em .4em;width:20em}
"""

_JS = """
document.querySelectorAll('input.filter').forEach(function(box){
  box.addEventListener('input', function(){
    var q = box.value.toLowerCase();
    document.querySelectorAll('#' + box.dataset.table + ' tbody tr').forEach(function(row){
      row.style.display = row.textContent.toLowerCase().indexOf(q) < 0 ? 'none' : '';
    });
  });
});
"""


def _layout(rooms: list[str], exits: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    """Grid cell ``(column, row)`` of each room: breadth-first layers, per component.

    Each component starts at its smallest room id; layer = column; components are
    stacked below each other. Deterministic for a given graph.
    """
    neighbours: dict[str, set[str]] = {r: set() for r in rooms}
    for src, dsts in exits.items():
        for dst in dsts:
            if src in neighbours and dst in neighbours and src != dst:
                neighbours[src].add(dst)
                neighbours[dst].add(src)
    cells: dict[str, tuple[int, int]] = {}
    top = 0
    for start in sorted(rooms):
        if start in cells:
            continue
        layers: dict[int, list[str]] = {}
        depth = {start: 0}
        queue = deque([start])
        while queue:
            room = queue.popleft()
            layers.setdefault(depth[room], []).append(room)
            for nxt in sorted(neighbours[room]):
                if nxt not in depth:
                    depth[nxt] = depth[room] + 1
                    queue.append(nxt)
        for column, members in layers.items():
            for row, room in enumerate(members):
                cells[room] = (column, top + row)
        top += max(len(m) for m in layers.values())
    return cells


def _ends(a: tuple[float, float], b: tuple[float, float]) -> tuple[tuple[float, float], ...]:
    """The segment between two room boxes' borders, shifted 4px to its right.

    The shift keeps the arrows of a two-way passage apart; ending on the border keeps
    the arrowhead out from under the box.
    """
    (x1, y1), (x2, y2) = a, b
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy)
    ox, oy = -dy / length * 4, dx / length * 4
    # Fraction of the centre-to-centre segment that lies inside one box.
    inside = min(_BOX_W / 2 / abs(dx) if dx else math.inf, _BOX_H / 2 / abs(dy) if dy else math.inf)
    return (
        (x1 + dx * inside + ox, y1 + dy * inside + oy),
        (x2 - dx * inside + ox, y2 - dy * inside + oy),
    )


def _svg_map(graph: WorldGraph, rooms: list[NodeRow], contents: dict[str, list[NodeRow]]) -> str:
    ids = [r.id for r in rooms]
    shown = set(ids)
    transitions = [
        e
        for e in graph.edges()
        if e.relation == "transition" and e.src_ref in shown and e.dst_ref in shown
    ]
    exits: dict[str, list[str]] = {}
    for e in transitions:
        exits.setdefault(e.src_ref, []).append(e.dst_ref)
    cells = _layout(ids, exits)
    width = _PAD * 2 + _CELL_W * (1 + max((c for c, _ in cells.values()), default=0))
    height = _PAD * 2 + _CELL_H * (1 + max((r for _, r in cells.values()), default=0))

    def centre(room: str) -> tuple[float, float]:
        col, row = cells[room]
        return _PAD + col * _CELL_W + _BOX_W / 2, _PAD + row * _CELL_H + _BOX_H / 2

    parts = [
        f'<svg class="map" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        ' role="img" aria-label="map of rooms">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7"'
        ' markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"'
        ' fill="#567"/></marker></defs>',
    ]
    for e in sorted(transitions, key=lambda e: e.key):
        if e.src_ref == e.dst_ref:
            continue
        (x1, y1), (x2, y2) = _ends(centre(e.src_ref), centre(e.dst_ref))
        title = html.escape(f"{e.trigger or 'transition'}: {e.src_ref} -> {e.dst_ref}")
        opacity = 0.35 + 0.65 * e.confidence
        parts.append(
            f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#567"'
            f' stroke-opacity="{opacity:.2f}" marker-end="url(#arrow)"><title>{title} '
            f"(conf {e.confidence:.2f}, support {e.support})</title></line>"
        )
        if e.trigger:
            parts.append(
                # A third of the way from the source: the two labels of a two-way
                # passage do not land on each other.
                f'<text x="{x1 + (x2 - x1) / 3:.0f}" y="{y1 + (y2 - y1) / 3 - 3:.0f}" fill="#345"'
                f' text-anchor="middle">{html.escape(e.trigger)}</text>'
            )
    for room in rooms:
        col, row = cells[room.id]
        x, y = _PAD + col * _CELL_W, _PAD + row * _CELL_H
        held = len(contents.get(room.id, ()))
        parts.append(
            f"<g><title>{html.escape(room.id)} (conf {room.confidence:.2f}, {held} objects)"
            f'</title><rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="6"'
            ' fill="#dde8f5" stroke="#345"/>'
            f'<text x="{x + _BOX_W / 2:.0f}" y="{y + 17}" text-anchor="middle">'
            f"{html.escape(room.name[:22])}</text>"
            f'<text x="{x + _BOX_W / 2:.0f}" y="{y + 32}" text-anchor="middle" fill="#666">'
            f"{held} objects · {room.confidence:.2f}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(table_id: str, header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A filterable table; cells are HTML already escaped by the caller."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cells) + "</tr>" for cells in rows)
    return (
        f'<input class="filter" data-table="{table_id}" placeholder="filter…">'
        f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _td(text: object, *, num: bool = False) -> str:
    cls = ' class="num"' if num else ""
    return f"<td{cls}>{html.escape(str(text))}</td>"


def _properties(node: NodeRow) -> str:
    out = []
    for key in sorted(node.properties):
        held = node.claims.get(key, ())
        text = f"{key}={_value(node.properties[key])}"
        if len(held) > 1:
            conf = property_confidence(node, key)
            rivals = ", ".join(f"{_value(c.value)} ×{c.support}" for c in held[1:])
            out.append(
                f'<span class="contested" title="winner ×{held[0].support}, conf {conf:.2f}">'
                f"{html.escape(text)} (vs {html.escape(rivals)})</span>"
            )
        else:
            out.append(html.escape(text))
    return "<td>" + "<br>".join(out) + "</td>"


def to_html(graph: WorldGraph, *, title: str | None = None, max_rows: int = 2000) -> str:
    """Return one self-contained HTML page showing the graph.

    Args:
        graph: the world graph.
        title: page title; defaults to the env name.
        max_rows: most rows per table and most rooms on the map (the best supported
            are kept; the page says how many were left out). Keeps big graphs readable.

    Returns:
        The page, UTF-8 text with no external reference (no http(s), no CDN).
    """
    title = title or f"World graph: {graph.env_name or 'unnamed env'}"
    nodes = list(graph.nodes())
    by_id = {n.id: n for n in nodes}
    rooms = sorted((n for n in nodes if _is_room(n)), key=lambda n: (-n.support, n.id))
    others = sorted((n for n in nodes if not _is_room(n)), key=lambda n: (-n.support, n.id))
    rules = sorted(graph.rules(), key=lambda r: (-r.confidence, -r.support, r.id))
    contents: dict[str, list[NodeRow]] = {}
    exits: dict[str, list[EdgeRow]] = {}
    for e in graph.edges():
        if e.relation == "containment" and e.dst_ref in by_id:
            contents.setdefault(e.src_ref, []).append(by_id[e.dst_ref])
        elif e.relation == "transition":
            exits.setdefault(e.src_ref, []).append(e)

    def more(total: int) -> str:
        left = total - max_rows
        return f'<p class="muted">{left} more not shown.</p>' if left > 0 else ""

    stats = graph.stats
    rejected = ", ".join(f"{k}: {v}" for k, v in sorted(graph.rejections.items())) or "none"
    room_rows = [
        [
            _td(room.name),
            "<td>"
            + ", ".join(
                html.escape(o.name) for o in sorted(contents.get(room.id, []), key=lambda o: o.id)
            )
            + "</td>",
            "<td>"
            + "<br>".join(
                html.escape(f"{e.trigger or '?'} → {e.dst_ref} ({e.confidence:.2f})")
                for e in sorted(exits.get(room.id, []), key=lambda e: e.key)
            )
            + "</td>",
            _td(f"{room.confidence:.2f}", num=True),
            _td(room.support, num=True),
        ]
        for room in rooms[:max_rows]
    ]
    node_rows = [
        [
            _td(n.name if n.name == n.id else f"{n.name} [{n.id}]"),
            _td(f"{n.kind}: {n.type}"),
            _properties(n),
            _td("; ".join(n.conditions)),
            _td(f"{n.confidence:.2f}", num=True),
            _td(n.support, num=True),
        ]
        for n in others[:max_rows]
    ]
    rule_rows = [
        [
            _td(r.condition),
            _td(r.action),
            _td(r.recovery or ""),
            _td(f"{r.confidence:.2f}", num=True),
            _td(r.support, num=True),
            _td(", ".join(r.linked_nodes)),
        ]
        for r in rules[:max_rows]
    ]
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{stats.nodes} nodes ({len(rooms)} rooms), {stats.edges} edges, {stats.rules}"
        f" rules, from {stats.scenes} scenes. Parts dropped by validation: "
        f"{html.escape(rejected)}.</p>",
        "<h2>Map of rooms</h2>",
        _svg_map(graph, rooms[:max_rows], contents) if rooms else "<p>No rooms yet.</p>",
        more(len(rooms)),
        "<h2>Rooms</h2>",
        _table("rooms", ("room", "objects", "exits", "conf", "support"), room_rows),
        more(len(rooms)),
        "<h2>Objects and states</h2>",
        _table("nodes", ("node", "kind", "properties", "conditions", "conf", "support"), node_rows),
        more(len(others)),
        "<h2>Rules</h2>",
        _table(
            "rules",
            ("condition", "action", "recovery", "conf", "support", "linked nodes"),
            rule_rows,
        ),
        more(len(rules)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(body)
        + f"<script>{_JS}</script></body></html>\n"
    )
