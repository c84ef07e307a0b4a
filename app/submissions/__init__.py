"""Submissions: submit code, queue it for the grader, store the Result, stream live events."""
