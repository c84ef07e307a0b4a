"""Learner progress (steps, quizzes, exercises, last position) and its offline-first sync."""
