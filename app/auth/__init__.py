"""Accounts, argon2 password hashes, per-device tokens, CSRF protection and rate limits."""
