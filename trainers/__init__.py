"""Training of the value network and the rule distiller (later issues)."""
