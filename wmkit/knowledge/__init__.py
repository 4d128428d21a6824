"""Curiosity flags, scene packets, the world graph and rule induction (seed 001).

``scenes`` holds curiosity flags and the scene packets they produce; ``delta`` the
knowledge delta a distiller emits and its validation; ``graph`` the per-environment
``WorldGraph`` (merge, evidence, persistence, compaction); ``export`` its DOT and HTML
views; ``rules`` the learned rule model; ``types`` the contracts other layers use (the
``Predictor`` a rule model is, the ``Curiosity`` flag). ``recording`` (trajectories through HF
``datasets``) is imported on its own, so that importing this package stays light.
"""

from wmkit.knowledge.delta import (
    REASONS,
    RELATIONS,
    DeltaEdge,
    DeltaEntity,
    DeltaRule,
    DeltaState,
    KnowledgeDelta,
    Rejection,
    ValidatedDelta,
    delta_from_facts,
    text_tokens,
    validate_delta,
)
from wmkit.knowledge.export import to_dot, to_html
from wmkit.knowledge.graph import (
    EdgeRow,
    GraphError,
    GraphStats,
    MergeError,
    MergeReport,
    NodeRow,
    RuleRow,
    ValueClaim,
    WorldGraph,
    property_confidence,
    row_dict,
    rule_similarity,
)
from wmkit.knowledge.scenes import (
    FLAG_KEY,
    REASON_KEY,
    SCENES_FILE,
    CuriosityDetector,
    FactDelta,
    SceneLog,
    ScenePacket,
    TrueDelta,
    format_curiosity,
    parse_curiosity,
)
from wmkit.knowledge.types import Curiosity, Predictor

__all__ = [
    "FLAG_KEY",
    "REASONS",
    "REASON_KEY",
    "RELATIONS",
    "SCENES_FILE",
    "Curiosity",
    "CuriosityDetector",
    "DeltaEdge",
    "DeltaEntity",
    "DeltaRule",
    "DeltaState",
    "EdgeRow",
    "FactDelta",
    "GraphError",
    "GraphStats",
    "KnowledgeDelta",
    "MergeError",
    "MergeReport",
    "NodeRow",
    "Predictor",
    "Rejection",
    "RuleRow",
    "SceneLog",
    "ScenePacket",
    "TrueDelta",
    "ValidatedDelta",
    "ValueClaim",
    "WorldGraph",
    "delta_from_facts",
    "format_curiosity",
    "parse_curiosity",
    "property_confidence",
    "row_dict",
    "rule_similarity",
    "text_tokens",
    "to_dot",
    "to_html",
    "validate_delta",
]
