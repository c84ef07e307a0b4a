"""Instructor analytics: where learners stop, which checks stop them, which distractors win."""
