"""Discovery: observed traffic becomes an inventory (providers, models, tools, errors, sessions) and an experiment."""
