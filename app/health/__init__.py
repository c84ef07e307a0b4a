"""`GET /healthz`: whether this web process can reach its database and the grading queue."""
