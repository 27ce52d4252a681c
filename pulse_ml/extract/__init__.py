"""Extract: turn raw agent sessions (OpenHands V0/V1 event streams, chats, feedback) into tables.

A source of session tables, like ``simulate`` and ``llm`` (the LLM labeler).
"""
