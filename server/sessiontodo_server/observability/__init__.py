"""Metrics, request logs and traces: what operators see."""
