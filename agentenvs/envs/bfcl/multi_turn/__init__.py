"""Multi-turn BFCL: the user's turns played by the env over stateful backends, checked per turn."""
