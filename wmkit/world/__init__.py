"""Structured world state: facts, entities, relations, atomic actions, timeline."""

from wmkit.world.types import Claim, Delta, Fact, Probe, WorldState, delta_info

__all__ = ["Claim", "Delta", "Fact", "Probe", "WorldState", "delta_info"]
