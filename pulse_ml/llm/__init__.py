"""LLM: litellm client with cache and retries, the labeler, judges and feature discovery.

A source of session-table columns (failure modes, sentiment, judge scores).
"""
