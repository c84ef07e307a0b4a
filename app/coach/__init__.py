"""The coach: answers a learner's question from their own run and the lessons."""
