"""Trackers and policies, and the agents made of them."""
