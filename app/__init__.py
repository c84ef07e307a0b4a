"""Rendezvous: the web app and REST API."""
