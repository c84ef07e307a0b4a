"""Lesson content: YAML files -> validated models, locale fallback, JSON Schema export."""
