"""Plain data every layer shares: findings and their edits, the fix model, settings."""
