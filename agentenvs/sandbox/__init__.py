"""Sandboxes that run untrusted code: local (bubblewrap namespaces) and Docker."""
