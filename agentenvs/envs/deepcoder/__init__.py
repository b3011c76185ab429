"""DeepCoder-MT: competitive-programming problems solved over several turns with test feedback."""
